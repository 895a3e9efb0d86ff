"""A readable page per evaluation record: ``results/runs/<id>/report.md`` with its figures.

Generated from the record (the source of truth) and the training's ``vis_data/scalars.json``;
it can be deleted and written again at any time.
"""
import json
import os.path as osp
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from benchmark.names import METRIC_FORMATS, PROTOCOLS, canonical_backbone, canonical_data
from benchmark.reports.comparisons import main_metric
from benchmark.reports.figures import draw, figure_lines
from benchmark.reports.interval_plot import plot_intervals
from benchmark.reports.leaderboard import GROUP, build_rows, section_title
from benchmark.reports.records import load_records
from benchmark.reports.tables import delta_cell, interval_cell, test_cell

KNN_KEYS = ('knn_monitor/top1', 'knn_monitor/top5')


def _cell(text: Any) -> str:
    """Text for a markdown table cell: pipes escaped, on one line."""
    return str(text).replace('|', '\\|').replace('\n', ' ')


def _value(value: Any) -> str:
    """A metric with 2 decimals; an ``'NA(<reason>)'`` string as it is."""
    return f'{value:.2f}' if isinstance(value, (int, float)) else str(value)


def _settings(settings: Dict[str, Any]) -> str:
    """``k=200, temperature=0.1``; the figure path is left out (the figure is shown below)."""
    parts = []
    for key, value in settings.items():
        if key == 'figure':
            continue
        text = value if isinstance(value, (str, int, float)) else json.dumps(value)
        parts.append(f'{key}={text}')
    return ', '.join(parts)


def metrics_table(protocols: Dict[str, dict]) -> List[str]:
    """Markdown rows: protocol and its settings on its first metric's row, one row per metric.

    Protocols in ``benchmark.names.PROTOCOLS`` order (records store their keys sorted).
    """
    lines = ['| protocol | settings | metric | value |', '| --- | --- | --- | --- |']
    order = {name: i for i, name in enumerate(PROTOCOLS)}
    for name, entry in sorted(protocols.items(), key=lambda item: order.get(item[0], len(order))):
        settings = _settings(entry.get('settings') or {})
        for i, (metric, value) in enumerate(entry['metrics'].items()):
            first = i == 0
            lines.append(f"| {name if first else ''} | {_cell(settings) if first else ''} "
                         f'| {metric} | {_cell(_value(value))} |')
        if not entry['metrics']:
            lines.append(f'| {name} | {_cell(settings)} | | |')
    return lines


def read_scalars(work_dir: Optional[str]) -> Tuple[Optional[Path], List[dict]]:
    """(path, rows) of the newest ``<work_dir>/*/vis_data/scalars.json``; (None, []) if none."""
    if not work_dir:
        return None, []
    files = sorted(Path(work_dir).glob('*/vis_data/scalars.json'),
                   key=lambda p: (p.stat().st_mtime, str(p)))
    if not files:
        return None, []
    rows = []
    for line in files[-1].read_text(encoding='utf-8').splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a killed run
        if isinstance(row, dict) and 'step' in row:
            rows.append(row)
    return files[-1], rows


def _plot_losses(ax: Any, rows: List[dict]) -> None:
    from matplotlib.ticker import MaxNLocator

    for key in sorted({k for r in rows for k in r if k.startswith('loss')}):
        ax.plot(*zip(*[(r['step'], r[key]) for r in rows if key in r]), label=key, linewidth=1.2)
    ax.set(xlabel='iteration', ylabel='loss', title='training loss terms')
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _plot_knn(ax: Any, rows: List[dict]) -> None:
    from matplotlib.ticker import MaxNLocator

    values = []
    for key in KNN_KEYS:
        points = [(r['step'], r[key]) for r in rows if key in r]
        if points:
            ax.plot(*zip(*points), marker='o', label=key)
            values += [v for _, v in points]
    ax.set(xlabel='epoch', ylabel='kNN accuracy (%)', title='kNN monitor (fixed subset)',
           ylim=(max(0, min(values) - 5), min(102, max(values) + 5)))
    epochs = sorted({r['step'] for r in rows})
    if len(epochs) <= 12:  # whole epochs only, also for one or two points
        ax.set_xticks(epochs)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def plot_curves(rows: List[dict], path: str) -> bool:
    """Loss terms over iterations and knn_monitor accuracy over epochs; False if nothing to plot.

    Loss rows are mmengine's per-iteration lines (``step`` = global iteration); knn_monitor
    rows have ``step`` = completed epochs (``KNNMonitorHook``).
    """
    from matplotlib.figure import Figure  # a bare Figure: Agg, no pyplot global state

    panels = [(draw, part) for draw, part in (
        (_plot_losses, [r for r in rows if any(k.startswith('loss') for k in r)]),
        (_plot_knn, [r for r in rows if KNN_KEYS[0] in r])) if part]
    if not panels:
        return False
    fig = Figure(figsize=(6 * len(panels), 4.5), layout='constrained')
    for ax, (draw, part) in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels):
        draw(ax, part)
        ax.legend()
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110)
    return True


def _figure_link(figure: str, folder: Path) -> Optional[str]:
    """Link to the record's figure relative to ``folder``, or None if the file is gone.

    Records store the figure path as written (relative to the working directory then); a
    report written from elsewhere finds it beside the record under its file name.
    """
    for candidate in (Path(figure), folder / osp.basename(figure)):
        if candidate.is_file():
            return Path(osp.relpath(candidate.resolve(), folder.resolve())).as_posix()
    return None


