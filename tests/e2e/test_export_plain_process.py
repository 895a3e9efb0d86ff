"""End to end, as a downstream user: the digits suite's trained MoCo-v2 run (`digits_suite`) and
the random encoder are exported with tools/export.py, and a plain process (tests/e2e/plain_knn.py,
`python -I`, torch, torchvision and scikit-learn only; this suite's packages cannot be imported
there) rebuilds each encoder and its input transform from the sidecar alone and computes the
run's own kNN protocol from its record: the top-1 is the recorded one, exactly."""
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmark.engine.config_file import read_config
from benchmark.evaluation.evaluate import evaluate_checkpoint
from tests.conftest import ROOT
from tools import export as export_tool

PLAIN = Path(__file__).with_name('plain_knn.py')


def test_plain_process_reproduces_the_recorded_knn(digits_suite, tmp_path, run_main):
    records = digits_suite.folder / 'results/suites/tiny/runs'
    moco = next(path for path in sorted(records.glob('*.json'))
                if json.loads(path.read_text())['method'] == 'mocov2')
    work_dir = next(run.work_dir for run in digits_suite.runs if 'mocov2' in run.name)
    code, out, err, _ = run_main(export_tool, work_dir, '--format', 'torchvision', '--out',
                                 tmp_path / 'moco.pth')  # not into the suite's work dir
    assert code == 0, err[-2000:]
    sidecar = json.loads((tmp_path / 'moco.pth.json').read_text())
    trained_at = read_config(str(ROOT / 'configs/mocov2_r18_digits.py')).train_dataloader
    assert sidecar['input_size'] == trained_at.dataset.input_size  # the run's, not a default
    config = 'configs/mixco_r18_digits.py'
    code, out, err, _ = run_main(export_tool, 'random', '--format', 'torchvision', '--out',
                                 tmp_path / 'random.pth', '--config', config)
    assert code == 0, err[-2000:]
    # The random encoder's record: what tools/eval.py CONFIG random evaluates for kNN.
    random = evaluate_checkpoint(read_config(str(ROOT / config)), 'random', ['knn'],
                                 num_workers=0, device='cpu')
    (tmp_path / 'random.json').write_text(json.dumps(dict(protocols=random['protocols'])))

    plain = subprocess.run(
        [sys.executable, '-I', str(PLAIN), str(tmp_path / 'moco.pth'), str(moco),
         str(tmp_path / 'random.pth'), str(tmp_path / 'random.json')],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, OMP_NUM_THREADS='1'))  # -I: PYTHONPATH and the like are ignored
    assert plain.returncode == 0, plain.stderr[-3000:]
    results = [json.loads(line) for line in plain.stdout.splitlines()]
    assert len(results) == 2
    for result in results:
        assert isinstance(result['recorded'], float) and result['top1'] == result['recorded'], result
