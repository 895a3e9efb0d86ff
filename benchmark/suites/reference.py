"""A suite's published records as a reference: what a user's rerun is compared with.

``results/reference/<suite>/`` holds the records of one run of the suite as it was published
(its ``runs/``, leaderboard and explorer), ``spread.json`` (how far the suite's numbers move from
seed to seed and from one CPU kind to another, measured once) and ``times.md`` (the suite's wall
time on each CPU kind it was timed on). `check` compares a user's records with it:

* on the reference's CPU kind (the same processor, vector kernels and torch), a run is
  deterministic, so every value must be equal, bit for bit;
* on another kind the order of floating-point operations differs and a trained run drifts like
  a new seed, so a method's mean over the user's seeds is compared with the reference's mean
  over the same seeds against the seeds' spread: the difference of two means of n and m
  independent seeds has the standard deviation sigma * sqrt(1/n + 1/m), with sigma the seeds'
  standard deviation pooled over the kinds measured; beyond the two-sided 99% bound of Student's
  t with the pooled degrees of freedom it is a finding.

`measure_spread` computes ``spread.json`` from the records of several seeds on several kinds,
and checks the assumption above: the same seed on two kinds differs by about sigma * sqrt(2).
"""
from __future__ import annotations

import datetime
import json
import math
import shutil
from pathlib import Path
from statistics import fmean
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from scipy import stats

from benchmark.atomic_io import atomic_write_text
from benchmark.names import PROTOCOLS, RANDOM_INIT, method_label
from benchmark.reports.records import load_records

# What the check compares: accuracies a user reads first.
METRICS: Tuple[Tuple[str, str], ...] = (('knn', 'top1'), ('linear_fast', 'top1'),
                                        ('online_linear', 'top1'))
LEVEL = 0.99  # the bound's two-sided coverage
SPREAD, TIMES, TIMING = 'spread.json', 'times.md', 'demo_time.json'
Key = Tuple[str, str, int, str, str]  # method, backbone, epochs, protocol, metric


def kind(record: dict) -> str:
    """A record's CPU kind: 'AMD EPYC (family 25, model 17, AVX-512), AVX512 kernels' (the
    kernels torch dispatched to decide the order of floating-point operations)."""
    host = record.get('host') or {}
    kernels = host.get('cpu_kernels')
    return f"{host.get('cpu', 'unknown CPU')}, {kernels or 'unrecorded'} kernels"


def torch_of(record: dict) -> str:
    return (record.get('versions') or {}).get('torch') or '?'


def seed_values(records: Iterable[dict]) -> Dict[Key, Dict[int, float]]:
    """(method, backbone, epochs, protocol, metric) -> {seed: value} of every number `METRICS`
    names: a value is only ever compared with one of the same method and setting."""
    out: Dict[Key, Dict[int, float]] = {}
    for record in records:
        for protocol, metric in METRICS:
            value = ((record.get('protocols') or {}).get(protocol) or {}).get(
                'metrics', {}).get(metric)
            if isinstance(value, (int, float)):
                key = (record['method'], record.get('backbone'), record.get('pretrain_epochs'),
                       protocol, metric)
                out.setdefault(key, {})[record['seed']] = value
    return out


SHORT = {'knn': 'kNN', 'linear_fast': 'linear (fast)', 'online_linear': 'linear (online)'}


def _label(key: Key) -> str:
    return f'{SHORT.get(key[3], PROTOCOLS[key[3]])} {key[4]}'


