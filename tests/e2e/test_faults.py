"""Real faults against real training processes: a SIGKILL and --resume through
tools/dist_train.sh (two gloo processes, via tools/kill_resume.py on the fast config, whose
speed switches no shared run has: the tool trains its own reference and requires identity), a
SIGKILL to the launcher of two resumed at once (ending bit-identical to the shared
uninterrupted run of tests/e2e/conftest.py); a dead or hung process of two ends the job.

SIGTERM to a job's process group, resumed at once, runs in tests/e2e/test_cluster_signals.py.
The other variants (one process SIGKILLed mid-epoch, signals, a kill at any moment of a
checkpoint write or during the evaluation, the RNG-state control, NaN, every method, device
views) run in-process in tests/harness/faults/test_resume_in_process.py and
tests/methods/test_method_resume.py."""
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.harness.faults import campaign as fc
from benchmark.harness.faults import stops as st
from tests.conftest import ROOT
from tests.e2e.conftest import EPOCHS, STEPS, TINY


def test_two_processes_sigkill_then_resume_is_bit_identical(tmp_path, subprocess_env):
    """tools/kill_resume.py on the fast config (views on the device, bfloat16, channels_last)
    with two gloo processes through tools/dist_train.sh: rank 0 SIGKILLed after iteration 5,
    resumed from iter_4.pth, equal to the uninterrupted run bit for bit (before
    ChannelsLastDistributedDataParallel, most tensors differed here); the uninterrupted run
    trains at the same time (--concurrent, as the GPU check runs it)."""
    out = tmp_path / 'result.json'
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools' / 'kill_resume.py'), 'configs/mixco_r18_tiny_fast.py',
         '--nproc', '2', '--kill-at', '5', '--iter-interval', '2', '--fake-images', '32',
         '--work-dir', str(tmp_path / 'w'), '--out', str(out), '--concurrent',
         '--cfg-options',
         'train_dataloader.dataset.input_size=32', 'train_dataloader.batch_size=4',
         'train_dataloader.num_workers=1', 'model.queue_size=16', 'model.backbone.width=0.25'],
        cwd=ROOT, env=subprocess_env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result['passed'] and result['failures'] == [] and result['backend'] == 'gloo'
    assert result['nproc'] == 2 and result['killed_rc'] != 0
    assert result['resumed_rc'] == 0 == result['reference_rc']
    assert result['resumed_from_iter'] == 4 == result['newest_checkpoint_iter']
    assert result['final_iter'] == 8 == result['reference_iter']  # 32 images / (2 x 4) x 2
    assert 'noise_floor' not in result  # identity is required on CPU: no second reference
    assert result['comparison']['identical'] and result['corrupt_checkpoints'] == []
    assert result['comparison']['tensors'] > 200
    assert 'kill-resume: passed' in proc.stdout
    assert not list((tmp_path / 'w').glob('**/*.pth'))  # compared, then removed
    killed_log = (tmp_path / 'w' / 'killed.log').read_text()
    assert 'Distributed training: True' in killed_log


@pytest.mark.slow
@pytest.mark.parametrize('stop, reference', [
    (st.Stop('SIGKILL', 'launcher', 2), 'reference_2p')], indirect=['reference'],
    ids=['sigkill-to-the-launcher-of-two'])
def test_a_stop_then_a_resume_at_once_trains_on_bit_identical(stop, reference, tiny_data,
                                                              tmp_path):
    """The fault campaign's stop scenario that once failed: SIGKILL to tools/dist_train.sh of two
    processes (torchrun and the trainers trained on, unseen, holding the work dir). The resume
    starts the moment the job's exit status is known; it ends with the uninterrupted run's
    weights bit for bit, one record, and no process of either job left."""
    outcome = st.run_stop(stop, str(tmp_path), tiny_data, reference.checkpoint,
                          random.Random(3), epochs=EPOCHS, per_epoch=STEPS[1], **TINY)
    assert outcome.ok, outcome.line()
    stopped = Path(tmp_path, f'stop-{stop.name}.out').read_text()
    # the trainers took their launcher's death as a pre-emption
    logs = sorted(Path(tmp_path, f'stop-{stop.name}').glob('*/*.log'))
    assert 'SIGTERM: saved' in logs[0].read_text(), (stopped[-2000:], outcome.line())


def test_dead_or_hung_process_ends_the_job_in_time_without_orphans(fake_tiny, tmp_path,
                                                                    monkeypatch):
    """The job ends in time and, last, with a line naming the process that ended without one
    (the dead rank 1's SIGKILL; the hung one's peer timing out, then rank 1 killed) and the
    run's log, torchrun's report there and not on the terminal. torchrun gives the stopped
    process 1 s, not its default 30, between SIGTERM and SIGKILL."""
    monkeypatch.setenv('TORCH_ELASTIC_SHUTDOWN_TIMEOUT', '1')
    card = fc.Scorecard()
    fc.section_dead_rank(card, str(tmp_path), fake_tiny, timeout_s=10)
    assert card.faults_survived == 2, card.failures
    for kind, words in [('dead', 'training process rank 1 (pid '),
                        ('hung', 'training process rank 0 (pid ')]:
        out, log = (tmp_path / f'rank-{kind}.out').read_text(), tmp_path / f'rank-{kind}'
        last = out.splitlines()[-1]
        assert last.startswith(f'error: {words}') and 'without an error line' in last, last
        assert 'rank 1' in last and 'Signal 9 (SIGKILL)' in last, last
        assert last.endswith(f"torchrun's report: {log}/torchrun.log"), last
        assert 'Root Cause' not in out and 'Root Cause' in (log / 'torchrun.log').read_text()


def test_concurrent_record_writers_lose_nothing(tmp_path):
    card = fc.Scorecard()
    fc.section_records(card, str(tmp_path), writers=4, each=3)
    assert card.rows_lost == 0