def _header(record: Dict[str, Any], rid: str) -> List[str]:
    epochs = record['pretrain_epochs']
    title = (f"# {record['method']} {record['backbone']}: {record['pretrain_data']}, "
             f"{epochs} epoch{'' if epochs == 1 else 's'}")
    facts = [f"record `{rid}`", f"created {record.get('created')}",
             f"status {record.get('status')}", f"evaluated on {record.get('eval_data')}",
             f"seed {record.get('seed')}", f"{record.get('world_size')} process(es)",
             f"total batch {record.get('total_batch')}"]
    if record.get('time_s_per_epoch') is not None:
        facts.append(f"{record['time_s_per_epoch']:.1f} s/epoch")
    if record.get('peak_memory_gb') is not None:
        facts.append(f"peak memory {record['peak_memory_gb']:.2f} GB")
    facts += [f'{key} `{record[key]}`' for key in ('config', 'checkpoint') if record.get(key)]
    return [title, '', ', '.join(facts) + '.', '']


def among_records(record: Dict[str, Any], results_dir: Path, folder: Path) -> List[str]:
    """Markdown lines placing the record among the records of its results folder: its setting's
    row per protocol (mean and interval over the seeds recorded so far, the paired comparison
    with its baseline) and the section's interval plot (``intervals.png`` in `folder`)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # a broken neighbour is reported by the leaderboard
        rows = build_rows(load_records(str(results_dir)))
    section = (canonical_backbone(record['backbone']), int(record['pretrain_epochs']),
               canonical_data(record['pretrain_data']))
    rows = [r for r in rows if tuple(r[k] for k in GROUP) == section]
    mine = [r for r in rows if r['method'] == record['method'] and r['status'] == record['status']
            and r['setting'] == record.get('setting_sha256') and r['eval_data'] == canonical_data(record['eval_data'])
            and r['protocol'] in record['protocols'] and int(record['seed']) in r['seeds']]
    if not mine:
        return []
    lines = ['', '## Among the records of its folder', '',
             f"This run's setting over the seeds recorded in `{results_dir}` so far (main metric, "
             "exact interval, or the seeds' range under the minimum for a verdict; the paired "
             'comparison over the seeds both rows have):', '',
             '| protocol | row | main metric | n | mean, interval | Δ vs baseline, interval | test |',
             '| --- | --- | --- | --- | --- | --- | --- |']
    for row in mine:
        metric = main_metric(row['protocol'])[0]
        stat = row['metrics'].get(metric) or {}
        mean = stat.get('mean')
        text = '' if mean is None else format(mean, METRIC_FORMATS[metric])
        interval = interval_cell(row, metric)
        lines.append(f"| {row['protocol']} | {_cell(row['label'])} | {metric} | {stat.get('n')} "
                     f"| {text} {interval} | {_cell(delta_cell(row['compare']))} "
                     f"| {_cell(test_cell(row['compare']))} |")
    title = section_title(*section[:3])
    path = folder / 'intervals.png'
    drawn = draw('the interval plot of the section', path,
                 lambda: plot_intervals(rows, str(path), title))
    return lines + [''] + figure_lines({'plot': 'intervals.png' if drawn is True else drawn},
                                       'plot', 'intervals of the section') if drawn else lines


def write_run_report(record_path: str, work_dir: Optional[str]) -> str:
    """Write ``<runs>/<id>/report.md`` (and ``curves.png``) for the record at ``record_path``.

    Args:
        record_path: A record written by ``benchmark.reports.records.write_record``.
        work_dir: The training's work dir (for ``*/vis_data/scalars.json``), or None when
            there are no training logs (e.g. an external checkpoint).

    Returns:
        The path of report.md.
    """
    record_file = Path(record_path)
    record = json.loads(record_file.read_text(encoding='utf-8'))
    folder = record_file.parent / record_file.stem
    folder.mkdir(parents=True, exist_ok=True)
    lines = _header(record, record_file.stem) + ['## Metrics', '']
    lines += metrics_table(record['protocols']) + ['', '## Training curves', '']
    scalars, rows = read_scalars(work_dir)
    curves = draw('the training curves', folder / 'curves.png',
                  lambda: plot_curves(rows, str(folder / 'curves.png')))
    if curves:
        lines += figure_lines({'curves': 'curves.png' if curves is True else curves}, 'curves',
                              'training curves') + ['', f'From `{scalars}`.']
    elif scalars is None:
        where = f'no */vis_data/scalars.json under `{work_dir}`' if work_dir else 'no work dir'
        lines.append(f'No training logs ({where}; e.g. an external checkpoint): no curves.')
    else:
        lines.append(f'`{scalars}` holds no loss or knn_monitor values: no curves.')
    figure = record['protocols'].get('cluster_tsne', {}).get('settings', {}).get('figure')
    if figure:
        link = _figure_link(figure, folder)
        lines += ['', '## t-SNE', '',
                  f'![t-SNE]({link})' if link else f't-SNE figure `{figure}` not found.']
    lines += among_records(record, record_file.parent.parent, folder)
    report = folder / 'report.md'
    report.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return str(report)
