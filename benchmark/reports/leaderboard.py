"""Leaderboard tables from result records (pure functions; ``tools/leaderboard.py`` does the I/O).

One row per (backbone, pretraining epochs, pretraining data, evaluation data, protocol, method,
variant, status) with mean ± sample std over the records (seeds) of that key; the paper's numbers
join the same groups as labelled reference rows. A record with status 'diverged' or 'failed' forms
its own row, so it is shown and never averaged into the runs that worked. A record's ``variant``
(a suite's overrides, e.g. ``model.mix_temperature=0.1``; empty for the config as it is) shows in
its row's label and is never merged with the default. A variant's Δ is taken against its
baseline's row of the same variant where one exists, else the baseline's default; where seeds
match, the paired difference over those seeds is shown beside it.
"""
from __future__ import annotations

import csv
import io
import re
import statistics
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from benchmark.names import (ACCURACY, BASELINES, CLUSTER, METHOD_ORDER, METRICS, METRIC_FORMATS,
                             PAPER_MIXCO, PAPER_PROTOCOLS, PROTOCOLS, PROTOCOL_ORDER,
                             canonical_backbone, canonical_data, protocol_family)

SUITE = 'this suite'
KEY = ('backbone', 'pretrain_epochs', 'pretrain_data', 'eval_data', 'protocol', 'method')
Row = Dict[str, Any]




def main_metric(protocol: str) -> Tuple[str, bool]:
    """The metric MixCo's Δ is taken on, and whether higher is better."""
    return ('davies_bouldin', False) if protocol_family(protocol) == 'cluster' else ('top1', True)


def backbone_label(name: str) -> str:
    match = re.fullmatch(r'resnet(\d+)', name)
    return f'ResNet-{match.group(1)}' if match else name


def summarize(values: Sequence[float], na: Sequence[str] = ()) -> Dict[str, Any]:
    """Mean, sample std (ddof=1; None for one value), n and the NA reasons of one metric."""
    n = len(values)
    return dict(mean=statistics.fmean(values) if n else None,
                std=statistics.stdev(values) if n > 1 else None, n=n, na=list(na), text=None)


def _suite_key(record: Dict[str, Any], protocol: str) -> Tuple:
    return (canonical_backbone(record['backbone']), int(record['pretrain_epochs']),
            canonical_data(record['pretrain_data']), canonical_data(record['eval_data']),
            protocol, str(record['method']), str(record.get('variant') or ''),
            str(record.get('status', 'ok')))


def row_label(method: str, variant: str = '') -> str:
    """'mixco', or 'mixco [model.mix_temperature=0.1]' for a variant."""
    return f'{method} [{variant}]' if variant else method


def _mean(values: Iterable[Optional[float]]) -> Optional[float]:
    numbers = [v for v in values if isinstance(v, (int, float))]
    return statistics.fmean(numbers) if numbers else None


def _suite_row(key: Tuple, records: List[Dict[str, Any]]) -> Row:
    """One row from the records (one per seed) that share ``key``."""
    row = dict(zip(KEY + ('variant', 'status'), key), source=SUITE, label=row_label(key[5], key[6]),
               metrics={}, by_seed={})
    protocol = key[4]
    notes, main = [], main_metric(protocol)[0]
    for metric in METRICS:
        values, na = [], []
        for record in records:
            value = record['protocols'][protocol].get('metrics', {}).get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values.append(float(value))
            elif isinstance(value, str):
                na.append(value)
        if values or na:
            row['metrics'][metric] = summarize(values, na)
            notes += [f'{metric}: {reason}' for reason in dict.fromkeys(na)]
    per_seed: Dict[int, List[float]] = {}
    for record in records:  # the main metric per seed, for paired differences
        value = record['protocols'][protocol].get('metrics', {}).get(main)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            per_seed.setdefault(int(record['seed']), []).append(float(value))
    row['by_seed'] = {seed: statistics.fmean(v) for seed, v in per_seed.items()}
    row.update(time_s_per_epoch=_mean(r.get('time_s_per_epoch') for r in records),
               peak_memory_gb=_mean(r.get('peak_memory_gb') for r in records),
               total_batch='/'.join(str(b) for b in sorted(
                   {r['total_batch'] for r in records if r['total_batch'] is not None})),
               seeds=sorted(r['seed'] for r in records), note='; '.join(notes))
    return row


