"""Leaderboard rows from result records (pure functions; ``tools/leaderboard.py`` does the I/O).

One row per exact configuration: records group by (backbone, pretraining epochs, pretraining
data, evaluation data, protocol, method), their *setting* (``setting_sha256``: the config without
seed, placement and data paths, with its number of processes), the evaluation protocol's
settings and their status. Two settings of one method never share a row; each row is labelled
with the keys in which its config departs from the shipped file (``overrides``), e.g.
``MixCo (MoCo-v2) [model.mix_temperature=0.1]`` (a method by its label in ``names.METHODS``;
``method`` keeps the record name). A seed recorded twice for one setting, protocol, protocol
settings and evaluation data is one sample: the newest record counts and the row notes the
superseded ones. Records written before settings existed group by method and suite variant as
they used to, and their rows are marked ``LEGACY_MARK``.

The protocol settings (``record['protocols'][name]['settings']``) count all but the incidental
keys ``INCIDENTAL_SETTINGS``: the seed (the record's own, the sample), the t-SNE ``figure`` and the
probe's ``work_dir`` (places on disk), ``device``, ``num_workers``, the probe's ``world_size`` and
``batch_per_process`` (placement; its total ``batch`` counts), and any key ending in ``_dir``,
``_path`` or ``_s`` (paths, timings in seconds); a new setting counts by default. A row holds them
as ``protocol_settings``, e.g. ``'k=200, split=train->test, temperature=0.1'`` (sorted by key;
``''`` where none were recorded, as in older records and placeholders, which group as before),
and its label adds those in which it departs from the method's otherwise alike rows, e.g.
``MoCo-v2 · k=20``.

Each row holds per metric the mean, sample std, n, range and the exact sign-flip interval over seeds
(`stats.mean_interval`), and its main metric per seed for paired comparisons
(``comparisons.add_comparisons``). The paper's numbers join the same groups as reference rows.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from benchmark.names import (ACCURACY, METHOD_ORDER, METRICS, PAPER_MIXCO, PAPER_PROTOCOLS,
                             PROTOCOL_ORDER, canonical_backbone, canonical_data, method_label,
                             protocol_family)
from benchmark.reports import stats
from benchmark.reports.comparisons import SUITE, StatsPolicy, add_comparisons, main_metric
from benchmark.reports.compute import number, record_compute, row_compute

KEY = ('backbone', 'pretrain_epochs', 'pretrain_data', 'eval_data', 'protocol', 'method')
GROUP = KEY[:3]  # one section of tables: backbone, epochs, pretraining data
LEGACY_MARK = '†'
LEGACY_NOTE = (f'{LEGACY_MARK} from records written without a configuration setting: grouped by '
               'method (and suite variant) only, so such a row may mix settings.')
Row = Dict[str, Any]
INCIDENTAL_SETTINGS = frozenset({'seed', 'figure', 'work_dir', 'device', 'num_workers',
                                 'world_size', 'batch_per_process'})
INCIDENTAL_SUFFIXES = ('_dir', '_path', '_s')


def backbone_label(name: str) -> str:
    """'resnet18' -> 'ResNet-18'; a narrowed one, 'resnet18-w0.25' -> 'ResNet-18 (width 0.25)'."""
    match = re.fullmatch(r'resnet(\d+)(?:-w([\d.]+))?', name)
    if not match:
        return name
    return f'ResNet-{match.group(1)}' + (f' (width {match.group(2)})' if match.group(2) else '')


def summarize(values: Sequence[float], na: Sequence[str] = ()) -> Dict[str, Any]:
    """Mean, sample std (None for one value), n, the sign-flip interval and its level (None under
    2 values), the range, NA reasons of one metric."""
    return dict(stats.mean_interval(values), na=list(na), text=None)


def section_title(backbone: str, epochs: Any, data: str) -> str:
    """'ResNet-18 · 30 pretraining epochs · digits': a section's title in tables and figures."""
    return f'{backbone_label(backbone)} · {epochs} pretraining epochs · {data}'


def row_label(method: str, variant: str = '') -> str:
    """The method's label ('MixCo (MoCo-v2)' for mixco, `names.method_label`), with a variant's
    overrides: 'MixCo (MoCo-v2) [model.mix_temperature=0.1]'."""
    label = method_label(method)
    return f'{label} [{variant}]' if variant else label


def override_text(key: str, value: Any) -> str:
    """``key=value`` as a user would pass it to --cfg-options."""
    if isinstance(value, str):
        return f'{key}={value}'
    if value is None:
        return f'{key}=None'
    return f'{key}={value!r}' if not isinstance(value, (list, dict)) else f'{key}={value}'


