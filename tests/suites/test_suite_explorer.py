"""The explorer of a suite in a real browser (headless Chromium over its DevTools protocol):
loaded from file://, filtered, sorted by a column and a row opened with the keyboard, what it
shows equals the CSV in every state, at 1280x800 and at a phone's width, without a console
message. A screenshot of each state goes to $EXPLORER_SCREENSHOTS (else the test's temporary
folder) for a person to look at. Pages: a generated suite, the demo suite's committed page and
the digits ablation rendered from generated records of its own plan."""
import json
import os
import re
from pathlib import Path

from benchmark.layout import REPO_ROOT
from benchmark.names import METRIC_FORMATS
from benchmark.reports.leaderboard import GROUP, section_title
from benchmark.reports.explorer import ASSETS
from tests.reports.explorer_page import (DESKTOP, check_detail, choose, detail, expected,
                                         mean_of, open_row, ordered, page_data, read_csv, shoot,
                                         shown, sort_by)

DEMO = REPO_ROOT / 'results' / 'reference' / 'demo_digits'
FETCHES = r'<(link|img|iframe)\b|\ssrc=|url\(|@import|fetch\(|XMLHttpRequest'


def screenshots(tmp_path: Path, name: str) -> Path:
    folder = Path(os.environ.get('EXPLORER_SCREENSHOTS') or tmp_path) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def check_page_file(page: Path, rows) -> dict:
    """Small, self-contained (nothing fetched), its embedded rows the CSV's; its data."""
    assert page.stat().st_size <= 1_000_000
    assert not re.search(FETCHES, page.read_text(encoding='utf-8'))
    data = page_data(page)
    assert [dict(zip(data['columns'], r['csv'])) for r in data['rows']] == rows
    return data


def seed_values(found: dict, row, records: dict):
    """Each opened seed's value beside its record's (formatted as the page formats it)."""
    shown_values, recorded = [], []
    for seed in found['seeds']:
        href = dict(seed['links'])['record']
        record = records[Path(href).stem]
        value = record['protocols'][row['protocol']]['metrics'][row['main_metric']]
        shown_values.append(seed['value'])
        recorded.append(value if isinstance(value, str)
                        else format(value, METRIC_FORMATS[row['main_metric']]))
    return shown_values, recorded


def compute_points(browser, row):
    """What the view of accuracy against compute of `row`'s section is drawn against, and the
    titles of its points."""
    title = json.dumps(section_title(row['backbone'], row['pretrain_epochs'], row['pretrain_data']))
    select = ("document.getElementById([...document.querySelectorAll('#sections h2')].find("
              f"h => h.textContent === {title}).id + '-compute')")
    return (browser.evaluate(f'{select}.value'), sorted(browser.evaluate(
        f"[...{select}.closest('div.figure').querySelectorAll('circle title')]"
        '.map(t => t.textContent)')))


def point_titles(rows, row, column: str):
    """The titles the page should give the points of `row`'s section against `column`, from
    the CSV."""
    section = [r for r in rows if all(r[k] == row[k] for k in GROUP)]
    return sorted(f"{r['method_label']}, {r['protocol_label']} on {r['eval_data']}: "
                  f"{float(r['top1_mean']):.2f} at {r[column]}" for r in section
                  if r['source'] == 'this suite' and r['main_metric'] == 'top1'
                  and r['top1_mean'] not in ('', 'NA') and r[column])


def test_the_explorer_shows_what_the_csv_holds_in_every_state(page_browser, rendered_suite,
                                                              tmp_path):
    browser, shots = page_browser, screenshots(tmp_path, 'generated')
    paths = {p.name: p for p in rendered_suite['paths']}
    page, rows = paths['index.html'], read_csv(paths['leaderboard.csv'])
    check_page_file(page, rows)
    browser.open(page.as_uri(), *DESKTOP)
    assert shown(browser) == [expected(r) for r in rows]
    assert browser.evaluate("document.getElementById('count').textContent") == \
        f'{len(rows)} of {len(rows)} rows'
    shoot(browser, shots, '1-loaded')

    choose(browser, 'method', 'mixco')
    mixco = [r for r in rows if r['method'] == 'mixco']
    assert shown(browser) == [expected(r) for r in mixco] and len(mixco) < len(rows)
    shoot(browser, shots, '2-filtered')

    sort_by(browser, 'mean', descending=True)
    order = ordered(rows, mixco, mean_of, descending=True)
    assert shown(browser) == [expected(r) for r in order]
    shoot(browser, shots, '3-sorted')

    target = next(r for r in order if r['paired_diffs'] and r['protocol'] == 'knn')
    index = rows.index(target)
    open_row(browser, index)
    found = detail(browser, index)
    check_detail(found, target)
    records = {r['id']: r for r in rendered_suite['records']}
    values, recorded = seed_values(found, target, records)
    assert values == recorded
    first = found['seeds'][0]['links']
    assert [name for name, _ in first] == ['record']
    assert (page.parent / first[0][1]).is_file()  # relative, and it leads there
    shoot(browser, shots, '4-opened')
    assert browser.evaluate("document.querySelectorAll('#sections svg[role=img]').length") >= 2
    assert browser.problems == []


