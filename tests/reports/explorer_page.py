"""What an explorer page (``index.html``) shows, read in a browser (tests/reports/browser.py),
and what it should show, formatted from the CSV row in Python as the page's script formats it:
the table's cells, a row's detail and its per-seed lines. The tests drive one page through its
states (filtered, sorted, a row opened) and compare in each."""
import csv
import json
import re
from pathlib import Path
from typing import Dict, List

from benchmark.names import METRIC_FORMATS
from benchmark.reports.tables import signed

PHONE = (390, 844)
DESKTOP = (1280, 800)
CELLS = ('section', 'eval_data', 'protocol', 'method', 'status', 'n', 'mean', 'delta', 'test',
         'verdict', 'family', 'time', 'memory', 'passes', 'gflop', 'hardware')
NOT_COUNTED = '—'  # a training step's count the records do not hold
SHOWN = """[...document.querySelectorAll('#body > tr[data-index]')].map(tr => Object.fromEntries(
  [...tr.querySelectorAll('td[data-col]')].map(td => [td.dataset.col, td.textContent])))"""
DETAIL = """(index => {{
  const root = document.getElementById('detail-' + index);
  return {{pairs: [...root.querySelectorAll('dt')].map(dt => [dt.textContent,
             dt.nextElementSibling.textContent]),
           seeds: [...root.querySelectorAll('tr[data-seed]')].map(tr => Object.assign(
             Object.fromEntries([...tr.querySelectorAll('td[data-col]')].map(td =>
               [td.dataset.col, td.textContent])), {{seed: Number(tr.dataset.seed),
             links: [...tr.querySelectorAll('a')].map(a => [a.textContent,
                                                           a.getAttribute('href')])}}))}};
}})({index})"""


def read_csv(path: Path) -> List[Dict[str, str]]:
    with path.open(newline='', encoding='utf-8') as handle:
        return list(csv.DictReader(handle))


def page_data(page: Path) -> dict:
    """The JSON the page embeds."""
    return json.loads(re.search(r'id="data">(.*?)</script>', page.read_text(encoding='utf-8'),
                                re.S).group(1))


def _num(text: str):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float('inf') else None


def _fixed(text: str, digits: int) -> str:
    value = _num(text)
    return '' if value is None else f'{value:.{digits}f}'


def counted(text: str, places: int) -> str:
    return _fixed(text, places) or NOT_COUNTED


def p_text(text: str) -> str:
    """A p-value as the page writes it: '< 0.0001', else two significant digits."""
    p = _num(text)
    if p is None:
        return ''
    if p < 1e-4:
        return '< 0.0001'
    short = repr(float(f'{p:.2g}'))
    return short[:-2] if short.endswith('.0') else short


def digits(row: Dict[str, str]) -> int:
    return int(METRIC_FORMATS[row['main_metric']][1:-1])


def expected(row: Dict[str, str]) -> Dict[str, str]:
    """The cells the page shows of a CSV row (its plots aside)."""
    metric, places = row['main_metric'], digits(row)
    mean = row[f'{metric}_mean']
    return dict(
        section=f"{row['backbone']} · {row['pretrain_epochs']} ep · {row['pretrain_data']}",
        eval_data=row['eval_data'], protocol=row['protocol_label'], method=row['method_label'],
        status=row['status'], n=row[f'{metric}_n'],
        mean=mean if mean in ('', 'NA') else _fixed(mean, places),
        delta=signed(float(row['paired_delta_mean']), f'.{places}f')
        if row['paired_delta_mean'] else '',
        test=f"{p_text(row['p_signflip'])} ({p_text(row['p_holm'])})" if row['p_holm'] else '',
        verdict=row['verdict'],
        family=f"{row['family']} ({row['family_size']})" if row['family'] else '',
        time=_fixed(row['time_s_per_epoch'], 1), memory=_fixed(row['peak_memory_gb'], 2),
        passes=counted(row['encoder_passes'], 2), gflop=counted(row['gflop_per_image'], 3),
        hardware='; '.join(h.split(' (')[0] for h in row['hardware'].split('; ')))


def shown(browser) -> List[Dict[str, str]]:
    """The cells of the table's visible rows, in their order."""
    return [{k: cells[k] for k in CELLS} for cells in browser.evaluate(SHOWN)]


def _interval(row: Dict[str, str], places: int) -> str:
    if row['ci_low']:
        return (f"[{_fixed(row['ci_low'], places)}, {_fixed(row['ci_high'], places)}] "
                f"({100 * float(row['ci_level']):#.3g}%)")
    n = _num(row[f"{row['main_metric']}_n"])
    if row['range_low'] and n is not None and n > 1:
        return f"range [{_fixed(row['range_low'], places)}, {_fixed(row['range_high'], places)}]"
    return ''


