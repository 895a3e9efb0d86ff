"""Runs at equal training compute (benchmark/suites/budget.py): the epochs that come nearest a
budget (against brute force), the learning-rate schedule scaled with them, the suite's plan
and dry run with the counted costs stood in for by other ratios, the counts kept so a rerun plans
the same, and bad budgets as one line before anything trains."""
import json
import math

import numpy as np
import pytest

import benchmark.components  # noqa: F401  registers what the configs name
from benchmark.engine.config_file import merge_options, read_config
from benchmark.suites import budget
from benchmark.suites.budget import (images_per_epoch, matched_epochs, read_budget,
                                     save_costs, schedule_text, stretched_schedule)
from benchmark.suites.plan import plan_lines, plan_suite
from benchmark.suites.spec import SuiteError, expand_suite
from tests.test_configs import epoch_lrs

DIGITS = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']


@pytest.mark.parametrize('budget_flops, epoch_flops', [(387.0, 17.8), (1e17, 3.3e15),
                                                       (10.0, 7.0), (10.0, 25.0), (99.0, 2.0)])
def test_matched_epochs_is_the_nearest_whole_count_by_brute_force(budget_flops, epoch_flops):
    want = min(range(1, 10_000), key=lambda e: (abs(e * epoch_flops - budget_flops), e))
    assert matched_epochs(budget_flops, epoch_flops) == want


def test_images_per_epoch_follow_the_samplers_share_and_drop_last():
    # 1437 images, batch 64: 22 full batches in one process; 2 processes get 719 each (one
    # padded), 11 full batches each; without drop_last every sample of the padded shares
    assert images_per_epoch(1437, 64, 1, True) == 1408
    assert images_per_epoch(1437, 64, 2, True) == 2 * 704
    assert images_per_epoch(1437, 64, 2, False) == 1438
    assert images_per_epoch(10, 4, 3, True) == 3 * 4


def test_the_authors_simclr_schedule_is_stretched_with_the_epochs():
    """SimCLR's 10 flat epochs and T_max 100 at 73 epochs: 7 flat, T_max 73; the lr is the
    authors' closed form at the scaled numbers, epoch by epoch."""
    cfg = read_config('configs/simclr_r18_tiny.py')
    options = stretched_schedule(cfg, 73)
    assert options == {'train_cfg.max_epochs': 73, 'param_scheduler.0.begin': 7,
                       'param_scheduler.0.end': 73, 'param_scheduler.0.T_max': 73}
    assert schedule_text(cfg, 73) == 'CosineAnnealingLR epochs 7-73 (T_max 73)'
    merge_options(cfg, options)
    got = np.array(epoch_lrs(cfg))
    want = np.array([0.15 * (1 + math.cos(math.pi * max(0, e - 7) / 73)) / 2 for e in range(73)])
    assert np.abs(got - want).max() < 1e-12
    plain = read_config('configs/mocov2_r18_digits.py')  # a cosine that follows max_epochs
    assert stretched_schedule(plain, 41) == {'train_cfg.max_epochs': 41}


@pytest.mark.parametrize('value, words', [
    ('5', 'budget must be dict('), ("dict(epochs=3)", 'budget must be dict('),
    ("dict(baseline='configs/mocov2_r18_digits.py', epochs=0)", 'epochs >= 1, got 0'),
    ("dict(baseline='configs/mocov2_r18_digits.py', epochs=2.5)", 'epochs >= 1, got 2.5'),
    ("dict(baseline='configs/mocov2_r18_digits.py', epochs=3, extra=1)", 'budget must be'),
    ("dict(baseline='configs/simclr_r18_tiny.py', epochs=3)", 'is not one of the suite'),
])
def test_a_bad_budget_is_one_line(value, words):
    cfg = dict(budget=eval(value))  # noqa: S307 - the test's own literals
    with pytest.raises(SuiteError) as err:
        read_budget(cfg, 'suite x.py', DIGITS)
    assert words in str(err.value) and '\n' not in str(err.value)