def test_the_demo_suites_committed_explorer(page_browser, tmp_path):
    """results/reference/demo_digits/index.html as committed (`make publish` regenerates it
    from the published records whenever the explorer changes): its code is this commit's
    explorer, its numbers the committed CSV's and its links lead to the committed files."""
    browser, shots = page_browser, screenshots(tmp_path, 'demo')
    page, rows = DEMO / 'index.html', read_csv(DEMO / 'leaderboard.csv')
    text = page.read_text(encoding='utf-8')
    for asset in ('explorer.js', 'explorer.css'):
        assert (ASSETS / asset).read_text(encoding='utf-8') in text, \
            f'{page} is stale: rerun make publish'
    data = check_page_file(page, rows)
    records = {p.stem: json.loads(p.read_text()) for p in (DEMO / 'runs').glob('*.json')}
    for row in data['rows']:  # every run's files, from every row
        for seed in row['seeds']:
            for href in seed['links'].values():  # inside the committed folder
                assert (DEMO / href).resolve().is_relative_to(DEMO.resolve()), href
                assert (DEMO / href).is_file(), href
            trained = records[Path(seed['links']['record']).stem]['pretrain_epochs'] > 0
            assert list(seed['links']) == (['record', 'report', 'curves', 't-SNE'] if trained
                                           else ['record', 'report', 't-SNE'])

    browser.open(page.as_uri(), *DESKTOP)
    assert shown(browser) == [expected(r) for r in rows]
    # the trained runs' records carry their counted step; the random encoder trained none ('—')
    gflop = {r['pretrain_epochs']: {c['gflop'] for c, row in zip(shown(browser), rows)
                                    if row['pretrain_epochs'] == r['pretrain_epochs']}
             for r in rows}
    assert gflop['0'] == {'—'} and '—' not in gflop['30'] and len(gflop['30']) == 2, gflop
    trained = rows[-1]  # a row of the 30-epoch section (the other: random init)
    assert trained['pretrain_epochs'] == '30'
    assert compute_points(browser, trained) == ('gflop',
                                                point_titles(rows, trained, 'gflop_per_image'))
    shoot(browser, shots, '1-loaded')
    choose(browser, 'protocol', 'kNN')
    knn = [r for r in rows if r['protocol'] == 'knn']
    assert shown(browser) == [expected(r) for r in knn] and len(knn) < len(rows)
    shoot(browser, shots, '2-filtered')
    sort_by(browser, 'mean', descending=True)
    order = ordered(rows, knn, mean_of, descending=True)
    assert shown(browser) == [expected(r) for r in order]
    shoot(browser, shots, '3-sorted')

    target = next(r for r in order if r['method'] == 'mixco')
    index = rows.index(target)
    open_row(browser, index)
    found = detail(browser, index)
    check_detail(found, target)
    values, recorded = seed_values(found, target, records)
    assert values == recorded
    for seed in found['seeds']:
        assert [name for name, _ in seed['links']] == ['record', 'report', 'curves', 't-SNE']
        assert all((page.parent / href).resolve().is_file() for _, href in seed['links'])
        record = records[Path(dict(seed['links'])['record']).stem]
        assert seed['time'] == f"{record['time_s_per_epoch']:.1f}"
        assert seed['memory'] == f"{record['peak_memory_gb']:.2f}"
    shoot(browser, shots, '4-opened')
    assert browser.problems == []


