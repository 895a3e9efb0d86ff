"""Fixtures shared by the suite tests."""
import os
import shlex
from pathlib import Path

import pytest

from benchmark.suites.spec import expand_suite

SAME_DIFFERENCES = (
    "configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py',\n"
    "           dict(config='configs/mixco_r18_digits.py', grid={'model.mix_temperature': [0.1]})]\n"
    "seeds = list(range(7))\n")


@pytest.fixture
def suite_from_text(tmp_path):
    """expand_suite of a suite file written with the given text (its name is the suite's),
    with results and work dirs under tmp_path."""
    def expand(text: str, name: str):
        path = tmp_path / name
        path.write_text(text)
        return expand_suite(str(path), results_root=str(tmp_path / 'results'),
                            work_root=str(tmp_path / 'work'))
    return expand


STUB = '#!/usr/bin/env bash\nprintf "%s\\n" "$(basename "$0") $*" >> "$STUB_LOG"\n'


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    """sbatch answers 'Submitted batch job 4241', 4242, ... and keeps a copy of each script
    (or refuses with $SBATCH_REFUSES);
    squeue lists a job while $SQUEUE_STATE is set (fails saying $SQUEUE_FAILS if set); srun (which submitit looks for) only
    records. Every call lands in $STUB_LOG."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sbatch').write_text(
        STUB + 'if [ -n "${SBATCH_REFUSES:-}" ]; then echo "sbatch: error: $SBATCH_REFUSES" >&2; '
        'exit 1; fi\n'
        'n=$(grep -c ^sbatch "$STUB_LOG")\ncp "$1" "$STUB_LOG.script$n"\n'
        'echo "Submitted batch job $((4240 + n))"\n')
    (bin_dir / 'squeue').write_text(
        STUB + 'if [ -n "${SQUEUE_FAILS:-}" ]; then echo "$SQUEUE_FAILS" >&2; exit 1; fi\n'
        '[ -n "${SQUEUE_STATE:-}" ] && echo "$SQUEUE_STATE"\nexit 0\n')
    (bin_dir / 'srun').write_text(STUB)
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    log = tmp_path / 'calls.log'
    monkeypatch.setenv('PATH', f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv('STUB_LOG', str(log))
    monkeypatch.setenv('WANDB_MODE', 'disabled')
    for name in ('SQUEUE_STATE', 'SQUEUE_FAILS'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv('SBATCH_REFUSES', raising=False)
    return log


def calls(log: Path, tool: str):
    return [shlex.split(line)[1:] for line in log.read_text().splitlines()
            if line.split()[0] == tool] if log.exists() else []


@pytest.fixture(scope='session')
def rendered_suite(tmp_path_factory):
    """A suite rendered from generated records (its runs are never trained): MoCo-v2, MixCo one
    test image better on each of 7 seeds (+0.28 points on 360 images) and a MixCo variant
    whose seed 6 diverged. {'suite', 'paths' (render_suite's), 'records', 'step'}."""
    import benchmark.components  # noqa: F401  the configs' registry
    from benchmark.names import DEFAULT_PROTOCOLS
    from benchmark.reports import records as provenance
    from benchmark.reports.records import build_record, write_record
    from benchmark.suites.plan import plan_suite
    from benchmark.suites.report import render_suite
    root = tmp_path_factory.mktemp('rendered_suite')
    (root / 'same.py').write_text(SAME_DIFFERENCES)
    suite = expand_suite(str(root / 'same.py'), results_root=str(root / 'results'),
                         work_root=str(root / 'work'))
    step = 100 / 360
    with pytest.MonkeyPatch.context() as mp:
        for name in ('git_state', 'host_info', 'package_versions'):  # looked up once, not per record
            value = getattr(provenance, name)()
            mp.setattr(provenance, name, lambda value=value: dict(value))
        written = []
        for run in suite.runs:
            base = round((90.0 + run.seed % 3) / step) * step
            mine = base + step * (run.info['method'] == 'mixco') - step * bool(run.overrides)
            diverged = bool(run.overrides) and run.seed == 6
            metrics = lambda p: ({'top1': 'NA(nan)'} if diverged else
                                 {'davies_bouldin': 3.0 - mine / 50} if p.startswith('cluster')
                                 else {'top1': mine})
            record = build_record(
                method=run.info['method'], backbone='resnet18', pretrain_data='digits',
                pretrain_epochs=30, eval_data='digits', seed=run.seed, world_size=1, total_batch=32,
                time_s_per_epoch=3.0 + 0.5 * (run.info['method'] == 'mixco') + 0.01 * run.seed,
                peak_memory_gb=1.0 + 0.2 * (run.info['method'] == 'mixco'),
                status='diverged' if diverged else 'ok',
                protocols={p: {'settings': {'k': 55} if p == 'knn' else {}, 'metrics': metrics(p)}
                           for p in DEFAULT_PROTOCOLS})
            record = dict(record, config_sha256=run.config_sha256,
                          setting_sha256=run.setting_sha256, overrides=run.overrides)
            write_record(record, suite.results_dir)
            written.append(record)
    paths = render_suite(suite, plan_suite(suite, []), [], paper=None, use_wandb=False)
    return dict(suite=suite, paths=paths, records=written, step=step)


@pytest.fixture(scope='session')
def rendered_ablation(tmp_path_factory):
    """configs/suites/mixco_ablation_digits.py rendered as the suite renders it, from records of
    its own plan with generated numbers (tests/suites/planned_records.py; nothing is trained).
    {'suite', 'paths' (render_suite's), 'records'}."""
    import benchmark.components  # noqa: F401  the configs' registry
    from benchmark.layout import REPO_ROOT
    from benchmark.reports import records as provenance
    from benchmark.suites.plan import plan_suite
    from benchmark.suites.report import render_suite
    from tests.suites.planned_records import planned_records
    root = tmp_path_factory.mktemp('rendered_ablation')
    suite = expand_suite(str(REPO_ROOT / 'configs' / 'suites' / 'mixco_ablation_digits.py'),
                         results_root=str(root / 'results'), work_root=str(root / 'work'))
    with pytest.MonkeyPatch.context() as mp:
        for name in ('git_state', 'host_info', 'package_versions'):  # looked up once
            value = getattr(provenance, name)()
            mp.setattr(provenance, name, lambda value=value: dict(value))
        plans = plan_suite(suite, [])
        written = planned_records(suite, plans)
    paths = render_suite(suite, plans, [], paper=None, use_wandb=False)
    return dict(suite=suite, paths=paths, records=written)


BUDGET_SUITE = ("configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py',\n"
                "           dict(config='configs/mixco_r18_digits.py',\n"
                "                grid={'model.mix_temperature': [0.1]})]\n"
                "seeds = [0, 1, 2, 3, 4]\nevaluations = [dict(protocols=['knn', 'linear_fast'])]\n"
                "budget = dict(baseline='configs/mocov2_r18_digits.py', epochs=17)\n")


@pytest.fixture(scope='session')
def rendered_budget(tmp_path_factory):
    """A suite with a budget (MoCo-v2 at 17 epochs) rendered from records of its own plan
    (tests/suites/planned_records.py; nothing is trained): MoCo-v2 and MixCo at their 30 epochs
    and at the budget (MixCo's step counts 5.5 / 4 of MoCo-v2's FLOPs, so 12 epochs), their
    records holding their training FLOPs at 1400 images an epoch; a MixCo variant's records
    hold no count. {'suite', 'plans', 'paths' (render_suite's), 'records'}."""
    import benchmark.components  # noqa: F401  the configs' registry
    from benchmark.reports import records as provenance
    from benchmark.suites import budget
    from benchmark.suites.plan import plan_suite
    from benchmark.suites.report import render_suite
    from tests.suites.planned_records import planned_records, step_count
    root = tmp_path_factory.mktemp('rendered_budget')
    (root / 'budget.py').write_text(BUDGET_SUITE)
    per_image = {'MoCo': step_count('mocov2', 64)['flops_per_image'],
                 'MixCoMoCo': step_count('mixco', 64)['flops_per_image']}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(budget, 'count_epoch_cost', lambda cfg, procs: dict(
            flops_per_image=per_image[cfg.model.type], images_per_epoch=1400 * procs))
        for name in ('git_state', 'host_info', 'package_versions'):  # looked up once
            value = getattr(provenance, name)()
            mp.setattr(provenance, name, lambda value=value: dict(value))
        suite = expand_suite(str(root / 'budget.py'), results_root=str(root / 'results'),
                             work_root=str(root / 'work'))
        plans = plan_suite(suite, [])
        written = planned_records(suite, plans, train_images=lambda run: None if 'mix_temperature'
                                  in str(run.variant_label) else 1400)
    paths = render_suite(suite, plans, [], paper=None, use_wandb=False)
    return dict(suite=suite, plans=plans, paths=paths, records=written)