def measure_spread(kinds: Dict[str, Sequence[dict]]) -> dict:
    """The seeds' spread of every (method, protocol, metric), from records of several kinds.

    Args:
        kinds: Each CPU kind's name -> its records (one per method and seed).

    Returns:
        ``{'kinds': {name: seeds}, 'metrics': [{method, protocol, metric, sd, df, n, mean by
        kind, cross_kind_sd}]}``: ``sd`` is the seeds' standard deviation pooled over the kinds
        (``df`` degrees of freedom), ``cross_kind_sd`` that of the same seed's difference
        between two kinds divided by sqrt(2) (about ``sd`` when a kind acts as a new seed), and
        ``equal_across_kinds`` whether every seed gave the same value on every kind.
    """
    per_kind = {name: seed_values(records) for name, records in kinds.items()}
    keys = sorted({key for values in per_kind.values() for key in values})
    rows = []
    for key in keys:
        groups = [values[key] for values in per_kind.values() if len(values.get(key, {})) >= 1]
        squares = sum(sum((v - fmean(g.values())) ** 2 for v in g.values()) for g in groups)
        df = sum(len(g) - 1 for g in groups)
        names = [name for name, values in per_kind.items() if key in values]
        diffs = [per_kind[a][key][s] - per_kind[b][key][s]
                 for i, a in enumerate(names) for b in names[i + 1:]
                 for s in sorted(set(per_kind[a][key]) & set(per_kind[b][key]))]
        rows.append(dict(
            method=key[0], backbone=key[1], epochs=key[2], protocol=key[3], metric=key[4],
            sd=math.sqrt(squares / df) if df else None, df=df,
            n={name: len(per_kind[name][key]) for name in names},
            mean={name: fmean(per_kind[name][key].values()) for name in names},
            cross_kind_sd=(math.sqrt(sum(d * d for d in diffs) / len(diffs) / 2)
                           if diffs else None),
            equal_across_kinds=bool(diffs) and all(d == 0 for d in diffs)))
    seeds = {name: sorted({r['seed'] for r in records}) for name, records in kinds.items()}
    return dict(level=LEVEL, kinds=seeds, metrics=rows)


def bound(sd: float, df: int, n: int, m: int) -> float:
    """The two-sided `LEVEL` bound on the difference of two means of n and m seeds."""
    return stats.t.ppf(0.5 + LEVEL / 2, df) * sd * math.sqrt(1 / n + 1 / m)


def _spread_rows(spread: Optional[dict]) -> Dict[Key, dict]:
    return {(r['method'], r.get('backbone'), r.get('epochs'), r['protocol'], r['metric']): r
            for r in (spread or {}).get('metrics', [])}


def compare(user: Sequence[dict], reference: Sequence[dict],
            spread: Optional[dict]) -> Tuple[List[dict], dict]:
    """Each (method, metric) of the user's records beside the reference's, and a verdict.

    Returns:
        (rows, sides): rows of {method, metric, published, yours, seeds, verdict, finding},
        and sides {'reference'|'yours': (kinds, torch versions, seeds)}.
    """
    mine, theirs = seed_values(user), seed_values(reference)
    same_kind = ({(kind(r), torch_of(r)) for r in user}
                 == {(kind(r), torch_of(r)) for r in reference} and len({kind(r) for r in user}) == 1)
    rows, spreads = [], _spread_rows(spread)
    for key in sorted(mine, key=lambda k: (k[0] != RANDOM_INIT, k)):
        yours, published = mine[key], theirs.get(key, {})
        seeds = sorted(set(yours) & set(published))
        row = dict(method=method_label(key[0]), metric=_label(key), seeds=seeds,
                   yours=fmean(yours[s] for s in seeds) if seeds else fmean(yours.values()),
                   published=fmean(published[s] for s in seeds) if seeds else None, finding=False)
        if not seeds:
            row['verdict'] = 'not published (another setting, or other seeds)'
        elif all(yours[s] == published[s] for s in seeds):
            row['verdict'] = 'equal, bit for bit'
        elif same_kind:
            row.update(verdict='DIFFERS on the published CPU kind, where every value should be '
                       'equal: a finding', finding=True)
        else:
            row.update(_against_spread(row, spreads.get(key), len(seeds)))
        rows.append(row)
    sides = {name: (sorted({kind(r) for r in records}), sorted({torch_of(r) for r in records}),
                    sorted({r['seed'] for r in records if r['method'] != RANDOM_INIT}))
             for name, records in (('reference', reference), ('yours', user))}
    return rows, sides


def _against_spread(row: dict, spread: Optional[dict], n: int) -> dict:
    diff = row['yours'] - row['published']
    if spread is None or not spread.get('sd'):
        if spread is not None and spread.get('equal_across_kinds'):
            return dict(verdict=f'{diff:+.2f}: it was equal on every CPU kind measured: a '
                        'finding', finding=True)
        return dict(verdict=f'{diff:+.2f}; no measured spread to judge it by', finding=False)
    limit = bound(spread['sd'], spread['df'], n, n)
    if abs(diff) <= limit:
        return dict(verdict=f'{diff:+.2f}, within the seeds\' spread (±{limit:.2f})',
                    finding=False)
    return dict(verdict=f'{diff:+.2f}, BEYOND the seeds\' spread (±{limit:.2f}): a finding',
                finding=True)


