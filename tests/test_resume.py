"""Crash-safe resume: RNG states, resumable sampler, atomic writes, fallback, kills, signals, NaN."""
import io
import os
import random
import re

import numpy as np
import pytest
import torch
from mmengine.dataset import DefaultSampler

from benchmark import fault_campaign as fc
from benchmark.atomic_io import atomic_write, atomic_write_text
from benchmark.checkpoint_hook import non_finite_tensors
from benchmark.nan_guard import non_finite_terms
from benchmark.resume import choose_resume_checkpoint
from benchmark.rng_state import capture_rng_state, restore_rng_state, sample_seed, seeded_rng
from benchmark.sampler import ResumableSampler, SampleKey
from benchmark.tracking import wandb_run_id


def _draws():
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_rng_state_roundtrip_through_a_weights_only_load():
    state = capture_rng_state()
    expected = _draws()
    buffer = io.BytesIO()
    torch.save({'rng_states': [state]}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)['rng_states'][0]
    _draws()
    restore_rng_state(loaded)
    assert _draws() == expected


def test_seeded_rng_is_deterministic_and_restores_the_outer_state():
    torch.manual_seed(1)
    outer = capture_rng_state()
    with seeded_rng(123):
        first = _draws()
    after = _draws()
    restore_rng_state(outer)
    with seeded_rng(123):
        assert _draws() == first
    assert _draws() == after  # the block did not consume the outer generators


def test_sample_seed_depends_on_seed_epoch_and_index():
    seeds = {sample_seed(s, e, i) for s in (0, 1) for e in (0, 1) for i in (0, 1)}
    assert len(seeds) == 8
    assert sample_seed(0, 3, 7) == sample_seed(0, 3, 7)
    assert all(0 <= s < 2**63 for s in seeds)


def test_resumable_sampler_keeps_default_order_and_resumes_mid_epoch():
    data = list(range(20))
    default, ours = DefaultSampler(data, seed=5), ResumableSampler(data, seed=5)
    for epoch in (0, 1):
        default.set_epoch(epoch)
        ours.set_epoch(epoch)
        keys = list(ours)
        assert [k.index for k in keys] == list(default)
        assert all(isinstance(k, SampleKey) and k.seed == sample_seed(5, epoch, k.index)
                   for k in keys)
    ours.set_epoch(1)
    full = list(ours)
    ours.resume_at(1, 6)
    assert list(ours) == full[6:]
    assert list(ours) == full  # only the resumed epoch starts late
    with pytest.raises(ValueError, match='outside'):
        ours.resume_at(1, 21)


def test_atomic_write_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / 'last_checkpoint'
    atomic_write_text(str(path), 'old')

    def broken(tmp):
        with open(tmp, 'w') as handle:
            handle.write('half')
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(path), broken)
    assert path.read_text() == 'old'
    assert os.listdir(tmp_path) == ['last_checkpoint']  # no temporary file left


def _checkpoint(path, iteration):
    torch.save({'state_dict': {'w': torch.ones(3)}, 'meta': {'iter': iteration}}, path)
    return str(path)


def test_resume_skips_an_unreadable_newest_checkpoint(tmp_path):
    good = _checkpoint(tmp_path / 'epoch_1.pth', 4)
    newest = _checkpoint(tmp_path / 'iter_6.pth', 6)
    data = open(newest, 'rb').read()
    open(newest, 'wb').write(data[:len(data) // 2])  # killed mid-write by a foreign tool
    os.utime(good, (1, 1))
    (tmp_path / 'last_checkpoint').write_text(newest)
    path, messages = choose_resume_checkpoint(str(tmp_path))
    assert path == good
    assert len(messages) == 2 and 'skipping unreadable checkpoint' in messages[0]
    assert newest in messages[0] and messages[1] == f'resuming from {good}'


def test_resume_without_checkpoints_says_it_starts_from_scratch(tmp_path):
    path, messages = choose_resume_checkpoint(str(tmp_path))
    assert path is None and messages == [
        f'--resume: no loadable checkpoint in {tmp_path}; starting from scratch']


def test_non_finite_detection():
    assert non_finite_terms({'loss': torch.tensor(1.0), 'loss_mix': torch.tensor(float('nan')),
                             'acc': 0.5, 'x': float('inf')}) == ['loss_mix', 'x']
    assert non_finite_tensors({'a': torch.ones(2), 'b': torch.tensor([1.0, float('inf')]),
                               'n': torch.zeros(2, dtype=torch.long)}) == ['b']


def test_wandb_run_id_is_kept_for_resume_and_new_otherwise(tmp_path):
    first = wandb_run_id(str(tmp_path), resume=False)
    assert wandb_run_id(str(tmp_path), resume=True) == first
    assert wandb_run_id(str(tmp_path), resume=False) != first


# -- real runs (subprocesses, SIGKILL) --------------------------------------------------------
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
    fc.kill_and_resume(card, tmp, fake_tiny, 'mixco', reference, 'at_iter=5', 2)
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


def test_wandb_run_id_follows_the_checkpoint_a_run_resumes_from(tmp_path):
    """A fresh run into the same work dir rewrote the stored id; the checkpoint still knows."""
    ckpt = tmp_path / 'epoch_1.pth'
    torch.save({'state_dict': {}, 'meta': {'wandb_run_id': 'abc123'}}, ckpt)
    wandb_run_id(str(tmp_path), resume=False)  # the newer run's id, stored in the work dir
    assert wandb_run_id(str(tmp_path), resume=True, checkpoint=str(ckpt)) == 'abc123'
