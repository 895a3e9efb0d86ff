"""The leaderboard as Markdown and CSV (pure rendering of ``leaderboard.build_rows`` rows).

Markdown: one section per backbone, pretraining epochs and data; in each an accuracy table and a
cluster-index table. Every row shows its metrics as mean ± sample std (n), the 95% interval of
its main metric, and where it has a baseline the paired comparison (Δ with its interval, the
paired t-test and its Holm adjustment, Wilcoxon where n >= 6, the probability of improvement),
and where the paper has the same row, ours minus the paper. The legend names every method.
"""
from __future__ import annotations

import csv
import io
from typing import Any, Dict, List, Optional, Sequence, Tuple

from benchmark.names import ACCURACY, CLUSTER, METRICS, METRIC_FORMATS, PROTOCOLS, protocol_family
from benchmark.reports import stats
from benchmark.reports.comparisons import main_metric
from benchmark.reports.leaderboard import (GROUP, LEGACY_MARK, LEGACY_NOTE, SUITE, Row,
                                           backbone_label, common_overrides, override_text)

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


def format_interval(ci: Optional[Sequence[float]], fmt: str, sign: str = '') -> str:
    return f'[{ci[0]:{sign}{fmt}}, {ci[1]:{sign}{fmt}}]' if ci else ''


def format_p(p: Optional[float]) -> str:
    """A p-value with 2 significant digits; '< 0.0001' below that."""
    if p is None:
        return ''
    return '< 0.0001' if p < 1e-4 else f'{p:.2g}'