def test_a_method_whose_cost_is_unknown_is_one_line_before_training(tmp_path):
    """A config whose step cannot be counted (its data is missing) or whose epoch trains on no
    image stops the expansion."""
    cfg = read_config('configs/mocov2_r18_tiny.py')
    cfg.train_dataloader.dataset.data_root = str(tmp_path / 'nothing')
    with pytest.raises(SuiteError) as err:
        budget.count_epoch_cost(cfg, 1)
    text = str(err.value)
    assert text.startswith('the training compute of mocov2_r18_tiny.py is unknown') \
        and '\n' not in text
    # a batch over each process's share of the data: no image an epoch (and no batch to count)
    cfg = read_config('configs/mocov2_r18_digits.py')  # 1437 images, the last batch dropped
    cfg.train_dataloader.batch_size = 720
    with pytest.raises(SuiteError) as err:
        budget.count_epoch_cost(cfg, 2)
    assert str(err.value) == (
        'the training compute of mocov2_r18_digits.py is unknown: an epoch trains on no image '
        '(1437 images over 2 process(es), batches of 720, the last dropped); give it a smaller '
        'train_dataloader.batch_size or fewer procs')



@pytest.mark.parametrize('baseline', [0, 1, None])
def test_a_config_that_trains_by_iterations_is_one_line(tmp_path, fake_costs, baseline):
    """An IterBasedTrainLoop (by_epoch=False, max_iters) has no epochs for a budget to set, and
    a suite plans, resumes and reports whole epochs: refused before any step is counted, as a
    budget's baseline, as a compared config, or in a suite without a budget."""
    from pathlib import Path
    digits = Path(__file__).parents[2] / DIGITS[0]
    config = tmp_path / 'mocov2_iters.py'
    config.write_text(f'_base_ = [{str(digits)!r}]\n'
                      'train_cfg = dict(_delete_=True, by_epoch=False, max_iters=40)\n')
    configs = [str(config), DIGITS[1]]
    path = tmp_path / 'iters.py'
    path.write_text(f'configs = {configs!r}\nseeds = [0]\n' + (
        '' if baseline is None else f'budget = dict(baseline={configs[baseline]!r}, epochs=3)\n'))
    with pytest.raises(SuiteError) as err:
        expand_suite(str(path), results_root=str(tmp_path / 'r'), work_root=str(tmp_path / 'w'))
    text = str(err.value)
    assert f'run mocov2_iters-s0 ({config}) trains by iterations' in text and '\n' not in text
    assert 'max_iters' in text and 'max_epochs=E' in text
    assert fake_costs[1] == []  # no step counted


@pytest.fixture
def fake_costs(monkeypatch):
    """Counted costs stood in for: FLOPs per image by method (ratios no shipped method has),
    1400 images an epoch; the calls are logged."""
    per_image = {'MoCo': 7.0e6, 'MixCoMoCo': 9.1e6}
    calls = []

    def count(cfg, procs):
        calls.append(cfg.model.type)
        return dict(flops_per_image=per_image[cfg.model.type], images_per_epoch=1400 * procs)
    monkeypatch.setattr(budget, 'count_epoch_cost', count)
    return per_image, calls


def _suite(tmp_path, epochs: int, extra: str = ''):
    path = tmp_path / 'matched.py'
    path.write_text(f'configs = {DIGITS!r}\nseeds = [0]\n'
                    f"budget = dict(baseline='configs/mocov2_r18_digits.py', epochs={epochs})\n"
                    + extra)
    return expand_suite(str(path), results_root=str(tmp_path / 'r'),
                        work_root=str(tmp_path / 'w'))


