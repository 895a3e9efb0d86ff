"""Real faults against real runs (the fault campaign cases): kills, signals, NaN, dead ranks."""
import os
import random
import re

import pytest
import torch

from benchmark.harness.faults import campaign as fc


@pytest.fixture(scope='module')
def campaign(tmp_path_factory, fake_tiny):
    """A folder with the uninterrupted 2-epoch MixCo reference run."""
    tmp = str(tmp_path_factory.mktemp('campaign'))
    ref = os.path.join(tmp, 'mixco-reference')
    proc = fc.train(fc.write_config(f'{ref}.py', 'mixco', fake_tiny), ref)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp, fc.final_checkpoint(ref, 2)


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical(campaign, fake_tiny):
    tmp, reference = campaign
    card = fc.Scorecard()
    fc.score_kill_resume(card, tmp, fake_tiny, 'mixco', reference, 'at_iter=5', 2)
    assert card.faults_survived == 1 and card.checkpoints_corrupt == 0, card.failures


@pytest.mark.slow
def test_resume_without_rng_states_would_differ(campaign, fake_tiny, tmp_path):
    """The control: the same resume from a checkpoint stripped of its RNG states diverges."""
    tmp, reference = campaign
    cfg = fc.write_config(str(tmp_path / 'kill.py'), 'mixco', fake_tiny,
                          fault="dict(type='KillHook', at_iter=4)")
    work = str(tmp_path / 'run')
    assert fc.train(cfg, work).returncode != 0
    path = os.path.join(work, 'iter_3.pth')
    checkpoint = torch.load(path, weights_only=False)
    del checkpoint['rng_states']
    torch.save(checkpoint, path)
    plain = fc.write_config(str(tmp_path / 'plain.py'), 'mixco', fake_tiny)
    assert fc.train(plain, work, resume=True).returncode == 0
    assert fc.differing(fc.load_weights(reference),
                        fc.load_weights(fc.final_checkpoint(work, 2)))


@pytest.mark.slow
def test_kills_during_checkpoint_writes_leave_no_corrupt_checkpoint(fake_tiny, tmp_path):
    card = fc.Scorecard()
    fc.section_save_kills(card, str(tmp_path), fake_tiny, random.Random(0), kills=2)
    assert card.checkpoints_corrupt == 0 and not card.failures, card.failures
    assert card.faults_injected == 4 == card.faults_survived


@pytest.mark.slow
def test_sigterm_and_sigusr1_checkpoint_exit_143_and_resume_identically(campaign, fake_tiny):
    tmp, _ = campaign
    card = fc.Scorecard()
    fc.section_preemption(card, tmp, fake_tiny)
    assert card.faults_survived == 2, card.failures


@pytest.mark.slow
def test_nan_stops_the_run_saves_nothing_non_finite_and_records_divergence(campaign, fake_tiny):
    tmp, _ = campaign
    card = fc.Scorecard()
    fc.section_nan(card, tmp, fake_tiny)
    assert card.faults_survived == 1, card.failures


@pytest.mark.slow
def test_dead_or_hung_process_ends_the_job_in_time_without_orphans(fake_tiny, tmp_path):
    card = fc.Scorecard()
    fc.section_dead_rank(card, str(tmp_path), fake_tiny, timeout_s=15)
    assert card.faults_survived == 2, card.failures


def test_concurrent_record_writers_lose_nothing(tmp_path):
    card = fc.Scorecard()
    fc.section_records(card, str(tmp_path), writers=4, each=3)
    assert card.rows_lost == 0


@pytest.mark.slow
@pytest.mark.parametrize('at', [8, 5])  # the epoch's last step (8 of 8), and mid-epoch
def test_signal_on_any_step_exits_143_and_resumes_identically(campaign, fake_tiny, tmp_path, at):
    """Pre-empted on the last step of an epoch, the epoch's own end (scheduler, epoch
    checkpoint) still happens before the exit, and the resumed run does not repeat the epoch."""
    _, reference = campaign
    work = str(tmp_path / 'run')
    cfg = fc.write_config(str(tmp_path / 'sig.py'), 'mixco', fake_tiny,
                          fault=f"dict(type='KillHook', signal_at_iter={at})")
    first = fc.train(cfg, work)
    assert first.returncode == 143, first.stderr[-2000:]
    plain = fc.write_config(str(tmp_path / 'plain.py'), 'mixco', fake_tiny)
    resumed = fc.train(plain, work, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert not fc.differing(fc.load_weights(reference),
                            fc.load_weights(fc.final_checkpoint(work, 2)))
    logs = sorted((tmp_path / 'run').glob('*/*.log'))
    steps = re.findall(r'Epoch\(train\)\s+\[\s*\d+\]\[\s*\d+/8\]', logs[-1].read_text())
    assert len(steps) == 16 - at  # the resumed run trains only what was left (log every step)