def _base_key(record: Dict[str, Any], protocol: str) -> Tuple:
    return (canonical_backbone(record['backbone']), int(record['pretrain_epochs']),
            canonical_data(record['pretrain_data']), canonical_data(record['eval_data']),
            protocol, str(record['method']))


def key_bn(record: Dict[str, Any]) -> Optional[str]:
    """The key encoder's BatchNorm regime the record states (``extra.key_bn``), if any."""
    value = (record.get('extra') or {}).get('key_bn')
    return str(value) if value else None


def protocol_settings(settings: Dict[str, Any]) -> str:
    """'k=200, split=train->test, temperature=0.1': the settings that define the protocol,
    sorted by key, without the incidental ones; '' where none were recorded."""
    kept = sorted((k, v) for k, v in (settings or {}).items()
                  if k not in INCIDENTAL_SETTINGS and not k.endswith(INCIDENTAL_SUFFIXES))
    return ', '.join(override_text(k, json.dumps(v, sort_keys=True) if isinstance(v, (list, dict))
                                   else v) for k, v in kept)


def _identity(record: Dict[str, Any], protocol: str) -> Tuple[str, str, Optional[str], str]:
    """('setting', sha256, key BN regime, protocol settings) or, for a record without a setting,
    ('legacy', its suite variant, regime, protocol settings). The regime is part of the identity:
    records written before the one-process shuffle-BN emulation share a setting hash with later
    ones but not a regime."""
    setting = record.get('setting_sha256')
    regime = key_bn(record)
    settings = protocol_settings(record['protocols'][protocol].get('settings'))
    return (('setting', setting, regime, settings) if setting
            else ('legacy', str(record.get('variant') or ''), regime, settings))


def newest_per_seed(records: Iterable[Dict[str, Any]]) -> Tuple[List[tuple], Dict[tuple, List[str]]]:
    """(entries, superseded): one (key, identity, record, protocol) per setting, protocol,
    protocol settings, evaluation data and seed, from the newest record (by ``created``, then
    id); legacy records are all kept. ``superseded`` maps (key, identity) to notes on the
    records left out."""
    ordered = sorted(records, key=lambda r: (r['created'], r['id']), reverse=True)
    seen: Dict[tuple, Dict[str, Any]] = {}
    entries, superseded = [], {}
    for record in ordered:
        for protocol in record['protocols']:
            key, ident = _base_key(record, protocol), _identity(record, protocol)
            slot = (key, ident, int(record['seed']))
            if ident[0] == 'setting' and slot in seen:
                superseded.setdefault((key, ident), []).append(
                    f"seed {record['seed']} recorded again ({record['id']}, superseded by "
                    f"{seen[slot]['id']})")
                continue
            seen[slot] = record
            entries.append((key, ident, record, protocol))
    return entries, superseded


def run_of(record: Dict[str, Any], protocol: str, metric: str) -> Dict[str, Any]:
    """What a row keeps of one of its records for the explorer's detail: seed, id, its value
    of the main metric (a number or its NA string), time, memory, its step's count (encoder
    passes, GFLOP per image), commit, versions, host and its t-SNE figure as recorded ('' for a
    stand-in of a step without a record)."""
    git = record.get('git') or {}
    figure = ((record['protocols'].get('cluster_tsne') or {}).get('settings') or {}).get('figure')
    return dict(seed=int(record['seed']), id='' if record.get('placeholder') else record['id'],
                status=str(record.get('status', 'ok')), created=record.get('created', ''),
                value=record['protocols'][protocol].get('metrics', {}).get(metric),
                time_s_per_epoch=record.get('time_s_per_epoch'),
                peak_memory_gb=record.get('peak_memory_gb'), **record_compute(record),
                commit=git.get('commit'), dirty=git.get('dirty'),
                versions=record.get('versions') or {}, host=record.get('host') or {},
                figure=figure or '')