def test_the_suite_plans_each_method_at_the_budget_and_a_rerun_plans_the_same(tmp_path,
                                                                              fake_costs):
    per_image, calls = fake_costs
    suite = _suite(tmp_path, 17)
    budget_flops = per_image['MoCo'] * 1400 * 17
    want = min(range(1, 100), key=lambda e: abs(e * per_image['MixCoMoCo'] * 1400
                                                - budget_flops))
    assert want == 13  # 17 / 1.3 = 13.08
    base, matched = ([r for r in suite.runs if r.budget and r.config == c] for c in DIGITS)
    assert len(suite.runs) == 4 and len(base) == len(matched) == 1  # both at 30, both matched
    assert (base[0].max_epochs, base[0].budget['achieved']) == (17, pytest.approx(budget_flops))
    assert matched[0].max_epochs == want and matched[0].variant == {'train_cfg.max_epochs': 13}
    assert matched[0].budget['achieved'] == pytest.approx(per_image['MixCoMoCo'] * 1400 * 13)
    # at the baseline config's own 30 epochs its equal-epoch run is its budget's: run once
    same = _suite(tmp_path, 30)
    assert len(same.runs) == 3 and same.runs[0].budget['epochs'] == 30
    lines = '\n'.join(plan_lines(suite, plan_suite(suite, [])))
    assert ('equal compute: 13 epochs x 12.7 GFLOP = 166 GFLOP, 0.994 x the budget 167 GFLOP '
            '(mocov2_r18_digits at 17 epochs); lr CosineAnnealingLR epochs 0-13') in lines
    save_costs(suite.results_dir, suite.costs)  # as the suite's first run keeps them
    per_image['MixCoMoCo'] = 2 * per_image['MoCo']  # the count would differ now ...
    again = _suite(tmp_path, 17)
    assert [(r.name, r.max_epochs) for r in again.runs] == \
        [(r.name, r.max_epochs) for r in suite.runs]  # ... the kept one plans the same
    assert calls == ['MoCo', 'MixCoMoCo'] * 2  # counted per expansion until kept, then never
    kept = json.loads((tmp_path / 'r' / 'suites' / 'matched' / budget.COSTS_FILE).read_text())
    assert sorted(c['flops_per_image'] for c in kept.values()) == [7.0e6, 9.1e6]


def test_an_odd_budget_and_a_variant_grid(tmp_path, fake_costs):
    """7 epochs of the baseline: MixCo gets round(7 / 1.3) = 5; each variant its own run."""
    suite = _suite(tmp_path, 7, "cfg_options = {'model.backbone.width': 0.25}\n")
    matched = [r for r in suite.runs if r.budget and r.config == DIGITS[1]]
    assert [r.max_epochs for r in matched] == [5]
    assert matched[0].option_args[:2] == ['model.backbone.width=0.25', 'train_cfg.max_epochs=5']


def test_the_page_compares_each_method_with_the_baseline_at_equal_compute(tmp_path,
                                                                          fake_costs):
    """The budget's runs as one experiment: MixCo at its 13 epochs against MoCo-v2 at the
    budget's 17, paired seed by seed, with a family, Holm and a verdict cell; the runs at the
    configs' own 30 epochs stay out of it."""
    from benchmark.reports.leaderboard import build_rows
    from benchmark.suites.report import equal_compute_lines, equal_compute_records
    from tests.suites.planned_records import planned_records
    path = tmp_path / 'matched.py'
    path.write_text(f'configs = {DIGITS!r}\nseeds = [0, 1, 2, 3, 4]\nevaluations = '
                    "[dict(protocols=['knn'])]\n"
                    "budget = dict(baseline='configs/mocov2_r18_digits.py', epochs=17)\n")
    suite = expand_suite(str(path), results_root=str(tmp_path / 'r'),
                         work_root=str(tmp_path / 'w'))
    plans = plan_suite(suite, [])
    records = planned_records(suite, plans)
    chosen = equal_compute_records(plans, records)
    assert sorted({(r['method'], r['variant']) for r in chosen}) == [
        ('mixco', 'train_cfg.max_epochs=13'), ('mocov2', 'train_cfg.max_epochs=17')]
    assert {r['pretrain_epochs'] for r in chosen} == {17} and len(chosen) == 10
    rows = {r['method']: r for r in build_rows(chosen, (), suite.policy)}
    compare = rows['mixco']['compare']
    assert compare['baseline'] == 'mocov2' and compare['paired']['n'] == 5
    assert compare['family'] == 'primary' and compare.get('p_holm') is not None
    page = '\n'.join(equal_compute_lines(plans, records, suite.policy))
    assert '## At equal training compute' in page and 'mocov2_r18_digits at 17 epochs' in page
    assert '(MoCo-v2 17, MixCo (MoCo-v2) 13; ' in page and '| undecided (primary, 1) |' in page