def check_lines(rows: Sequence[dict], sides: dict, reference_dir: str) -> List[str]:
    """The reproduction block a user reads at the end of the demo."""
    def side(name: str) -> str:
        kinds, torches, seeds = sides[name]
        return (f"{' / '.join(kinds)}, torch {', '.join(torches)}, seeds "
                f"{' '.join(map(str, seeds)) or '-'}")
    compared = sorted({s for r in rows for s in r['seeds']})
    lines = [f'Reproduction against the published records ({reference_dir}):',
             f'  published: {side("reference")}', f'  yours:     {side("yours")}',
             f"  compared seed for seed on seeds {' '.join(map(str, compared)) or '-'} "
             '(values: means over them)']
    width = max([len(r['method']) for r in rows] + [6])
    mwidth = max([len(r['metric']) for r in rows] + [6])
    lines.append(f"  {'method':<{width}}  {'metric':<{mwidth}}  published      yours  "
                 f"difference")
    for r in rows:
        published = '—' if r['published'] is None else f"{r['published']:.2f}"
        lines.append(f"  {r['method']:<{width}}  {r['metric']:<{mwidth}}  {published:>9}  "
                     f"{r['yours']:>9.2f}  {r['verdict']}")
    findings = sum(r['finding'] for r in rows)
    if all(r['published'] is None for r in rows):
        return lines + ['  nothing to compare: the published records hold another setting or '
                        'other seeds']
    lines.append(f'  {findings} finding(s): a value beyond the spread, or a difference on the '
                 'published CPU kind, is worth a look (docs/suites.md#the-demo-and-its-reference)'
                 if findings else
                 '  no finding: every value is equal, or within the spread of seeds a different '
                 'CPU kind brings')
    return lines


def store(results: Path, reference: Path) -> List[Path]:
    """Make ``results`` (a suite's folder of records and tables) the published reference: its
    records, tables, explorer and figures replace the reference's, which keeps its spread and
    gains the run's time for its CPU kind (`TIMING`, written by the demo) in `TIMES`."""
    timing = results / TIMING
    if not (results / 'runs').is_dir():
        raise FileNotFoundError(f'{results}/runs: no records to publish; run the suite first')
    staging = reference.with_name(reference.name + '.new')
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(results, staging, ignore=shutil.ignore_patterns(TIMING, '*.tmp', 'wandb'))
    for name in (SPREAD, TIMES):
        if (reference / name).exists():
            shutil.copy2(reference / name, staging / name)
    if timing.exists():
        write_times(staging / TIMES, json.loads(timing.read_text()))
    old = reference.with_name(reference.name + '.old')
    if reference.exists():
        reference.rename(old)
    staging.rename(reference)
    shutil.rmtree(old, ignore_errors=True)
    return sorted(p for p in reference.iterdir() if p.is_file())


def write_times(path: Path, timing: dict) -> None:
    """Add or replace the row of ``timing``'s CPU kind in the table of demo times."""
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            cells = [c.strip() for c in line.strip('|').split('|')]
            if line.startswith('| ') and len(cells) == 4 and cells[0] not in ('CPU kind', '---'):
                rows[cells[0]] = cells
    rows[timing['kind']] = [timing['kind'], f"{timing['seconds'] / 60:.1f} min",
                            str(timing['runs']), timing['date']]
    text = ('# How long the demo takes\n\n_Generated by `make publish` from the demo runs it '
            'published, never typed: `make demo` from nothing (the environment installed), '
            'nothing else running._\n\n| CPU kind | the whole demo | runs trained | date |\n'
            '|---|---|---|---|\n' + ''.join(f'| {" | ".join(r)} |\n' for _, r in
                                                sorted(rows.items())))
    atomic_write_text(str(path), text)


def load_spread(reference: Path) -> Optional[dict]:
    path = reference / SPREAD
    return json.loads(path.read_text()) if path.exists() else None


def record_timing(results: Path, started: float, ended: float, records: Sequence[dict]) -> dict:
    """The demo's wall time on this CPU kind, with how many of its runs it trained or evaluated
    now, written to ``results/TIMING`` for `store` (a rerun that only rendered keeps the time
    of the run that trained)."""
    start = datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
    fresh = [r for r in records
             if datetime.datetime.fromisoformat(r['created']) >= start]
    timing = dict(kind=kind(fresh[0] if fresh else records[-1]) if records else 'unknown',
                  seconds=ended - started, runs=len(fresh), date=start.strftime('%Y-%m-%d'))
    if fresh:
        atomic_write_text(str(results / TIMING), json.dumps(timing, indent=1) + '\n')
    return timing
