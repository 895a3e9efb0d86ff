"""tools/benchmark_speed.py end to end at the tiniest sizes: every part, the --paper grid with
bf16 + channels_last bare steps (in-process, through the tool's main, each method's encoder a
one-convolution stand-in for the ResNet: these check the tool's plumbing and its outputs, not
the ResNet's speed), a run ended midway leaving the parts it measured, and Ctrl-C to a real
process."""
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from benchmark.harness.speed.bench import HEADLINE, NAMED_ONLY, PARTS
from benchmark.harness.speed.step import FAMILY
from tests.conftest import ROOT, tiny_backbone
from tests.tools.test_benchmark_speed_tool import TINY, torch_threads  # noqa: F401 (autouse)
from tools import benchmark_speed

def test_tiny_run_writes_json_and_table(tmp_path, run_main, tiny_backbones):
    """Every part runs at the tiniest sizes; the numbers are sane (no assertion on speed)."""
    out, table = tmp_path / 'speed.json', tmp_path / 'speed.md'
    code, stdout, err, _ = run_main(benchmark_speed, *TINY, '--out', out, '--table', table)
    assert code == 0, err[-3000:]
    result = json.loads(out.read_text())
    conditional = {k for k in HEADLINE if k.startswith('paper_')} | {'compile_speedup'}
    assert set(HEADLINE) - conditional <= set(result)
    assert set(PARTS) - {'step', *NAMED_ONLY} | {'steps', 'device', 'memory_kind'} <= set(result)
    assert not set(NAMED_ONLY) & set(result)  # the demo part runs only when --only names it
    for key in HEADLINE:
        if key in result and key not in ('faiss_same_predictions',):
            assert math.isfinite(result[key]), key
            assert result[key] > 0 or key.startswith('loop_fixed_ms'), key  # a difference
    assert result['faiss_same_predictions'] is True
    steps = result['steps']
    for method in FAMILY:
        assert steps[method]['images_per_s'] > 0 and steps[method]['flops_per_image'] > 0
        assert steps[method]['peak_bytes'] > steps[method]['own_bytes'] > 0
    # Same weights, optimizer state and inputs; MixCo's 1.5 B forward can only add activations.
    assert steps['mixco']['own_bytes'] == steps['mocov2']['own_bytes']
    assert steps['mocov2']['own_bytes'] > steps['simclr']['own_bytes']  # key encoder + queue
    (config,) = result['pipeline'].values()
    assert list(result['pipeline']) == ['pil-fp32'] and set(config['methods']) == {'mocov2', 'mixco'}
    assert all(0 <= p['median_data_wait_fraction'] < 1 for p in config['methods'].values())
    assert result['features']['images'] == 8 and result['views']['batch'] == 4
    text = table.read_text()
    assert '| MixCo (MoCo-v2) | MoCo-v2 |' in text and '| pil-fp32 | MoCo-v2 |' in text
    assert '| Un-Mix (MoCo-v2) | MoCo-v2 |' in text and 'Paper setting' not in text
    assert stdout.strip().splitlines()[-1].startswith('knn_over_matmul: ')


@pytest.fixture
def tiny_resnets(monkeypatch):
    """tiny_backbone as a torchvision ResNet, the type CompileHook looks for to compile."""
    import methods.base
    from torchvision.models import ResNet

    class TinyResNet(ResNet):
        def __init__(self) -> None:
            torch.nn.Module.__init__(self)  # none of ResNet's layers: tiny_backbone's
            self.body, self.feature_dim = tiny_backbone(), 8

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x)
    monkeypatch.setattr(methods.base, 'build_resnet', lambda **_: TinyResNet())


@pytest.fixture
def eager_compile(monkeypatch):
    """The -compile configuration traces with dynamo but skips inductor's code generation
    (minutes on a CPU, and not what this test checks); dynamo's caches are reset afterwards."""
    from benchmark.harness.speed import pipeline
    build = pipeline.pipeline_cfg

    def eager(*args, **kwargs):
        cfg = build(*args, **kwargs)
        for hook in cfg.custom_hooks:
            if hook['type'] == 'CompileHook':
                hook['backend'] = 'eager'
        return cfg
    monkeypatch.setattr(pipeline, 'pipeline_cfg', eager)
    yield
    torch._dynamo.reset()