def test_the_suite_keeps_its_counts_when_it_runs_and_not_in_a_dry_run(tmp_path, stubs,
                                                                        fake_costs,
                                                                        monkeypatch):
    from benchmark.suites.suite import run_suite
    monkeypatch.setenv('SBATCH_REFUSES', 'Batch job submission failed: Invalid partition name')
    path = tmp_path / 'matched.py'
    path.write_text(f'configs = {DIGITS!r}\nseeds = [0]\nslurm = dict(time=\'1:00:00\')\n'
                    "budget = dict(baseline='configs/mocov2_r18_digits.py', epochs=17)\n")
    kept = tmp_path / 'r' / 'suites' / 'matched' / budget.COSTS_FILE
    options = dict(results_root=str(tmp_path / 'r'), work_root=str(tmp_path / 'w'),
                   use_wandb=False, out=lambda *a, **k: None)
    assert run_suite(str(path), dry_run=True, **options) == 0 and not kept.exists()
    assert run_suite(str(path), launcher='slurm', partition='nope', **options) == 1
    assert sorted(c['flops_per_image'] for c in json.loads(kept.read_text()).values()) == \
        [7.0e6, 9.1e6]


def test_the_explorer_gives_the_pages_comparison_at_equal_compute_and_its_trade_off(
        rendered_budget, rendered_suite):
    """The explorer of a suite with a budget embeds the leaderboard's section (the same intro
    and verdict sentences, its rows with their tests and verdicts) and accuracy against the
    rows' total training FLOPs: each method's point at its 30 epochs and at the budget (MoCo-v2
    17, MixCo 12) on one line; the variant whose records hold no count is named, not plotted.
    A suite without a budget has no such section."""
    from tests.reports.explorer_page import page_data, read_csv
    from tests.suites.planned_records import step_count
    paths = {p.name: p for p in rendered_budget['paths']}
    data = page_data(paths['index.html'])['equal_compute']
    page = paths['leaderboard.md'].read_text().split('## At equal training compute', 1)[1]
    assert data['intro'] in page and data['verdicts']
    assert all(f'- {sentence}\n' in page for sentence in data['verdicts'])
    rows = [dict(zip(page_data(paths['index.html'])['columns'], r['csv'])) for r in data['rows']]
    assert {r['pretrain_epochs'] for r in rows} == {'17'} and len(rows) == 6  # 3 x 2 protocols
    compared = [r for r in rows if r['method'] == 'mixco']
    assert all(r['verdict'] and r['p_holm'] and r['delta_baseline'] == 'mocov2' for r in compared)
    assert {r['compute'] for r in data['rows']} >= {'3 TFLOP', 'not counted'}

    flops = {m: step_count(m, 64)['flops_per_image'] * 1400 for m in ('mocov2', 'mixco')}
    assert data['budget_flops'] == flops['mocov2'] * 17 and data['equal_epochs'] == [30]
    assert sorted(data['tasks']) == ['kNN on digits (k=55)',
                                     'linear (fast, cached features) on digits']
    for lines in data['tasks'].values():
        got = {line['label']: [(p['epochs'], p['regime'], p['flops']) for p in line['points']]
               for line in lines}
        assert got == {'MoCo-v2': [(17, 'equal compute', flops['mocov2'] * 17),
                                   (30, 'equal epochs', flops['mocov2'] * 30)],
                       'MixCo (MoCo-v2)': [(12, 'equal compute', flops['mixco'] * 12),
                                           (30, 'equal epochs', flops['mixco'] * 30)]}
    assert len(data['not_counted']) == 4 and all(
        n.startswith('MixCo (MoCo-v2) [model.mix_temperature=0.1] at ') for n in data['not_counted'])
    plain = {p.name: p for p in rendered_suite['paths']}
    assert page_data(plain['index.html'])['equal_compute'] is None
    assert '## At equal training compute' not in plain['leaderboard.md'].read_text()
    assert read_csv(plain['leaderboard.csv'])  # the page itself is there


