"""The explorer of a generated suite in a real browser (headless Chromium over its DevTools
protocol): loaded from file://, filtered, sorted by a column and a row opened with the keyboard,
what it shows equals the CSV in every state, at 1280x800 and at a phone's width, without a
console message. A screenshot of each state goes to $EXPLORER_SCREENSHOTS (else the test's
temporary folder) for a person to look at."""
import csv
import json
import os
import re
from pathlib import Path

import pytest

from benchmark.names import METRIC_FORMATS
from benchmark.reports.tables import signed
from tests.reports.browser import Browser

SHOWN = """[...document.querySelectorAll('#body > tr[data-index]')].map(tr => Object.fromEntries(
  [...tr.querySelectorAll('td[data-col]')].map(td => [td.dataset.col, td.textContent])))"""


def expected(row):
    """The cells the page shows of a CSV row, formatted from the CSV's values."""
    metric = row['main_metric']
    fmt = METRIC_FORMATS[metric]
    mean = row[f'{metric}_mean']
    return dict(eval_data=row['eval_data'], protocol=row['protocol_label'],
                method=row['method_label'], n=row[f'{metric}_n'],
                mean=mean if mean in ('', 'NA') else format(float(mean), fmt),
                delta=signed(float(row['paired_delta_mean']), fmt) if row['paired_delta_mean']
                else '', verdict=row['verdict'])


def shown(browser):
    return [{k: cells[k] for k in ('eval_data', 'protocol', 'method', 'n', 'mean', 'delta',
                                   'verdict')} for cells in browser.evaluate(SHOWN)]


def test_the_explorer_shows_what_the_csv_holds_in_every_state(chromium, rendered_suite, tmp_path):
    paths = {p.name: p for p in rendered_suite['paths']}
    page, table = paths['index.html'], paths['leaderboard.csv']
    rows = list(csv.DictReader(table.open(newline='')))
    shots = Path(os.environ.get('EXPLORER_SCREENSHOTS') or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    assert page.stat().st_size < 1_000_000
    assert not re.search(r'<(link|img|iframe)\b|\ssrc=|url\(|@import|fetch\(|XMLHttpRequest',
                         page.read_text())  # nothing fetched
    browser = Browser(chromium, tmp_path / 'profile')
    try:
        browser.open(page.as_uri(), 1280, 800)
        assert shown(browser) == [expected(r) for r in rows]
        assert browser.evaluate("document.getElementById('count').textContent") == \
            f'{len(rows)} of {len(rows)} rows'
        browser.screenshot(shots / '1-loaded.png')

        browser.evaluate("const s = document.getElementById('filter-method'); s.value = 'mixco';"
                         "s.dispatchEvent(new Event('change'))")
        mixco = [r for r in rows if r['method'] == 'mixco']
        assert shown(browser) == [expected(r) for r in mixco] and len(mixco) < len(rows)
        browser.screenshot(shots / '2-filtered.png')

        browser.evaluate("document.querySelector('th[data-col=\"mean\"] button').click()")
        browser.evaluate("document.querySelector('th[data-col=\"mean\"] button').click()")
        assert browser.evaluate("document.querySelector('th[data-col=\"mean\"]')"
                                ".getAttribute('aria-sort')") == 'descending'
        known = [r for r in mixco if r[f"{r['main_metric']}_mean"] not in ('', 'NA')]
        order = sorted(known, key=lambda r: -float(r[f"{r['main_metric']}_mean"]))
        order += [r for r in mixco if r not in known]  # no mean: last
        assert shown(browser) == [expected(r) for r in order]
        browser.screenshot(shots / '3-sorted.png')

        target = next(r for r in order if r['paired_diffs'] and r['protocol'] == 'knn')
        index = rows.index(target)
        browser.evaluate(f"document.querySelector('tr[data-index=\"{index}\"] button.open')"
                         '.focus()')
        browser.press('Enter', 'Enter', 13)
        seeds = browser.evaluate(
            f"[...document.querySelectorAll('#detail-{index} tr[data-seed]')].map(tr => "
            "[Number(tr.dataset.seed), tr.querySelector('[data-col=value]').textContent, "
            "tr.querySelector('[data-col=diff]').textContent, "
            "[...tr.querySelectorAll('a')].map(a => a.textContent + ' ' + a.getAttribute('href'))])")
        assert [s for s, *_ in seeds] == [int(s) for s in target['seeds'].split()]
        diffs = [signed(float(d), '.2f') for d in target['paired_diffs'].split()]
        assert [d for _, _, d, _ in seeds if d] == diffs
        by_seed = {r['seed']: r for r in rendered_suite['records']
                   if r['method'] == 'mixco' and r['overrides'] == {}}
        assert [v for _, v, _, _ in seeds] == [
            f"{by_seed[s]['protocols']['knn']['metrics']['top1']:.2f}" for s, *_ in seeds]
        links = seeds[0][3]
        assert links == [f"record runs/{by_seed[seeds[0][0]]['id']}.json"]
        assert (page.parent / links[0].split(' ')[1]).is_file()  # relative, and it leads there
        assert browser.evaluate('document.activeElement.getAttribute("aria-expanded")') == 'true'
        browser.screenshot(shots / '4-opened.png')

        browser.resize(390, 844)
        assert browser.evaluate('document.documentElement.scrollWidth') <= 390
        browser.screenshot(shots / '5-phone.png')
        assert browser.evaluate("document.querySelectorAll('#sections svg[role=img]').length") >= 2
    finally:
        problems = browser.close()
    assert problems == []
    data = json.loads(re.search(r'id="data">(.*?)</script>', page.read_text(), re.S).group(1))
    assert [dict(zip(data['columns'], r['csv'])) for r in data['rows']] == rows