def _row(key: Tuple, ident: Tuple[str, str, Optional[str], str], status: str,
         items: List[Tuple[dict, str]], superseded: List[str]) -> Row:
    """One row from its (record, protocol) items, one per seed (legacy rows: per record)."""
    records = [record for record, _ in items]
    protocol = key[4]
    newest = max(records, key=lambda r: (r['created'], r['id']))
    row = dict(zip(KEY, key), source=SUITE, status=status, legacy=ident[0] == 'legacy',
               setting=ident[1] if ident[0] == 'setting' else None,
               variant=ident[1] if ident[0] == 'legacy' else '',
               overrides=dict(newest.get('overrides') or {}) if ident[0] == 'setting' else {},
               config=str(newest.get('config') or ''), world_size=newest.get('world_size'),
               key_bn=ident[2], protocol_settings=ident[3], metrics={}, by_seed={},
               superseded=list(superseded), label='', na_seeds={})
    notes, main = [], main_metric(protocol)[0]
    if ident[2]:
        notes.append(f'key BN: {ident[2]}')
    for metric in METRICS:
        values, na = [], []
        for record, proto in items:
            value = record['protocols'][proto].get('metrics', {}).get(metric)
            if number(value) is not None:
                values.append(number(value))
            elif isinstance(value, str):
                na.append(value)
        if values or na:
            row['metrics'][metric] = summarize(values, na)
            notes += [f'{metric}: {reason}' for reason in dict.fromkeys(na)]
    per_seed: Dict[int, List[float]] = {}
    for record, proto in items:  # the main metric per seed (legacy rows may hold a seed twice)
        value = record['protocols'][proto].get('metrics', {}).get(main)
        if number(value) is not None:
            per_seed.setdefault(int(record['seed']), []).append(number(value))
        else:
            row['na_seeds'][int(record['seed'])] = f"{main} {value or 'not recorded'}"
    row['by_seed'] = {seed: sum(v) / len(v) for seed, v in per_seed.items()}
    row['runs'] = [run_of(record, proto, main) for record, proto in items]
    if superseded:
        notes.append(f'{len(superseded)} superseded record(s): ' + '; '.join(superseded))
    row.update(**row_compute(records), total_batch='/'.join(str(b) for b in sorted(
                   {r['total_batch'] for r in records if r.get('total_batch') is not None})),
               seeds=sorted(int(r['seed']) for r in records), note='; '.join(notes))
    return row


def suite_rows(records: Iterable[Dict[str, Any]]) -> List[Row]:
    """Rows of our own records: one per key, setting, protocol settings and status,
    statistics over seeds."""
    entries, superseded = newest_per_seed(records)
    groups: Dict[tuple, List[Tuple[dict, str]]] = {}
    for key, ident, record, protocol in entries:
        groups.setdefault((key, ident, str(record.get('status', 'ok'))), []).append(
            (record, protocol))
    noted = set()
    rows = []
    for (key, ident, status), items in groups.items():
        notes = [] if (key, ident) in noted else superseded.get((key, ident), [])
        if notes:
            noted.add((key, ident))
        rows.append(_row(key, ident, status, items, notes))
    return rows


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
            zip(KEY, key), variant='', status='ok', label=f'{row_label(key[5])} (paper)',
            metrics={}, by_seed={}, tables=[], legacy=False, setting=None, overrides={}, config='',
            key_bn=None, world_size=None, protocol_settings='', superseded=[], runs=[],
            time_s_per_epoch=None, peak_memory_gb=None, encoder_passes=None,
            gflop_per_image=None, train_flops=None, device_seconds=None, hardware='',
            total_batch='', seeds=[], note=''))
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


def table_key(row: Row) -> Tuple:
    """The table a row is printed in: its section (backbone, epochs, data) and metric family."""
    return tuple(row[k] for k in GROUP) + (protocol_family(row['protocol']),)


def common_overrides(rows: Iterable[Row]) -> Dict[str, Any]:
    """The overrides every row of ours (with a setting) shares, value for value; none where
    fewer than two settings are there to share them (a lone setting's label keeps its own)."""
    ours = [r for r in rows if r['source'] == SUITE and not r['legacy']]
    if len({r['setting'] for r in ours}) < 2:
        return {}
    common = dict(ours[0]['overrides'])
    for row in ours[1:]:
        common = {k: v for k, v in common.items()
                  if k in row['overrides'] and row['overrides'][k] == v}
    return common


def _config_stem(path: str) -> str:
    return re.sub(r'\.py$', '', path.rsplit('/', 1)[-1])


def _departing_settings(row: Row, others: List[Row]) -> str:
    """The protocol settings `row` has and some of `others` lack (all of them where that is
    none); 'settings not recorded' for a row without."""
    if not row['protocol_settings']:
        return 'settings not recorded'
    split = lambda text: re.split(r', (?=\w+=)', text) if text else []
    own = split(row['protocol_settings'])
    departing = [part for part in own if any(part not in split(o['protocol_settings'])
                                             for o in others)]
    return ', '.join(departing or own)