def test_the_paper_tables_suite_at_equal_compute_plans_on_a_fake_tiny_imagenet(tmp_path,
                                                                                monkeypatch):
    """configs/suites/compute_paper_table1_r18.py as shipped, planned by --dry-run (one seed)
    on a fake Tiny-ImageNet in the official format, each config's real step counted (at a
    smaller width, input and batch: a full step takes minutes on a small CPU): each method's
    FLOPs per image its own, its epochs the nearest to MoCo-v2's FLOPs at 100, printed with
    its FLOPs; without the data the dry run stops before counting, naming
    tools/prepare_data.py."""
    import re
    from pathlib import Path
    from benchmark.data.fakes import make_fake_tiny_imagenet
    from benchmark.reports.compute import flop_text
    from benchmark.suites.suite import run_suite
    shipped = Path(__file__).parents[2] / 'configs' / 'suites' / 'compute_paper_table1_r18.py'
    path = tmp_path / shipped.name  # the same suite (its name too), at the test's sizes
    base = shipped.with_name('paper_table1_r18.py')  # the rows it inherits
    (tmp_path / base.name).write_text(base.read_text())
    path.write_text(shipped.read_text() + "cfg_options = {'model.backbone.width': 0.125, "
                    "'train_dataloader.dataset.input_size': 32, "
                    "'train_dataloader.batch_size': 4}\n")
    monkeypatch.chdir(tmp_path)  # where the configs' data/tiny-imagenet-200 is looked for
    options = dict(dry_run=True, seeds=[0], results_root=str(tmp_path / 'r'),
                   work_root=str(tmp_path / 'w'), use_wandb=False)
    with pytest.raises(SuiteError) as err:
        run_suite(str(path), out=lambda *a, **k: None, **options)
    assert 'tools/prepare_data.py tiny --root data' in str(err.value) \
        and '\n' not in str(err.value)
    make_fake_tiny_imagenet(tmp_path / 'data', num_classes=2, train_per_class=4,
                            val_per_class=1, size=64)
    counted, lines, count = {}, [], budget.count_epoch_cost

    def spy(cfg, procs):
        counted[cfg.model.type] = cost = count(cfg, procs)
        return cost
    monkeypatch.setattr(budget, 'count_epoch_cost', spy)
    assert run_suite(str(path), out=lines.append, **options) == 0
    assert {c['images_per_epoch'] for c in counted.values()} == {8}  # 2 processes x 4
    per_image = {kind: c['flops_per_image'] for kind, c in counted.items()}
    assert len(set(per_image.values())) == 4  # no two of the four methods' steps cost the same
    text, epochs = '\n'.join(lines), {}
    for stem, kind in [('mocov2', 'MoCo'), ('mixco', 'MixCoMoCo'), ('simclr', 'SimCLR'),
                       ('mixco_simclr', 'MixCoSimCLR')]:
        epoch = per_image[kind] * 8
        epochs[stem] = min(range(1, 10_000),
                           key=lambda e: abs(e * epoch - per_image['MoCo'] * 8 * 100))
        said = (rf'\] {stem}_r18_tiny-\w+-s0 +train: start.*\n +equal compute: {epochs[stem]} '
                rf'epochs x {flop_text(epoch)} = {flop_text(epoch * epochs[stem])}, .*'
                r'\(mocov2_r18_tiny at 100 epochs\)')
        assert re.search(said, text), (stem, said, text)
    assert epochs['mocov2'] == 100 and len(set(epochs.values())) == 4, epochs
