"""Seeds until decided: ``tools/run_suite.py SUITE --until-decided [--max-seeds N] [--round K]``.

Trains seeds in rounds for the comparisons of the primary family that are still open, looks at
them with the group-sequential design of `benchmark.reports.sequential` (alpha spent over the
looks planned in advance, the exact sign-flip test and Holm at each look's level), and stops a
comparison once it reads better, worse or, with the suite's ``equivalence_margin``, equivalent;
a method gets more seeds only while a comparison it is in (as method or baseline) is open.

The design and every look taken are written to ``<results>/suites/<name>/sequential.json``
(atomically, after each look): an interrupted run continues the same design from its next look
(the runs of an unfinished round resume or are skipped as usual), and a rerun with other
``--max-seeds`` or ``--round`` stops in one line instead of changing the design midway.
`until_decided` is the loop on its own (records and training passed in), which the simulations
of ``tests/suites/test_until_decided.py`` drive with stand-in training.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from benchmark.atomic_io import atomic_write_text
from benchmark.layout import SEQUENTIAL_FILE
from benchmark.names import BASELINES
from benchmark.reports import sequential
from benchmark.reports.comparisons import StatsPolicy
from benchmark.suites.spec import SuiteError

Records = Callable[[], List[dict]]
Train = Callable[[Set[str], List[int]], bool]  # methods, seeds -> False when interrupted


def seed_sequence(seeds: Sequence[int], n: int) -> List[int]:
    """The first n seeds: the suite's own in order, then the next integers after its largest."""
    out = sorted(set(seeds))[:n]
    while len(out) < n:
        out.append((out[-1] + 1) if out else 0)
    return out


def read_state(path: Path) -> Dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as err:
        raise SuiteError(f'{path} is not a sequential design ({err}); it holds the looks '
                         'already taken: restore it, or remove it to start a new design') from None


def write_state(path: Path, state: Dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(path), json.dumps(state, indent=1, sort_keys=True) + '\n')


def recorded_seeds(records: List[dict], methods: Set[str], suite_seeds: Sequence[int] = ()
                   ) -> int:
    """How many seeds of the sequence, from its first on, every method has an ok record of."""
    have = [{int(r['seed']) for r in records if r['method'] == m and r.get('status') == 'ok'}
            for m in methods]
    if not have:
        return 0
    common = set.intersection(*have)
    n = 0
    while seed_sequence(suite_seeds, n + 1)[-1] in common:
        n += 1
    return n


def check_design(state: Dict[str, Any], max_seeds: int, round_size: int, path: Path,
                 methods: Set[str], alpha: float) -> None:
    """The recorded design is the one this command asks for, else one line saying so."""
    design = state['design']
    recorded = state.get('methods', sorted(methods))
    if sorted(methods) != recorded or alpha != design['alpha']:
        raise SuiteError(f"{path} holds a design for the methods {', '.join(recorded)} "
                         f"at alpha {design['alpha']:g}, and the suite now has "
                         f"{', '.join(sorted(methods))} at alpha {alpha:g}; remove the file to "
                         'start a new design')
    if (design['max_seeds'], design['round']) != (max_seeds, round_size):
        raise SuiteError(
            f"{path} holds a design with --max-seeds {design['max_seeds']} --round "
            f"{design['round']} and {len(state.get('looks', []))} look(s) taken; continue it with "
            'those values (changing the design midway would void its error rate), or remove '
            'the file to start a new design')


def needed_methods(state: Dict[str, Any], methods: Set[str]) -> Set[str]:
    """The methods of the comparisons still open, and their baselines (all before a look)."""
    if not state.get('looks'):
        return set(methods)
    out: Set[str] = set()
    for key in sequential.open_comparisons(state):
        method = key.split('|')[0]
        out |= {method, BASELINES.get(method, method)}
    return out & methods


def make_state(records: Records, train: Train, methods: Set[str], suite_seeds: Sequence[int],
               policy: StatsPolicy, max_seeds: int, round_size: int,
               out: Callable[..., None], dry_run: bool = False) -> Optional[Dict[str, Any]]:
    """A new design, once every method has records to count the family from: first trains up
    to min_seeds seeds where a method has none (not in a dry run: None then)."""
    found = records()
    if recorded_seeds(found, methods, suite_seeds) == 0:
        if dry_run:
            return None
        seeds = seed_sequence(suite_seeds, min(policy.min_seeds, max_seeds))
        out(f'until decided: no record of every method yet; training seeds {seeds} first')
        if not train(set(methods), seeds):
            return None
        found = records()
    size = sequential.family_size(found, policy)
    if size == 0:
        raise SuiteError('--until-decided: the suite has no primary comparison (a method and '
                         'its baseline on a primary protocol); see the suite keys primary and '
                         'evaluations')
    try:
        design = sequential.make_design(recorded_seeds(found, methods, suite_seeds), max_seeds,
                                        round_size, size, policy.alpha, policy.min_seeds)
    except ValueError as err:
        raise SuiteError(str(err)) from None
    return dict(design=design.as_dict(), looks=[], methods=sorted(methods),
                started=datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC'))


def until_decided(state_path: Path, records: Records, train: Train, methods: Set[str],
                  suite_seeds: Sequence[int], policy: StatsPolicy, max_seeds: int,
                  round_size: int, out: Callable[..., None] = print) -> Dict[str, Any]:
    """Run the looks still to take; the state (design and looks) after the last one taken.
    Stops early, the state saved, where `train` says it was interrupted (state['interrupted'])."""
    state = read_state(state_path)
    if state:
        check_design(state, max_seeds, round_size, state_path, methods, policy.alpha)
    else:
        made = make_state(records, train, methods, suite_seeds, policy, max_seeds, round_size,
                          out)
        if made is None:
            return dict(interrupted=True)
        state = made
        write_state(state_path, state)
    design = sequential.design_from(state['design'])
    for index in range(len(state['looks']), len(design.looks)):
        need = needed_methods(state, methods)
        if not need:
            break
        n = design.looks[index]
        seeds = seed_sequence(suite_seeds, n)
        out(f'until decided: look {index + 1} of {len(design.looks)} at {n} seeds (level '
            f'{design.alphas[index]:.4g}): training {", ".join(sorted(need))} up to seed '
            f'{seeds[-1]}')
        if not train(need, seeds):
            state['interrupted'] = True
            return state
        judged = sequential.judge(records(), policy, design.alphas[index],
                                  closed=list(sequential.decided(state)), seeds=seeds)
        look = sequential.take_look(state, design, index, judged)
        state['looks'].append(look)
        state.pop('interrupted', None)
        write_state(state_path, state)
        still = sequential.open_comparisons(state)
        out(f"until decided: look {index + 1}: decided "
            f"{', '.join(_short(k, judged) for k in look['decided']) or 'none'}; "
            f"open {', '.join(_short(k) for k in still) or 'none'}")
        if not still:
            break
    return state


def _short(key: str, judged: Optional[Dict] = None) -> str:
    """'mixco knn on digits' (and ' better' with its look's judgement) for a comparison."""
    method, data, protocol, _ = key.split('|')
    verdict = ''
    if judged is not None:
        verdict = ' ' + judged[tuple(key.split('|'))]['verdict']
    return f'{method} {protocol} on {data}{verdict}'


def state_path(results_dir: str) -> Path:
    return Path(results_dir) / SEQUENTIAL_FILE