def label_rows(rows: List[Row]) -> None:
    """Set each row's ``label``, in place: the method's label (`row_label`), then what tells
    its row apart from the method's other rows of the section: the config file (where several
    were used), the number of processes (where several), the overrides beyond those every row
    shares, the protocol settings where rows of one protocol and evaluation data differ in
    them, and a short setting hash where all of that still agrees."""
    sections: Dict[Tuple, List[Row]] = {}
    for row in rows:
        sections.setdefault(tuple(row[k] for k in GROUP), []).append(row)
    for section in sections.values():
        common = common_overrides(section)
        ours = [r for r in section if r['source'] == SUITE]
        for row in ours:
            if row['legacy']:
                row['label'] = row_label(row['method'], row['variant']) + f' {LEGACY_MARK}'
                continue
            siblings = [r for r in ours if r['method'] == row['method'] and not r['legacy']]
            parts = [row_label(row['method'])]
            if len({r['config'] for r in siblings}) > 1 and row['config']:
                parts.append(f"· {_config_stem(row['config'])}")
            if len({r['world_size'] for r in siblings}) > 1:
                parts.append(f"· {row['world_size']} proc")
            if len({r['key_bn'] for r in siblings}) > 1:
                parts.append(f"· key BN: {row['key_bn'] or 'not recorded'}")
            own = [override_text(k, v) for k, v in row['overrides'].items() if k not in common]
            if own:
                parts.append(f"[{', '.join(own)}]")
            row['label'] = ' '.join(parts)
        told = [(row, [r for r in ours if r['label'] == row['label']  # e.g. kNN's k
                       and r['protocol_settings'] != row['protocol_settings']
                       and r['protocol'] == row['protocol'] and r['eval_data'] == row['eval_data']
                       and r['status'] == row['status']]) for row in ours]
        for row, others in told:  # found before any label changes, as below
            if others:
                row['label'] += f' · {_departing_settings(row, others)}'
        alike = [row for row in ours if row['setting'] and any(  # e.g. an edited config file
            r['label'] == row['label'] and r['setting'] and r['setting'] != row['setting']
            and r['protocol'] == row['protocol'] and r['eval_data'] == row['eval_data']
            and r['status'] == row['status'] for r in ours)]
        for row in alike:  # found before any label changes, so every one of them is marked
            row['label'] += f" #{row['setting'][:6]}"


def _natural(text: str) -> Tuple:
    """Sort key with numbers compared as numbers ('resnet18' < 'resnet101')."""
    return tuple((0, int(part), '') if part.isdigit() else (1, 0, part)
                 for part in re.split(r'(\d+)', text) if part)


def _order(value: str, order: Sequence[str]) -> Tuple:
    return (order.index(value), ()) if value in order else (len(order), _natural(value))


def sort_key(row: Row) -> Tuple:
    """Backbone, epochs, pretraining data, evaluation data (the pretraining data first),
    protocol, method (each MixCo after its baseline), the shipped setting before variants,
    suite before paper, 'ok' first."""
    return (_natural(row['backbone']), row['pretrain_epochs'], _natural(row['pretrain_data']),
            row['eval_data'] != row['pretrain_data'], _natural(row['eval_data']),
            _order(row['protocol'], PROTOCOL_ORDER),
            _order(row['method'], METHOD_ORDER), row['source'] != SUITE, row['legacy'],
            len(row['label']), _natural(row['label']), row['status'] != 'ok', row['status'])


def mark_missing_seeds(rows: List[Row]) -> None:
    """Add to each row of ours (``na_seeds``: {seed: why}) the seeds its setting ran but whose
    record is another status (diverged, failed, queued, missing): they drop out of its pairing,
    and the comparison names them."""
    def slot(row: Row) -> Tuple:
        return tuple(row[k] for k in KEY) + (row['setting'], row['variant'], row['key_bn'])
    others: Dict[Tuple, Dict[int, str]] = {}
    for row in rows:
        if row['source'] == SUITE and row['status'] != 'ok':
            for seed in row['seeds']:
                others.setdefault(slot(row), {})[seed] = row['status']
    for row in rows:
        if row['source'] == SUITE and row['status'] == 'ok':
            for seed, status in others.get(slot(row), {}).items():
                if seed not in row['by_seed']:
                    row['na_seeds'].setdefault(seed, status)


def build_rows(records: Iterable[Dict[str, Any]], paper: Iterable[Dict[str, str]] = (),
               policy: Optional[StatsPolicy] = None) -> List[Row]:
    """All leaderboard rows, labelled, sorted, with comparisons to their baselines (paired
    statistics over seeds, judged within their families by `policy`) and to the paper's rows."""
    rows = suite_rows(records) + paper_rows(paper)
    label_rows(rows)
    mark_missing_seeds(rows)
    rows.sort(key=sort_key)
    add_comparisons(rows, policy)
    return rows