def suite_rows(records: Iterable[Dict[str, Any]]) -> List[Row]:
    """Rows of the suite's own records, one per key and status, with statistics over seeds."""
    groups: Dict[Tuple, List[Dict[str, Any]]] = {}
    for record in records:
        for protocol in record['protocols']:
            groups.setdefault(_suite_key(record, protocol), []).append(record)
    return [_suite_row(key, group) for key, group in groups.items()]


def _paper_key(entry: Dict[str, str]) -> Tuple:
    method = entry['method'].strip()
    if entry.get('mixco', '').strip().lower() == 'yes':
        method = PAPER_MIXCO.get(method, f'mixco_{method}')
    protocol = entry['protocol'].strip()
    return (canonical_backbone(entry['arch']), int(entry['pretrain_epochs']),
            canonical_data(entry['pretrain_data']), canonical_data(entry['eval_data']),
            PAPER_PROTOCOLS.get(protocol, protocol), method)


def paper_rows(entries: Iterable[Dict[str, str]]) -> List[Row]:
    """Reference rows from the paper's CSV; a result quoted by several tables is one row.

    Values are kept as the paper prints them; time and memory come from Table 3.
    """
    rows: Dict[Tuple, Row] = {}
    for entry in entries:
        key = _paper_key(entry)
        row = rows.setdefault(key, dict(
            zip(KEY, key), variant='', status='ok', label=f'{key[5]} (paper)', metrics={},
            by_seed={}, tables=[],
            time_s_per_epoch=None, peak_memory_gb=None, total_batch='', seeds=[], note=''))
        row['tables'].append(entry['table'].strip())
        for metric in ACCURACY:
            text = (entry.get(metric) or '').strip()
            if text and metric not in row['metrics']:  # the tables agree; keep the first
                row['metrics'][metric] = dict(summarize([float(text)]), n=None, text=text)
        for field, column in (('time_s_per_epoch', 'time_s_per_epoch'),
                              ('peak_memory_gb', 'memory_gb_per_gpu')):
            text = (entry.get(column) or '').strip()
            if text and row[field] is None:
                row[field] = float(text)
        note = (entry.get('note') or '').strip()
        if note and note not in row['note']:
            row['note'] = f"{row['note']}; {note}" if row['note'] else note
    for row in rows.values():
        row['source'] = 'paper Table ' + ', '.join(dict.fromkeys(row.pop('tables')))
    return list(rows.values())


def paired_difference(mine: Dict[int, float], theirs: Dict[int, float]) -> Optional[Dict[str, Any]]:
    """Mean, sample std and n of mine[s] - theirs[s] over the seeds s both have; None if none."""
    diffs = [mine[s] - theirs[s] for s in sorted(set(mine) & set(theirs))]
    if not diffs:
        return None
    return dict(mean=round(statistics.fmean(diffs), 10), n=len(diffs),
                std=statistics.stdev(diffs) if len(diffs) > 1 else None)


def add_deltas(rows: List[Row]) -> None:
    """Set ``delta`` (MixCo minus its baseline, on the main metric) on MixCo rows, in place,
    and ``paired`` (the same difference seed by seed, over the seeds both rows have).

    A suite row is compared with the suite's baseline row of the same key and variant (else
    the baseline's default variant), a paper row with the paper's; rows whose status is not
    'ok' neither get nor serve as a baseline.
    """
    def is_paper(row: Row) -> bool:
        return row['source'] != SUITE

    index = {(tuple(r[k] for k in KEY), r.get('variant', ''), is_paper(r)): r
             for r in rows if r['status'] == 'ok'}
    for row in rows:
        row['delta'] = row['delta_baseline'] = row['delta_metric'] = row['paired'] = None
        baseline = BASELINES.get(row['method'])
        if baseline is None or row['status'] != 'ok':
            continue
        key = tuple(row[k] for k in KEY[:-1]) + (baseline,)
        other = (index.get((key, row.get('variant', ''), is_paper(row)))
                 or index.get((key, '', is_paper(row))))
        metric, _ = main_metric(row['protocol'])
        mine = row['metrics'].get(metric, {}).get('mean')
        theirs = (other or {}).get('metrics', {}).get(metric, {}).get('mean')
        if mine is not None and theirs is not None:
            # round: the paper's two-decimal numbers should not print as 6.859999999999999
            row.update(delta=round(mine - theirs, 10), delta_baseline=baseline,
                       delta_metric=metric,
                       paired=paired_difference(row.get('by_seed', {}), other.get('by_seed', {})))


