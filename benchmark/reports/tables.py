"""The leaderboard as Markdown and CSV (pure rendering of ``leaderboard.build_rows`` rows).

Markdown: one section per backbone, pretraining epochs and data; in each an accuracy table and a
cluster-index table. Every row shows its metrics as mean ± sample std (n), the exact interval of
its main metric (or, under the suite's minimum of seeds, their range), and where it has a
baseline the paired comparison (Δ with its interval at the level its family judged it, the
sign-flip test and its Holm adjustment, the verdict with its family, P(better) as the share of
seeds won, planning), and where the paper has the same row, ours minus the paper. The legend
says how each number is made.
"""
from __future__ import annotations

import csv
import io
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmark.names import ACCURACY, CLUSTER, METRICS, METRIC_FORMATS, PROTOCOLS, protocol_family
from benchmark.reports import stats
from benchmark.reports.comparisons import main_metric
from benchmark.reports.compute import compute_text
from benchmark.reports.figures import figure_lines
from benchmark.reports.leaderboard import (GROUP, LEGACY_MARK, LEGACY_NOTE, SUITE, Row,
                                           common_overrides, override_text,
                                           section_title)

LEGEND = (
    'Cells are mean ± sample std (ddof=1) over seeds, n = number of seeds (a seed recorded twice '
    'for one setting counts once: the newest record). One row per exact configuration: rows of '
    'one method with different settings stay apart, labelled with the config keys in which they '
    "depart from the method's shipped config. Rows labelled '(paper)' with source 'paper Table N' "
    "are the paper's published numbers; 'this suite' rows come from our records. Protocols marked "
    "'online' are measured during pretraining, the others after it. "
    'Δ: the method minus its baseline (MoCo-v2 or SimCLR) on the main metric (top1; '
    'davies_bouldin for cluster indices, lower is better). ' + stats.METHODS_LEGEND
    + ' ours − paper: our mean minus the paper\'s number for the same backbone, data, epochs, '
    'protocol and method, for rows that run the shipped config as it is.')


AGGREGATE_LEGEND = (
    'Across tasks (rliable, Agarwal et al. 2021): a task is one evaluation data and protocol; '
    'all are top-1 % (one scale, not normalised). IQM Δ: rliable\'s estimator, the interquartile '
    'mean (25%-trimmed), of every task\'s seed-by-seed differences with the baseline (not the '
    'difference of two IQMs); mean Δ: their mean. P(improve): '
    'rliable\'s probability of improvement, P(method > baseline) over all pairs of their seeds '
    '(ties half), averaged over tasks. Intervals: 95% percentile stratified bootstrap (2,000 '
    'resamples, fixed seed) that resamples seeds jointly across the tasks evaluated on the same '
    'checkpoints, each method\'s own for P(improve) (as rliable; ignoring the pairing of seeds '
    'makes it wider); shown from min_seeds seeds on; descriptive, '
    'outside the families\' Holm. Friedman: over seeds as blocks (a seed gives every method the '
    'same initialisation and data order; its tasks share its checkpoint, so tasks are not '
    'independent blocks), each method\'s mean over the tasks at that seed; p by enumerating the '
    'within-seed permutations of the ranks; CD: the critical difference of average ranks from '
    'the same permutations (max-T: familywise alpha 0.05 when all methods are alike); the '
    'profile: the share of a task\'s '
    'seeds above each top-1, averaged over tasks, with its bootstrap band.')
AGGREGATE_POINTER = ("Across tasks: IQM and mean of the seed-by-seed Δ over the tasks, "
                     "rliable's probability of improvement, stratified bootstrap intervals; "
                     "the evaluation docs, 'Across tasks', say more.")
LEGEND_TITLE = 'How the numbers are made'


def legend_lines(rows: Sequence[Row], across: bool) -> List[str]:
    """The page's one legend: how its tables' numbers are made, what marks an older record
    (where a row has one) and, where the page has aggregates across tasks, how they are
    made."""
    lines = [LEGEND]
    if any(r['legacy'] for r in rows):
        lines += ['', LEGACY_NOTE]
    return lines + (['', AGGREGATE_LEGEND] if across else [])