def test_the_digits_ablation_explorer(page_browser, rendered_ablation, tmp_path):
    """Every config, variant, seed and protocol of configs/suites/mixco_ablation_digits.py
    (records of its plan, numbers generated) on one page of at most 1 MB."""
    browser, shots = page_browser, screenshots(tmp_path, 'ablation')
    paths = {p.name: p for p in rendered_ablation['paths']}
    page, rows = paths['index.html'], read_csv(paths['leaderboard.csv'])
    check_page_file(page, rows)
    suite = rendered_ablation['suite']
    variants = {(r.info['method'], r.variant_label) for r in suite.runs}
    assert len(variants) == 8 and {r['seeds'] for r in rows} == {'0 1 2'}
    assert len(rows) == len(variants) * 5  # the default protocols and the online probe
    passes = {r['method']: float(r['encoder_passes']) for r in rows}
    assert passes['mixco'] - passes['mocov2'] == 0.5  # MixCo's mixed views
    assert all(r['gflop_per_image'] and r['hardware'] for r in rows)
    browser.open(page.as_uri(), *DESKTOP)
    assert shown(browser) == [expected(r) for r in rows]
    assert compute_points(browser, rows[0]) == ('gflop',
                                                point_titles(rows, rows[0], 'gflop_per_image'))
    shoot(browser, shots, '1-loaded')
    choose(browser, 'protocol', 'kNN')
    knn = [r for r in rows if r['protocol'] == 'knn']
    assert shown(browser) == [expected(r) for r in knn] and len(knn) == len(variants)
    shoot(browser, shots, '2-filtered')
    sort_by(browser, 'delta', descending=True)
    delta = lambda r: float(r['paired_delta_mean']) if r['paired_delta_mean'] else None  # noqa: E731
    order = ordered(rows, knn, delta, descending=True)
    assert shown(browser) == [expected(r) for r in order]
    shoot(browser, shots, '3-sorted')

    target = next(r for r in order if r['variant'] or r['overrides'].count('=') > 1)
    index = rows.index(target)
    open_row(browser, index)
    found = detail(browser, index)
    check_detail(found, target)
    records = {r['id']: r for r in rendered_ablation['records']}
    values, recorded = seed_values(found, target, records)
    assert values == recorded
    assert all([name for name, _ in s['links']] == ['record'] for s in found['seeds'])
    assert all((page.parent / href).is_file() for s in found['seeds'] for _, href in s['links'])
    shoot(browser, shots, '4-opened')
    assert browser.problems == []


def test_the_explorer_at_equal_training_compute(page_browser, rendered_budget, rendered_suite,
                                                tmp_path):
    """A suite with a budget: its section at equal training compute shows the leaderboard's
    verdict sentences, a row per comparison with the CSV's verdict, and the trade-off plot
    (each method's equal-epoch and equal-compute points, one line per method, the budget
    dashed) with the uncounted variant named beside it; a suite without a budget has none."""
    browser, shots = page_browser, screenshots(tmp_path, 'budget')
    page = next(p for p in rendered_budget['paths'] if p.name == 'index.html')
    data = page_data(page)
    equal = data['equal_compute']
    browser.open(page.as_uri(), *DESKTOP)
    part = "document.getElementById('equal-compute')"
    assert browser.evaluate(f"{part}.querySelector('h2').textContent") == \
        'At equal training compute'
    assert browser.evaluate(f"[...{part}.querySelectorAll('li')].map(li => li.textContent)") == \
        equal['verdicts']
    verdicts = [dict(zip(data['columns'], r['csv']))['verdict'] for r in equal['rows']]
    assert browser.evaluate(f"[...{part}.querySelectorAll('tbody tr')].map(tr => "
                            "tr.children[7].textContent)") == verdicts
    first = next(iter(equal['tasks']))
    want = sorted(f"{line['label']} at {p['epochs']} epochs ({p['regime']}): top-1 "
                  f"{p['top1']:.2f} over {p['seeds']} seed(s), {p['compute']}"
                  for line in equal['tasks'][first] for p in line['points'])
    assert sorted(browser.evaluate(f"[...{part}.querySelectorAll('svg [data-regime] title')]"
                                   '.map(t => t.textContent)')) == want
    assert browser.evaluate(f"{part}.querySelectorAll('svg path:not([data-regime])').length") == 2
    assert browser.evaluate(f"{part}.querySelectorAll('svg line.budget').length") == 1
    assert 'model.mix_temperature=0.1' in browser.evaluate(
        "document.getElementById('not-counted').textContent")
    shoot(browser, shots, '1-equal-compute')
    assert browser.problems == []
    plain = next(p for p in rendered_suite['paths'] if p.name == 'index.html')
    browser.open(plain.as_uri(), *DESKTOP)
    assert browser.evaluate(f'{part} === null') and browser.problems == []