def _natural(text: str) -> Tuple:
    """Sort key with numbers compared as numbers ('resnet18' < 'resnet101')."""
    return tuple((0, int(part), '') if part.isdigit() else (1, 0, part)
                 for part in re.split(r'(\d+)', text) if part)


def _order(value: str, order: Sequence[str]) -> Tuple:
    return (order.index(value), ()) if value in order else (len(order), _natural(value))


def sort_key(row: Row) -> Tuple:
    """Backbone, epochs, pretraining data, evaluation data (the pretraining data first),
    protocol, method (each MixCo after its baseline), suite before paper, 'ok' first."""
    return (_natural(row['backbone']), row['pretrain_epochs'], _natural(row['pretrain_data']),
            row['eval_data'] != row['pretrain_data'], _natural(row['eval_data']),
            _order(row['protocol'], PROTOCOL_ORDER),
            _order(row['method'], METHOD_ORDER), _natural(row.get('variant', '')),
            row['source'] != SUITE, row['status'] != 'ok', row['status'])


def build_rows(records: Iterable[Dict[str, Any]],
               paper: Iterable[Dict[str, str]] = ()) -> List[Row]:
    """All leaderboard rows, sorted and with MixCo's Δ vs its baseline."""
    rows = suite_rows(records) + paper_rows(paper)
    add_deltas(rows)
    return sorted(rows, key=sort_key)


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


def _number(value: Optional[float], fmt: str) -> str:
    return '' if value is None else format(value, fmt)


def _delta_columns(rows: List[Row]) -> List[Tuple[str, str]]:
    """(baseline, header) of the Δ columns a table needs: one per baseline of a method present,
    and its paired column (baseline + ' paired') where a row has one."""
    metric, higher = main_metric(rows[0]['protocol'])  # one metric family per table
    better = 'higher' if higher else 'lower'
    methods = {row['method'] for row in rows}
    columns = []
    for base in dict.fromkeys(base for mixco, base in BASELINES.items() if mixco in methods):
        columns.append((base, f'Δ vs {base} ({metric}, {better} is better)'))
        if any(r['paired'] and r['delta_baseline'] == base for r in rows):
            columns.append((f'{base} paired', f'paired Δ vs {base} (same seeds)'))
    return columns


def format_paired(paired: Optional[Dict[str, Any]], metric: str) -> str:
    """'+4.25 ± 0.35 (n=2)' of a paired difference over seeds; '' if none."""
    if not paired:
        return ''
    fmt = METRIC_FORMATS[metric]
    text = format(paired['mean'], '+' + fmt)
    if paired['std'] is not None:
        text += f" ± {paired['std']:{fmt}}"
    return f"{text} (n={paired['n']})"


def _delta_cell(row: Row, column: str) -> str:
    if row['delta_baseline'] == column:
        return _number(row['delta'], '+' + METRIC_FORMATS[row['delta_metric']])
    if row['paired'] and column == f"{row['delta_baseline']} paired":
        return format_paired(row['paired'], row['delta_metric'])
    return ''


def _cells(row: Row, metrics: Sequence[str], deltas: List[Tuple[str, str]]) -> List[str]:
    cells = [row['eval_data'], PROTOCOLS.get(row['protocol'], row['protocol']),
             row['label'], row['source'], row['status']]
    cells += [format_stat(row['metrics'].get(m), m) for m in metrics]
    cells += [_delta_cell(row, column) for column, _ in deltas]
    cells += [_number(row['time_s_per_epoch'], '.1f'), _number(row['peak_memory_gb'], '.2f'),
              row['total_batch'], row['note']]
    return [str(cell).replace('|', '\\|') for cell in cells]


