"""A suite's statistics keys (``min_seeds``, ``min_effect``, ``equivalence_margin``,
``primary``) read into the `StatsPolicy` its comparisons are judged by (docs/suites.md).

Comparisons with a baseline form two families, each corrected for multiplicity on its own:
``primary`` names the headline comparisons (by default: each method run as the suite runs it,
against its baseline, on the protocols linear_paper, linear_fast and knn, on the pretraining
data; ``primary = dict(protocols=[...], eval_data=[...], methods=[...])`` replaces any of the
three), and every other comparison (grid variants, other protocols, other evaluation data) is
exploratory.
"""
from __future__ import annotations

from typing import Any, Dict

from benchmark.cli import did_you_mean
from benchmark.names import BASELINES, DATA_TYPES, protocol_name
from benchmark.reports.comparisons import StatsPolicy

PRIMARY_KEYS = ('protocols', 'eval_data', 'methods')


class SuiteError(ValueError):
    """A bad suite file or option: one line naming the file, the run or the key (raised here
    for the statistics keys, and by ``benchmark.suites.spec`` for the rest)."""


def _number(value: Any, where: str, low: float, integer: bool = False) -> Any:
    kind = int if integer else (int, float)
    if value is None or isinstance(value, bool) or not isinstance(value, kind) or value < low \
            or (not integer and value == low and low == 0):
        what = f'an integer >= {low}' if integer else 'a number > 0 (metric points)'
        raise SuiteError(f'{where} must be {what}, got {value!r}')
    return value


def read_policy(cfg: Dict[str, Any], where: str) -> StatsPolicy:
    """The suite's `min_seeds`, `min_effect`, `equivalence_margin` and `primary` keys."""
    options: Dict[str, Any] = {}
    if cfg.get('min_seeds') is not None:
        options['min_seeds'] = _number(cfg['min_seeds'], f'{where}: min_seeds', 2, integer=True)
    for key in ('min_effect', 'equivalence_margin'):
        if cfg.get(key) is not None:
            options[key] = float(_number(cfg[key], f'{where}: {key}', 0))
    primary = cfg.get('primary')
    if primary is not None:
        if not isinstance(primary, dict):
            raise SuiteError(f"{where}: primary must be a dict like dict(protocols=['knn']), "
                             f'got {primary!r}')
        for key in primary:
            if key not in PRIMARY_KEYS:
                raise SuiteError(f'{where}: primary: unknown key {key!r}'
                                 f'{did_you_mean(key, PRIMARY_KEYS)}; allowed: '
                                  f"{', '.join(PRIMARY_KEYS)}")
        for key, option in (('protocols', 'primary_protocols'),
                            ('eval_data', 'primary_eval_data'), ('methods', 'primary_methods')):
            value = primary.get(key)
            if value is None:
                continue
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, (list, tuple)) or not items or not all(
                    isinstance(v, str) for v in items):
                raise SuiteError(f'{where}: primary.{key} must be a non-empty list of names, '
                                 f'got {value!r}')
            if key == 'protocols':
                try:
                    items = [protocol_name(v) for v in items]
                except ValueError as err:
                    raise SuiteError(f'{where}: primary.protocols: {err}') from None
            if key == 'methods':
                unknown = [v for v in items if v not in BASELINES]
                if unknown:
                    raise SuiteError(f'{where}: primary.methods: {unknown} have no baseline; '
                                     f'compared methods are {sorted(BASELINES)}')
            if key == 'eval_data':
                unknown = [v for v in items if v not in DATA_TYPES]
                if unknown:
                    raise SuiteError(f'{where}: primary.eval_data: {unknown} unknown; one of '
                                     f'{sorted(DATA_TYPES)}')
            options[option] = tuple(items)
    return StatsPolicy(**options)