def format_stat(stat: Optional[Dict[str, Any]], metric: str) -> str:
    """'mean ± std (n=K)', 'value (n=1)', 'NA', the paper's printed value, or '' if absent."""
    if stat is None:
        return ''
    if stat['text'] is not None:
        return stat['text']
    if not stat['n']:
        return 'NA'
    fmt = METRIC_FORMATS.get(metric, '.4g')
    text = format(stat['mean'], fmt)
    if stat['std'] is not None:
        text += f" ± {stat['std']:{fmt}}"
    na = f", {len(stat['na'])} NA" if stat['na'] else ''
    return f"{text} (n={stat['n']}{na})"


def signed(value: float, fmt: str, sign: str = '+') -> str:
    """`value` formatted with `fmt` (and its sign with sign='+'); a value that rounds to zero
    reads '+0.00' or '0.00', never '-0.00'."""
    text = f'{value:{sign}{fmt}}'
    if text.startswith('-'):
        try:
            if float(text) == 0:
                return (sign or '') + text[1:]
        except ValueError:
            pass
    return text


def format_interval(ci: Optional[Sequence[float]], fmt: str, sign: str = '') -> str:
    return f'[{signed(ci[0], fmt, sign)}, {signed(ci[1], fmt, sign)}]' if ci else ''


def format_p(p: Optional[float]) -> str:
    """A p-value with 2 significant digits; '< 0.0001' below that."""
    if p is None:
        return ''
    return '< 0.0001' if p < 1e-4 else f'{p:.2g}'


def format_level(level: Optional[float]) -> str:
    """'95%', '93.8%', '97.5%': an interval's confidence level."""
    return '' if level is None else f'{100 * level:.3g}%'


def _enough(row: Row, n: Optional[int]) -> bool:
    return bool(n) and n >= row.get('min_seeds', stats.MIN_SEEDS)


def interval_cell(row: Row, metric: str) -> str:
    """The interval of a row's mean: the sign-flip interval with its level where the row has
    the suite's minimum of seeds (the level only where it is not 95%), else the seeds' range."""
    stat = row['metrics'].get(metric) or {}
    fmt = METRIC_FORMATS[metric]
    if stat.get('text') is not None or not stat.get('n') or stat['n'] < 2:
        return ''
    if not _enough(row, stat['n']):
        return f"range {format_interval(stat['range'], fmt)}"
    level = stat['ci_level']
    return format_interval(stat['ci'], fmt) + ('' if abs(level - 0.95) < 5e-4
                                               else f' ({format_level(level)})')