def expected_detail(row: Dict[str, str]) -> Dict[str, str]:
    """What a row's detail says (its 'term: value' pairs) that the CSV holds."""
    metric, places = row['main_metric'], digits(row)
    fmt = f'.{places}f'
    mean = _num(row[f'{metric}_mean'])
    std = _num(row[f'{metric}_std'])
    out = {
        'row': row['method_label'], 'method': row['method'], 'protocol': row['protocol_label'],
        'protocol settings': row['protocol_settings'] or 'not recorded', 'status': row['status'],
        'mean ± std': '' if mean is None else f'{mean:{fmt}}'
        + ('' if std is None else f' ± {std:{fmt}}') + f" (n={row[f'{metric}_n']})",
        'interval': _interval(row, places),
        'time per epoch': f"{_fixed(row['time_s_per_epoch'], 1)} s" if row['time_s_per_epoch']
        else '',
        'peak memory': f"{_fixed(row['peak_memory_gb'], 2)} GB" if row['peak_memory_gb'] else '',
        'encoder passes': counted(row['encoder_passes'], 2),
        'GFLOP': counted(row['gflop_per_image'], 3), 'hardware': row['hardware'],
        'total batch': row['total_batch'], 'baseline': row['delta_baseline'],
        'paired Δ': f"{signed(float(row['paired_delta_mean']), fmt)} over "
                    f"{row['paired_delta_n']} seed(s)" if row['paired_delta_mean'] else '',
        'Δ interval': f"[{signed(float(row['paired_ci_low']), fmt)}, "
                      f"{signed(float(row['paired_ci_high']), fmt)}] "
                      f"({100 * float(row['paired_ci_level']):#.3g}%)"
        if row['paired_ci_low'] else '',
        'sign-flip p': p_text(row['p_signflip']), 'Holm p': p_text(row['p_holm']),
        'verdict': row['verdict'],
        'family': f"{row['family']} ({row['family_size']})" if row['family'] else '',
        'P(better)': f"{_fixed(row['p_improve'], 2)} [{_fixed(row['p_improve_low'], 2)}, "
                     f"{_fixed(row['p_improve_high'], 2)}]" if row['p_improve'] else '',
        'MDE': row['mde'], 'seeds for a verdict': row['seeds_for_verdict'],
        'ours − paper': row['paper_delta']}
    return {k: v for k, v in out.items() if v != ''}


def detail(browser, index: int) -> dict:
    """The opened detail of row `index`: its pairs {term: value} (those the CSV holds are
    compared) and its per-seed lines (seed, value, diff, links [(name, href)])."""
    found = browser.evaluate(DETAIL.format(index=index))
    return dict(pairs=dict(found['pairs']), seeds=found['seeds'])


def check_detail(found: dict, row: Dict[str, str]) -> None:
    """The detail says what the CSV holds: each pair the CSV decides, and the paired
    differences seed by seed."""
    want = expected_detail(row)
    said = {k: found['pairs'].get(k) for k in want}
    for key in ('encoder passes', 'GFLOP'):  # the number, then what it is
        said[key] = (said[key] or '').split(' ')[0]
    assert said == want
    assert [s['seed'] for s in found['seeds']] == [int(s) for s in row['seeds'].split()]
    fmt = f'.{digits(row)}f'
    assert [s['diff'] for s in found['seeds'] if s['diff']] == [
        signed(float(d), fmt) for d in row['paired_diffs'].split()]


def shoot(browser, folder: Path, name: str) -> List[Path]:
    """Screenshots of the page's present state at 1280x800 and at a phone's width (where
    nothing may be wider than the screen); the viewport is left at 1280x800."""
    browser.resize(*PHONE)
    assert browser.evaluate('document.documentElement.scrollWidth') <= PHONE[0], name
    phone = browser.screenshot(folder / f'{name}-phone.png')
    browser.resize(*DESKTOP)
    return [browser.screenshot(folder / f'{name}-1280.png'), phone]


def choose(browser, key: str, value: str) -> None:
    """Set the filter `key` (the select #filter-<key>) to `value`."""
    browser.evaluate(f"const s = document.getElementById('filter-{key}'); "
                     f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change'))")


def sort_by(browser, column: str, descending: bool) -> None:
    button = f"document.querySelector('th[data-col=\"{column}\"] button')"
    browser.evaluate(f'{button}.click()')
    if descending:
        browser.evaluate(f'{button}.click()')
    assert browser.evaluate(f"document.querySelector('th[data-col=\"{column}\"]')"
                            ".getAttribute('aria-sort')") == \
        ('descending' if descending else 'ascending')


def open_row(browser, index: int) -> None:
    """Open row `index` with the keyboard: focus its button, press Enter."""
    browser.evaluate(f"document.querySelector('tr[data-index=\"{index}\"] button.open').focus()")
    browser.press('Enter', 'Enter', 13)
    assert browser.evaluate('document.activeElement.getAttribute("aria-expanded")') == 'true'


def ordered(rows: List[Dict[str, str]], subset: List[Dict[str, str]], value,
            descending: bool) -> List[Dict[str, str]]:
    """`subset` in the page's order sorted by value(row) (a number or None): rows without one
    last, ties in the CSV's order."""
    known = [r for r in subset if value(r) is not None]
    key = (lambda r: (-value(r), rows.index(r))) if descending else \
        (lambda r: (value(r), rows.index(r)))
    return sorted(known, key=key) + [r for r in subset if value(r) is None]


def mean_of(row: Dict[str, str]):
    """The number the page sorts a row's mean by (None where it has none)."""
    return _num(row[f"{row['main_metric']}_mean"])