def delta_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'+1.20 [−0.31, +2.71] vs mocov2 (3 paired seeds)', or the Δ of the means where no seed
    is shared (the paper's rows)."""
    if not compare:
        return ''
    fmt = METRIC_FORMATS[compare['metric']]
    paired = compare['paired']
    if not paired:
        return f"{compare['delta']:+{fmt}} vs {compare['baseline_label']} (means)"
    interval = format_interval(paired['ci'], fmt, '+')
    return (f"{paired['delta']:+{fmt}}{' ' + interval if interval else ''} vs "
            f"{compare['baseline_label']} ({paired['n']} paired seed{'s' * (paired['n'] > 1)})")


def test_cell(compare: Optional[Dict[str, Any]]) -> str:
    """'p 0.012, Holm 0.036' or, under 3 paired seeds, why there is no test and how many seeds
    would detect the observed Δ."""
    paired = (compare or {}).get('paired')
    if not paired:
        return ''
    if paired['p_t'] is None:
        needed = paired['seeds_needed']
        more = (f'~{needed} for 80% power' if needed
                else 'no spread to plan from' if not paired['std']
                else 'no Δ to plan from' if paired['delta'] == 0 else 'over 1000 for 80% power')
        return f"n={paired['n']} < {stats.MIN_TEST_SEEDS}: no test; seeds needed {more}"
    return f"p {format_p(paired['p_t'])}, Holm {format_p(compare['p_holm'])}"


def improvement_cell(compare: Optional[Dict[str, Any]]) -> str:
    paired = (compare or {}).get('paired')
    if not paired:
        return ''
    return f"{paired['p_improve']:.2f}" + (f" {format_interval(paired['p_improve_ci'], '.2f')}"
                                           if paired['p_improve_ci'] else '')


def paper_cell(gap: Optional[Dict[str, Any]]) -> str:
    if not gap:
        return ''
    fmt = METRIC_FORMATS[gap['metric']]
    return (f"{gap['delta']:+{fmt}} vs {gap['paper']} ({PROTOCOLS.get(gap['protocol'], gap['protocol'])}, "
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
    cols.append((f'{main} 95% CI', lambda r: format_interval(
        (r['metrics'].get(main) or {}).get('ci'), METRIC_FORMATS[main])))
    if any(r['compare'] for r in rows):
        better = 'higher' if higher else 'lower'
        cols += [(f'Δ {main} vs baseline, 95% CI ({better} is better)',
                  lambda r: delta_cell(r['compare'])),
                 ('paired t-test', lambda r: test_cell(r['compare'])),
                 ('P(better), 95% CI', lambda r: improvement_cell(r['compare']))]
    if any(((r['compare'] or {}).get('paired') or {}).get('p_wilcoxon') is not None for r in rows):
        cols.append(('p_W', lambda r: format_p(((r['compare'] or {}).get('paired') or {})
                                               .get('p_wilcoxon'))))
    if any(r['paper_gap'] for r in rows):
        cols.append((f'ours − paper ({main})', lambda r: paper_cell(r['paper_gap'])))
    cols += [('time s/epoch', lambda r: _number(r['time_s_per_epoch'], '.1f')),
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
                    verdicts: Sequence[str] = ()) -> str:
    """The leaderboard as Markdown: one section per backbone, epochs and pretraining data.

    Args:
        rows: From ``build_rows`` (sorted).
        generated: Date and time of generation, shown in the first line.
        runs_glob: Where the records were read from, shown in the first line.
        tool: The command that wrote it, shown in the first line.
        figures: {section title: image path} of the interval plots, shown in their sections.
        verdicts: Sentences of ``verdicts.verdicts``, listed after the legend.
    """
    lines = [f'_Generated by {tool} from {runs_glob} on {generated}; '
             'do not edit by hand (add records and rerun the tool)._', '', LEGEND]
    if any(r['legacy'] for r in rows):
        lines += ['', LEGACY_NOTE]
    if verdicts:
        lines += ['', 'What the statistics support:', ''] + [f'- {v}' for v in verdicts]
    for (backbone, epochs, data), group in sections(rows).items():
        title = f'{backbone_label(backbone)} · {epochs} pretraining epochs · {data}'
        lines += ['', f'## {title}']
        shared = common_overrides(group)
        if shared and sum(r['source'] == SUITE and not r['legacy'] for r in group) > 1:
            lines += ['', 'Every row of ours here departs from its shipped config in: '
                      + ', '.join(f'`{override_text(k, v)}`' for k, v in shared.items()) + '.']
        for fam, heading in (('classification', 'Accuracy (%)'), ('cluster', 'Cluster indices')):
            subset = [row for row in group if protocol_family(row['protocol']) == fam]
            if subset:
                lines += ['', f'### {heading}', ''] + table_lines(subset, fam)
        if figures and figures.get(title):
            lines += ['', f'![95% intervals: {title}]({figures[title]})']
    return '\n'.join(lines) + '\n'


CSV_COLUMNS = (list(GROUP) + ['eval_data', 'protocol', 'protocol_label', 'method', 'variant',
                              'method_label', 'setting_sha256', 'overrides', 'legacy', 'source',
                              'status']
               + [f'{m}_{s}' for m in METRICS for s in ('mean', 'std', 'n')]
               + ['main_metric', 'ci_low', 'ci_high', 'delta_baseline', 'delta_metric',
                  'delta', 'paired_delta_mean', 'paired_delta_std', 'paired_delta_n',
                  'paired_ci_low', 'paired_ci_high', 'p_t', 'p_holm', 'p_wilcoxon',
                  'p_improve', 'p_improve_low', 'p_improve_high', 'seeds_needed',
                  'paper_delta', 'paper_value', 'time_s_per_epoch', 'peak_memory_gb',
                  'total_batch', 'seeds', 'note'])


def _csv_record(row: Row) -> Dict[str, Any]:
    main = main_metric(row['protocol'])[0]
    out = {k: row[k] for k in GROUP + ('eval_data', 'protocol', 'method', 'source', 'status',
                                       'time_s_per_epoch', 'peak_memory_gb', 'total_batch',
                                       'note')}
    ci = (row['metrics'].get(main) or {}).get('ci') or (None, None)
    out.update(protocol_label=PROTOCOLS.get(row['protocol'], row['protocol']),
               method_label=row['label'], seeds=' '.join(str(s) for s in row['seeds']),
               variant=row.get('variant', ''), setting_sha256=row.get('setting') or '',
               overrides=', '.join(override_text(k, v) for k, v in row['overrides'].items()),
               legacy=row['legacy'], main_metric=main, ci_low=ci[0], ci_high=ci[1])
    compare = row['compare'] or {}
    paired = compare.get('paired') or {}
    pci = paired.get('ci') or (None, None)
    ici = paired.get('p_improve_ci') or (None, None)
    out.update(delta_baseline=compare.get('baseline'), delta_metric=compare.get('metric'),
               delta=compare.get('delta'), paired_delta_mean=paired.get('delta'),
               paired_delta_std=paired.get('std'), paired_delta_n=paired.get('n'),
               paired_ci_low=pci[0], paired_ci_high=pci[1], p_t=paired.get('p_t'),
               p_holm=compare.get('p_holm'), p_wilcoxon=paired.get('p_wilcoxon'),
               p_improve=paired.get('p_improve'), p_improve_low=ici[0], p_improve_high=ici[1],
               seeds_needed=paired.get('seeds_needed'))
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