def delta_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'+1.20 [−0.31, +2.71] vs mocov2 (6 paired seeds)' with the interval's level where it is
    not 95%; under the minimum of seeds the differences seed by seed; the Δ of the means where
    no seed is shared (the paper's rows)."""
    if not compare:
        return ''
    fmt = METRIC_FORMATS[compare['metric']]
    paired = compare['paired']
    if not paired:
        return f"{signed(compare['delta'], fmt)} vs {compare['baseline_label']} (means)"
    seeds = f"({paired['n']} paired seed{'s' * (paired['n'] > 1)})"
    if paired['ci'] is None:
        per_seed = ', '.join(f'{signed(d, fmt)}' for d in paired['diffs'])
        why = ('' if paired['p'] is None else f"; no interval at the family's level "
               f"(1 − {format_p(compare.get('level'))}) from {paired['n']} seeds")
        return (f"{signed(paired['delta'], fmt)} vs {compare['baseline_label']} {seeds}; "
                f"per seed {per_seed}{why}")
    level = format_level(paired['ci_level'])
    return (f"{signed(paired['delta'], fmt)} {format_interval(paired['ci'], fmt, '+')} ({level}) vs "
            f"{compare['baseline_label']} {seeds}")


def test_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'p 0.031, Holm 0.062' (the sign-flip test within the family), or why there is none."""
    paired = (compare or {}).get('paired')
    if not paired:
        return ''
    if paired['p'] is None:
        need = (compare.get('plan') or {}).get('seeds_for_verdict') or paired['min_seeds']
        return f"n={paired['n']} < {paired['min_seeds']}: no test; a verdict needs {need} seeds"
    return f"p {format_p(paired['p'])}, Holm {format_p(compare['p_holm'])}"


def verdict_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'better (primary, 2)': the verdict and the family it was judged in, with its size."""
    if not (compare or {}).get('paired'):
        return ''
    family = compare.get('family')
    return (f"{compare['verdict']} ({family}, {compare['family_size']})" if family
            else str(compare.get('verdict') or ''))


def plan_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'MDE 1.79 (SD 1.00, 4 df)' and the seeds for the smallest effect of interest."""
    plan = (compare or {}).get('plan')
    if not plan or plan.get('sd') is None:
        return ''
    fmt = METRIC_FORMATS[compare['metric']]
    mde = plan.get('mde')
    parts = []
    if mde is not None:
        parts.append(f'MDE {mde:{fmt}}' if math.isfinite(mde) else 'MDE: none at this n')
    parts.append(f"SD {plan['sd']:{fmt}}, {plan['df']} df")
    if plan.get('min_effect'):
        need = plan.get('seeds_for_min_effect')
        parts.append(f"{need or '> 1000'} seeds for Δ {plan['min_effect']:{fmt}}")
    return '; '.join(parts)


def improvement_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'0.80 [0.28, 0.99] (4/5 won)', withheld under the minimum of seeds."""
    paired = (compare or {}).get('paired')
    if not paired or not paired.get('wins'):
        return ''
    share = paired['wins']
    ties = f", {share['ties']} tied" if share['ties'] else ''
    return (f"{share['share']:.2f} {format_interval(share['ci'], '.2f')} "
            f"({share['wins']}/{paired['n']} won{ties})")


def paper_cell(gap: Optional[Dict[str, Any]]) -> str:
    if not gap:
        return ''
    fmt = METRIC_FORMATS[gap['metric']]
    return (f"{signed(gap['delta'], fmt)} vs {gap['paper']} ({PROTOCOLS.get(gap['protocol'], gap['protocol'])}, "
            f"{gap['source']})")


def _number(value: Optional[float], fmt: str) -> str:
    return '' if value is None else format(value, fmt)


def _columns(rows: List[Row], fam: str) -> List[Tuple[str, Any]]:
    """(header, cell function) of one table; optional columns only where a row fills them."""
    metrics = CLUSTER if fam == 'cluster' else ACCURACY
    main, higher = main_metric(rows[0]['protocol'])
    arrows = {'davies_bouldin': ' ↓', 'calinski_harabasz': ' ↑'}
    cols: List[Tuple[str, Any]] = [
        ('eval data', lambda r: r['eval_data']),
        ('protocol', lambda r: PROTOCOLS.get(r['protocol'], r['protocol'])),
        ('method', lambda r: r['label']), ('source', lambda r: r['source']),
        ('status', lambda r: r['status'])]
    cols += [(m + arrows.get(m, ''), lambda r, m=m: format_stat(r['metrics'].get(m), m))
             for m in metrics]
    cols.append((f'{main} interval', lambda r: interval_cell(r, main)))
    if any(r['compare'] for r in rows):
        better = 'higher' if higher else 'lower'
        cols += [(f'Δ {main} vs baseline, interval ({better} is better)',
                  lambda r: delta_cell(r['compare'])),
                 ('sign-flip test', lambda r: test_cell(r['compare'])),
                 ('verdict (family, size)', lambda r: verdict_cell(r['compare'])),
                 ('P(better), 95% CI', lambda r: improvement_cell(r['compare']))]
    if any((r['compare'] or {}).get('plan') for r in rows):
        cols.append(('planning', lambda r: plan_cell(r['compare'])))
    if any(r['paper_gap'] for r in rows):
        cols.append((f'ours − paper ({main})', lambda r: paper_cell(r['paper_gap'])))
    cols += [('training compute', compute_text),
             ('time s/epoch', lambda r: _number(r['time_s_per_epoch'], '.1f')),
             ('peak memory GB', lambda r: _number(r['peak_memory_gb'], '.2f')),
             ('total batch', lambda r: r['total_batch']), ('note', lambda r: r['note'])]
    return cols


def table_lines(rows: List[Row], fam: str) -> List[str]:
    """Markdown lines of one table (one metric family of one section)."""
    cols = _columns(rows, fam)
    lines = ['| ' + ' | '.join(h for h, _ in cols) + ' |', '|' + '---|' * len(cols)]
    return lines + ['| ' + ' | '.join(str(f(r)).replace('|', '\\|') for _, f in cols) + ' |'
                    for r in rows]


def sections(rows: List[Row]) -> Dict[Tuple, List[Row]]:
    """Rows by section (backbone, epochs, pretraining data), in row order."""
    out: Dict[Tuple, List[Row]] = {}
    for row in rows:
        out.setdefault(tuple(row[k] for k in GROUP), []).append(row)
    return out


def render_markdown(rows: List[Row], generated: str, runs_glob: str = 'results/runs/*.json',
                    tool: str = 'tools/leaderboard.py', figures: Optional[Dict[str, str]] = None,
                    verdicts: Sequence[str] = (),
                    across: Optional[Dict[str, List[str]]] = None, legend: bool = True) -> str:
    """The leaderboard as Markdown: the verdicts, one section per backbone, epochs and
    pretraining data, and the page's legend at its end.

    Args:
        rows: From ``build_rows`` (sorted).
        generated: Date and time of generation, shown in the first line.
        runs_glob: Where the records were read from, shown in the first line.
        tool: The command that wrote it, shown in the first line.
        figures: {section title: image path} of the interval plots, shown in their sections.
        verdicts: Sentences of ``verdicts.verdicts``, listed after the legend.
        across: {section title: Markdown lines} of the aggregates across tasks
            (``aggregate_board.across_sections``), shown after the section's tables with the
            figures ``figures['<title> · profile']`` and ``figures['<title> · ranks']``.
        legend: False leaves the legend out (a page that puts `legend_lines` elsewhere).
    """
    lines = [f'_Generated by {tool} from {runs_glob} on {generated}; '
             'do not edit by hand (add records and rerun the tool)._']
    if verdicts:
        lines += ['', 'What the statistics support:', ''] + [f'- {v}' for v in verdicts]
    for (backbone, epochs, data), group in sections(rows).items():
        title = section_title(backbone, epochs, data)
        lines += ['', f'## {title}']
        shared = common_overrides(group)
        if shared and sum(r['source'] == SUITE and not r['legacy'] for r in group) > 1:
            lines += ['', 'Every row of ours here departs from its shipped config in: '
                      + ', '.join(f'`{override_text(k, v)}`' for k, v in shared.items()) + '.']
        for fam, heading in (('classification', 'Accuracy (%)'), ('cluster', 'Cluster indices')):
            subset = [row for row in group if protocol_family(row['protocol']) == fam]
            if subset:
                lines += ['', f'### {heading}', ''] + table_lines(subset, fam)
        plot = figure_lines(figures, title, f'intervals: {title}')
        lines += [''] + plot if plot else []
        if across and across.get(title):
            lines += [''] + across[title]
            for kind in ('profile', 'ranks'):
                plot = figure_lines(figures, f'{title} · {kind}', f'{kind}: {title}')
                lines += plot + [''] if plot else []
    if legend:
        lines += ['', f'## {LEGEND_TITLE}', ''] + legend_lines(rows, bool(across))
    return '\n'.join(lines) + '\n'


CSV_COLUMNS = (list(GROUP) + ['eval_data', 'protocol', 'protocol_label', 'protocol_settings',
                              'method', 'variant',
                              'method_label', 'setting_sha256', 'overrides', 'legacy', 'source',
                              'status']
               + [f'{m}_{s}' for m in METRICS for s in ('mean', 'std', 'n')]
               + ['main_metric', 'ci_low', 'ci_high', 'ci_level', 'range_low', 'range_high',
                  'min_seeds', 'delta_baseline', 'delta_metric', 'delta', 'paired_delta_mean',
                  'paired_delta_std', 'paired_delta_n', 'paired_diffs', 'paired_ci_low',
                  'paired_ci_high', 'paired_ci_level', 'p_signflip', 'p_holm', 'family',
                  'family_size', 'verdict', 'wins', 'ties', 'losses', 'p_improve',
                  'p_improve_low', 'p_improve_high', 'pooled_sd', 'pooled_df', 'mde',
                  'seeds_for_verdict', 'min_effect', 'seeds_for_min_effect',
                  'equivalence_margin', 'equivalence_low', 'equivalence_high', 'left_out',
                  'paper_delta', 'paper_value', 'time_s_per_epoch', 'peak_memory_gb',
                  'encoder_passes', 'gflop_per_image', 'train_flops', 'device_seconds',
                  'hardware', 'total_batch', 'seeds',
                  'note'])


def _csv_record(row: Row) -> Dict[str, Any]:
    main = main_metric(row['protocol'])[0]
    out = {k: row[k] for k in GROUP + ('eval_data', 'protocol', 'method', 'source', 'status',
                                       'time_s_per_epoch', 'peak_memory_gb', 'total_batch',
                                       'note')}
    out.update({k: row.get(k) for k in ('encoder_passes', 'gflop_per_image', 'train_flops',
                                        'device_seconds', 'hardware')})
    stat = row['metrics'].get(main) or {}
    enough = _enough(row, stat.get('n'))
    ci = (stat.get('ci') if enough else None) or (None, None)
    spread = stat.get('range') if stat.get('text') is None and stat.get('n') else None
    out.update(protocol_label=PROTOCOLS.get(row['protocol'], row['protocol']),
               protocol_settings=row.get('protocol_settings', ''), method_label=row['label'], seeds=' '.join(str(s) for s in row['seeds']),
               variant=row.get('variant', ''), setting_sha256=row.get('setting') or '',
               overrides=', '.join(override_text(k, v) for k, v in row['overrides'].items()),
               legacy=row['legacy'], main_metric=main, ci_low=ci[0], ci_high=ci[1],
               ci_level=stat.get('ci_level') if enough else None,
               range_low=(spread or (None, None))[0], range_high=(spread or (None, None))[1],
               min_seeds=row.get('min_seeds'))
    compare = row['compare'] or {}
    paired = compare.get('paired') or {}
    pci = paired.get('ci') or (None, None)
    won = paired.get('wins') or {}
    ici = won.get('ci') or (None, None)
    plan = compare.get('plan') or {}
    eq = compare.get('equivalence') or {}
    eci = eq.get('ci') or (None, None)
    out.update(delta_baseline=compare.get('baseline'), delta_metric=compare.get('metric'),
               delta=compare.get('delta'), paired_delta_mean=paired.get('delta'),
               paired_delta_std=paired.get('std'), paired_delta_n=paired.get('n'),
               paired_diffs=' '.join(repr(round(d, 10)) for d in paired.get('diffs') or []),
               paired_ci_low=pci[0], paired_ci_high=pci[1],
               paired_ci_level=paired.get('ci_level'), p_signflip=paired.get('p'),
               p_holm=compare.get('p_holm'), family=compare.get('family'),
               family_size=compare.get('family_size'), verdict=compare.get('verdict'),
               wins=won.get('wins'), ties=won.get('ties'), losses=won.get('losses'),
               p_improve=won.get('share'), p_improve_low=ici[0], p_improve_high=ici[1],
               pooled_sd=plan.get('sd'), pooled_df=plan.get('df'), mde=plan.get('mde'),
               seeds_for_verdict=plan.get('seeds_for_verdict'), min_effect=plan.get('min_effect'),
               seeds_for_min_effect=plan.get('seeds_for_min_effect'),
               equivalence_margin=eq.get('margin'), equivalence_low=eci[0],
               equivalence_high=eci[1], left_out='; '.join(compare.get('left_out') or []))
    gap = row['paper_gap'] or {}
    out.update(paper_delta=gap.get('delta'), paper_value=gap.get('paper'))
    for metric, stat in row['metrics'].items():
        if metric in METRICS:
            mean = stat['mean'] if stat['n'] != 0 else 'NA'
            out.update({f'{metric}_mean': mean, f'{metric}_std': stat['std'],
                        f'{metric}_n': stat['n']})
    return {k: '' if v is None else v for k, v in out.items()}


def render_csv(rows: List[Row]) -> str:
    """The same rows as CSV: mean, std and n per metric, the main metric's interval, the
    comparison's statistics (empty where there is none). n is empty for the paper's rows (the
    paper does not say over how many runs)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, restval='', lineterminator='\n')
    writer.writeheader()
    writer.writerows(_csv_record(row) for row in rows)
    return buffer.getvalue()