def _table(rows: List[Row], fam: str) -> List[str]:
    """Markdown lines of one table (one metric family of one pretraining group)."""
    metrics = CLUSTER if fam == 'cluster' else ACCURACY
    deltas = _delta_columns(rows)
    arrows = {'davies_bouldin': ' ↓', 'calinski_harabasz': ' ↑'}
    header = (['eval data', 'protocol', 'method', 'source', 'status']
              + [m + arrows.get(m, '') for m in metrics] + [h for _, h in deltas]
              + ['time s/epoch', 'peak memory GB', 'total batch', 'note'])
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    return lines + ['| ' + ' | '.join(_cells(r, metrics, deltas)) + ' |' for r in rows]


def render_markdown(rows: List[Row], generated: str, runs_glob: str = 'results/runs/*.json',
                    tool: str = 'tools/leaderboard.py') -> str:
    """The leaderboard as Markdown: one section per backbone, epochs and pretraining data.

    Args:
        rows: From ``build_rows`` (sorted).
        generated: Date and time of generation, shown in the first line.
        runs_glob: Where the records were read from, shown in the first line.
        tool: The command that wrote it, shown in the first line.
    """
    lines = [f'_Generated by {tool} from {runs_glob} on {generated}; '
             'do not edit by hand (add records and rerun the tool)._', '',
             'Cells are mean ± sample std (ddof=1) over runs with different seeds; n = number '
             "of runs. Rows labelled '(paper)' with source 'paper Table N' are the paper's "
             "published numbers for reference; 'this suite' rows come from our records. "
             'Δ: MixCo minus its baseline (MoCo-v2 or SimCLR) on the same group, on the means; '
             'paired Δ: the same difference seed by seed (mean ± std over the seeds both have). '
             "Protocols marked 'online' are measured during pretraining, the others after it."]
    groups: Dict[Tuple, List[Row]] = {}
    for row in rows:
        groups.setdefault((row['backbone'], row['pretrain_epochs'], row['pretrain_data']),
                          []).append(row)
    for (backbone, epochs, data), group in groups.items():
        lines += ['', f'## {backbone_label(backbone)} · {epochs} pretraining epochs · {data}']
        for fam, title in (('classification', 'Accuracy (%)'), ('cluster', 'Cluster indices')):
            subset = [row for row in group if protocol_family(row['protocol']) == fam]
            if subset:
                lines += ['', f'### {title}', ''] + _table(subset, fam)
    return '\n'.join(lines) + '\n'


CSV_COLUMNS = (list(KEY[:5]) + ['protocol_label', 'method', 'variant', 'method_label', 'source',
                                'status']
               + [f'{m}_{s}' for m in METRICS for s in ('mean', 'std', 'n')]
               + ['delta_baseline', 'delta_metric', 'delta', 'paired_delta_mean',
                  'paired_delta_std', 'paired_delta_n', 'time_s_per_epoch',
                  'peak_memory_gb', 'total_batch', 'seeds', 'note'])


def _csv_record(row: Row) -> Dict[str, Any]:
    out = {k: row[k] for k in KEY + ('source', 'status', 'delta_baseline', 'delta_metric',
                                      'delta', 'time_s_per_epoch', 'peak_memory_gb',
                                      'total_batch', 'note')}
    out.update(protocol_label=PROTOCOLS.get(row['protocol'], row['protocol']),
               method_label=row['label'], seeds=' '.join(str(s) for s in row['seeds']),
               variant=row.get('variant', ''))
    paired = row.get('paired') or {}
    out.update(paired_delta_mean=paired.get('mean'), paired_delta_std=paired.get('std'),
               paired_delta_n=paired.get('n'))
    for metric, stat in row['metrics'].items():
        if metric in METRICS:
            mean = stat['mean'] if stat['n'] != 0 else 'NA'
            out.update({f'{metric}_mean': mean, f'{metric}_std': stat['std'],
                        f'{metric}_n': stat['n']})
    return {k: '' if v is None else v for k, v in out.items()}


def render_csv(rows: List[Row]) -> str:
    """The same rows as CSV, with separate mean, std and n columns per metric.

    n is empty for the paper's rows (the paper does not say over how many runs).
    """
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, restval='', lineterminator='\n')
    writer.writeheader()
    writer.writerows(_csv_record(row) for row in rows)
    return buffer.getvalue()