def test_tiny_paper_run_measures_the_grid(tmp_path, eager_compile, run_main, tiny_resnets):
    """The --paper grid, its bare steps in bf16 + channels_last (the switches' own steps)."""
    code, out, err, _ = run_main(
        benchmark_speed, '--paper', '--images', '32', '--input-size', '16', '--batch', '4',
        '--pipeline-iters', '2', '--pipeline-warmup', '1', '--num-workers', '0',
        '--repeats', '2', '--warmup', '1', '--skip', 'features', 'knn', 'views', 'loop',
        '--precision', 'bf16', '--channels-last',
        '--data-dir', tmp_path / 'data', '--out-dir', tmp_path)
    assert code == 0, err[-3000:]
    (path,) = tmp_path.glob('*.json')
    result = json.loads(path.read_text())
    assert list(result['pipeline']) == ['pil-fp32', 'pil-bf16-cl', 'gpu-fp32', 'gpu-bf16-cl',
                                        'gpu-bf16-cl-compile']
    assert list(result['compile_speedup']) == ['gpu-bf16-cl']  # measured, whichever way it goes
    settings = result['settings']
    assert (settings['depth'], settings['input_size'], settings['batch']) == (18, 16, 4)
    assert (settings['precision'], settings['channels_last']) == ('bf16', True)
    assert all(result['steps'][m]['images_per_s'] > 0 for m in ('mocov2', 'mixco'))
    assert 'Bare steps (bf16, channels_last)' in out and '| pil-bf16-cl |' in out
    for config in result['pipeline'].values():
        for p in config['methods'].values():
            assert p['iterations'] == 2 and p['images_per_s'] and p['flops_per_image'] > 0  # timed
            ms = p['breakdown']['ms']
            assert set(ms) == {'wall', 'wait', 'prepare', 'views', 'step', 'hooks', 'rest'}
            assert ms['prepare'] == 0  # no views drawn ahead on a CPU ('auto')
            parts = sum(v for k, v in ms.items() if k not in ('wall', 'prepare'))  # in 'wait'
            assert ms['step'] > 0 and parts >= ms['wall'] * (1 - 1e-9)
            assert p['breakdown']['counted_iteration']['host_reads'] == 0  # a CPU proxy of syncs
        assert config['time_ratio'] > 0 and config['memory_ratio'] > 0
    fastest = max(result['pipeline'].values(),
                  key=lambda c: c['methods']['mixco']['median_images_per_s'])
    assert result['paper_setting_images_per_s'] == fastest['methods']['mixco'][
        'median_images_per_s']
    assert 0 <= result['paper_setting_data_wait'] < 1 and result['mixco_moco_time_ratio'] > 0
    assert result['device'] and (tmp_path / 'data').is_dir()
    assert 'Paper setting, fastest configuration' in out
    assert 'gpu-bf16-cl-compile: MixCo ' in err  # each configuration logged as it ends
    assert 'paper_setting_images_per_s: ' in out


class Killed(BaseException):
    """What a SIGKILL is to the files: the tool ends there, nothing after it runs."""


def test_a_run_stopped_midway_leaves_the_parts_it_measured(tmp_path, run_main, monkeypatch):
    """Ended at the start of the second pipeline configuration (the first one is saved before):
    the JSON and table on disk hold it, marked partial (what a GPU job cut short by its time
    limit, as in tools/gpu_proof.sh, keeps). In-process: the ending is an exception that no
    part of the tool catches; the real process stopped by a signal is the Ctrl-C test below."""
    from benchmark.harness.speed import bench
    measure, configs = bench.bench_pipeline, []

    def until_the_second(c, *args, **kwargs):
        configs.append(c)
        if len(configs) == 2:
            raise Killed
        return measure(c, *args, **kwargs)
    monkeypatch.setattr(bench, 'bench_pipeline', until_the_second)
    with pytest.raises(Killed):
        run_main(benchmark_speed, '--paper', '--images', '32', '--input-size', '16', '--batch',
                 '4', '--pipeline-iters', '2', '--pipeline-warmup', '1', '--num-workers', '0',
                 '--configs', 'pil-fp32', 'gpu-fp32', '--skip', 'step', '--out-dir', tmp_path)
    (path,) = tmp_path.glob('*.json')
    result = json.loads(path.read_text())
    assert result['partial']['done'] == 'pipeline pil-fp32'
    assert list(result['pipeline']) == ['pil-fp32'] and 'features' not in result
    text = path.with_suffix('.md').read_text()
    assert 'Partial: written after pipeline pil-fp32' in text and '| pil-fp32 | MoCo-v2 |' in text


def test_ctrl_c_stops_the_tool_with_its_workers_and_leaves_no_partial_file(tmp_path,
                                                                             subprocess_env):
    """SIGINT to the tool's process group (what Ctrl-C sends) while a pipeline Runner reads
    through two loader workers: exit 130 with the one stop line, no process of the group left,
    nothing in the output folder (no part had finished) and the temporary data folder gone."""
    out, tmp = tmp_path / 'out', tmp_path / 'tmp'
    out.mkdir()
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, 'tools/benchmark_speed.py', '--only', 'pipeline', '--images', '64',
         '--input-size', '16', '--batch', '4', '--pipeline-rounds', '50', '--pipeline-iters', '4',
         '--pipeline-warmup', '1', '--num-workers', '2', '--out-dir', str(out)],
        cwd=ROOT, env=dict(subprocess_env, TMPDIR=str(tmp)), stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline and len(_group(proc.pid)) < 3:
            time.sleep(0.1)  # the tool and its two loader workers
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=30)  # a hang guard, not a speed claim
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130, err[-3000:]
    assert err.splitlines()[-1] == 'SIGINT: stopped; finished nothing; not finished: pipeline'
    for _ in range(20):  # reparented zombies are reaped by init within moments
        if not _group(proc.pid):
            break
        time.sleep(0.1)
    assert _group(proc.pid) == []
    assert list(out.iterdir()) == [] and list(tmp.iterdir()) == []


def _group(pgid: int) -> list:
    """The live processes of a process group."""
    found = subprocess.run(['pgrep', '-g', str(pgid)], capture_output=True, text=True).stdout
    return found.split()
