"""The fault campaign: real kills, corrupt writes, bad configs and bad data, scored.

Every case runs the real tools (`tools/train.py`, `tools/dist_train.sh`) in subprocesses on
CPU with tiny settings, injects its fault for real (SIGKILL, SIGTERM, SIGSTOP, malformed
files) and checks the outcome: a resumed run must end `torch.equal` to the uninterrupted run,
no referenced checkpoint may be corrupt, every bad input must give a clean one-line error.
`tools/fault_campaign.py` runs it and prints the scorecard; the tests run small pieces.
How a run is started and compared lives in `benchmark.harness.faults.runs`.
"""
from __future__ import annotations

import glob
import json
import os
import os.path as osp
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

from benchmark.exit_codes import PREEMPTED_EXIT_CODE
from benchmark.layout import REPO_ROOT
from benchmark.harness.faults.runs import (Scorecard, differing, final_checkpoint, free_port,
                                           load_weights, referenced_corrupt, remove_checkpoints,
                                           tiny_env, train, write_config)


def score_kill_resume(card: Scorecard, tmp: str, data_root: str, method: str, reference: str,
                    fault: str, epochs: int, nproc: int = 1, no_eval: bool = True,
                    log=print, **config) -> None:
    """One SIGKILL case: run with the fault, resume until done, compare with the reference
    (a checkpoint of the same config uninterrupted; ``config``: more `write_config` settings)."""
    name = f"{method}-{re.sub(r'[^a-z0-9]+', '-', fault.lower()).strip('-')}-{nproc}p"
    work = osp.join(tmp, name)
    cfg = write_config(osp.join(tmp, f'{name}.py'), method, data_root, epochs=epochs,
                       fault=f"dict(type='KillHook', {fault})", **config)
    plain = write_config(osp.join(tmp, f'{name}-resume.py'), method, data_root, epochs=epochs,
                         **config)
    first = train(cfg, work, nproc=nproc, no_eval=no_eval)
    killed = first.returncode != 0
    second = train(plain, work, nproc=nproc, resume=True, no_eval=no_eval)
    ok = killed and second.returncode == 0
    why = f'first rc {first.returncode}, resume rc {second.returncode}'
    if ok:
        diff = differing(load_weights(reference), load_weights(final_checkpoint(work, epochs)))
        ok = not diff
        why = f'{len(diff)} tensors differ from the uninterrupted run (first: {diff[:1]})'
    corrupt = referenced_corrupt(work)
    card.checkpoints_corrupt += len(corrupt)
    remove_checkpoints(work)  # compared: the logs stay, the disk space goes back
    card.fault(ok and not corrupt, f'kill {name}: {why}' + (f'; corrupt {corrupt}' if corrupt else ''))
    log(f"  kill {name:<40} {'bit-identical' if ok else 'FAILED: ' + why}")


def section_kills(card: Scorecard, tmp: str, data_root: str, rng: random.Random,
                  kills_per_method: int = 3, log=print) -> None:
    """SIGKILL at random iterations (mid-epoch, right after a save, during evaluation)."""
    epochs, per_epoch, interval = 2, 8, 3  # 32 fake images, batch 4, one process
    for method in ('mocov2', 'mixco', 'simclr'):
        reference = osp.join(tmp, f'{method}-reference')
        ref = train(write_config(osp.join(tmp, f'{method}-reference.py'), method, data_root,
                                 epochs=epochs), reference)
        if ref.returncode != 0:
            card.failures.append(f'{method} reference run failed: {ref.stderr[-300:]}')
            continue
        ref_ckpt = final_checkpoint(reference, epochs)
        total = epochs * per_epoch
        after_save = interval * rng.randint(1, (total - 1) // interval)
        points = {after_save} | set(rng.sample(range(1, total), kills_per_method))
        for at in sorted(points)[:kills_per_method]:
            score_kill_resume(card, tmp, data_root, method, ref_ckpt, f'at_iter={at}', epochs,
                            log=log)
    # during the evaluation that follows training, and one kill of one of two processes
    reference = final_checkpoint(osp.join(tmp, 'mixco-reference'), epochs)
    if osp.isfile(reference):
        score_kill_resume(card, tmp, data_root, 'mixco', reference, 'during_eval=True, delay_s=2.0',
                        epochs, no_eval=False, log=log)
    ref2 = osp.join(tmp, 'mixco-reference-2p')
    done = train(write_config(f'{ref2}.py', 'mixco', data_root, epochs=epochs), ref2, nproc=2)
    if done.returncode == 0:
        score_kill_resume(card, tmp, data_root, 'mixco', final_checkpoint(ref2, epochs),
                        f'at_iter={rng.randint(2, 7)}, rank=1', epochs, nproc=2, log=log)
    else:
        card.failures.append(f'two-process reference run failed: {done.stderr[-300:]}')


def _first_error(stderr: str) -> Optional[str]:
    """The exception line closing the first traceback in ``stderr``, or None."""
    if 'Traceback' not in stderr:
        return None
    lines = stderr[stderr.index('Traceback'):].splitlines()
    return next((line for line in lines[1:] if line and not line.startswith((' ', '\t'))),
                lines[-1])


def section_save_kills(card: Scorecard, tmp: str, data_root: str, rng: random.Random,
                       kills: int = 10, log=print) -> None:
    """SIGKILL while checkpoints are written, with max_keep_ckpts 1 and unlimited."""
    epochs = 4
    for keep in (1, -1):
        work = osp.join(tmp, f'save-kills-keep{keep}')
        survived = 0
        for attempt in range(kills):
            delay = rng.uniform(0.0, 0.4)
            cfg = write_config(osp.join(tmp, f'save-kill-{keep}-{attempt}.py'), 'mocov2',
                               data_root, epochs=epochs, iter_interval=2, max_keep_ckpts=keep,
                               fault=f"dict(type='KillHook', during_save=1, delay_s={delay:.3f})")
            proc = train(cfg, work, resume=True)
            Path(work, f'attempt-{attempt}.stderr').write_text(proc.stderr)  # for a post-mortem
            corrupt = referenced_corrupt(work)
            card.checkpoints_corrupt += len(corrupt)
            started = ('resuming from' in proc.stderr or 'starting from scratch' in proc.stderr)
            error = _first_error(proc.stderr)
            ok = started and not corrupt and error is None and proc.returncode == -signal.SIGKILL
            survived += ok
            card.fault(ok, f'save kill keep={keep} #{attempt} (delay {delay:.3f} s): rc '
                           f'{proc.returncode}, corrupt {corrupt}, resume line {started}, '
                           f'error {error}')
        final = train(write_config(osp.join(tmp, f'save-kill-{keep}-final.py'), 'mocov2',
                                   data_root, epochs=epochs, iter_interval=2,
                                   max_keep_ckpts=keep), work, resume=True)
        if final.returncode != 0:
            card.failures.append(f'save kills keep={keep}: final resume failed: '
                                 f'{final.stderr[-300:]}')
        remove_checkpoints(work)
        log(f'  {kills} kills during checkpoint writes, max_keep_ckpts={keep}: {survived} '
            f'clean resumes, final run rc {final.returncode}')


# (what, --cfg-options ...): each must be refused with one `error:` line and exit code 2.
MALFORMED = [
    ('typo in a model key', ['model.temprature=0.1']),
    ('temperature 0', ['model.temperature=0']),
    ('negative temperature', ['model.temperature=-1']),
    ('momentum 1', ['model.key_momentum=1.0']),
    ('negative momentum', ['model.key_momentum=-0.1']),
    ('batch 1', ['train_dataloader.batch_size=1']),
    ('odd batch for MixCo', ['train_dataloader.batch_size=7']),
    ('batch not a number', ['train_dataloader.batch_size=abc']),
    ('lr 0', ['optim_wrapper.optimizer.lr=0']),
    ('negative lr', ['optim_wrapper.optimizer.lr=-0.1']),
    ('unknown model type', ['model.type=MixCoo']),
    ('unknown dataset type', ['train_dataloader.dataset.type=TinyImagenet']),
    ('zero epochs', ['train_cfg.max_epochs=0']),
    ('fractional epochs', ['train_cfg.max_epochs=1.5']),
    ('unknown top-level key', ['trian_cfg.max_epochs=2']),
    ('mix temperature 0', ['model.mix_temperature=0']),
    ('ResNet depth 19', ['model.backbone.depth=19']),
    ('missing data root', ['train_dataloader.dataset.data_root=/nonexistent/tiny']),
    ('queue size 0', ['model.queue_size=0']),
    ('unknown pairing', ['model.mix_pairing=diagonal']),
    ('unknown view', ['train_dataloader.dataset.view=mocov3']),
    ('unknown optimizer', ['optim_wrapper.optimizer.type=SGDD']),
    ('negative weight decay', ['optim_wrapper.optimizer.weight_decay=-1']),
    ('option without =', ['model.temperature']),
    ('kNN monitor k 0', ['custom_hooks.1.k=0']),
]


def section_configs(card: Scorecard, data_root: str, log=print) -> None:
    """Malformed configs and options: one `error:` line, exit 2, no traceback, in seconds."""
    env = tiny_env()
    clean = 0
    for what, options in MALFORMED:
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), 'configs/mixco_r18_tiny.py',
             '--work-dir', osp.join(tempfile.gettempdir(), 'fault-campaign-never-created'),
             '--cfg-options',
             f'train_dataloader.dataset.data_root={data_root}', *options],
            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        ok = (proc.returncode == 2 and len(lines) == 1 and lines[0].startswith('error:')
              and 'Traceback' not in proc.stderr and time.monotonic() - start < 60)
        clean += ok
        card.bad_input(ok, f'config "{what}": rc {proc.returncode}, stderr {proc.stderr[-300:]!r}')
    log(f'  malformed configs: {clean}/{len(MALFORMED)} clean one-line errors')


def section_preemption(card: Scorecard, tmp: str, data_root: str, log=print) -> None:
    """SIGTERM and SIGUSR1: checkpoint, exit 143, resume bit-identical."""
    reference = final_checkpoint(osp.join(tmp, 'mixco-reference'), 2)
    for sig in (signal.SIGTERM, signal.SIGUSR1):
        name = f'preempt-{sig.name}'
        work = osp.join(tmp, name)
        cfg = write_config(osp.join(tmp, f'{name}.py'), 'mixco', data_root, epochs=2)
        proc = subprocess.Popen([sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), cfg,
                                 '--work-dir', work, '--no-eval'], cwd=REPO_ROOT,
                                env=tiny_env(work), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        log_file = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            logs = glob.glob(osp.join(work, '*', '*.log'))
            log_file = logs[0] if logs else None
            if log_file and _logged_iter(Path(log_file).read_text(), 1, 3):
                break
            time.sleep(0.2)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
        resumed = train(cfg, work, resume=True)
        ok = proc.returncode == PREEMPTED_EXIT_CODE and resumed.returncode == 0
        why = f'rc {proc.returncode}, resume rc {resumed.returncode}'
        if ok and osp.isfile(reference):
            diff = differing(load_weights(reference), load_weights(final_checkpoint(work, 2)))
            ok, why = not diff, f'{len(diff)} tensors differ'
        card.fault(ok, f'{sig.name}: {why}')
        log(f"  {sig.name}: exit {proc.returncode}, {'resumed bit-identical' if ok else why}")


def section_nan(card: Scorecard, tmp: str, data_root: str, log=print) -> None:
    """A NaN weight at iteration 5: the run stops there, nothing non-finite saved, recorded."""
    work = osp.join(tmp, 'nan')
    cfg = write_config(osp.join(tmp, 'nan.py'), 'mixco', data_root, epochs=2,
                       fault="dict(type='PoisonHook', at_iter=5)")
    proc = train(cfg, work, no_eval=False)
    records = glob.glob(osp.join(work, 'results', 'runs', '*.json'))
    diverged = [json.loads(Path(r).read_text())['status'] for r in records] == ['diverged']
    from benchmark.engine.checkpoint_hook import non_finite_tensors
    poisoned = [p for p in glob.glob(osp.join(work, '*.pth'))
                if non_finite_tensors(load_weights(p))]
    ok = (proc.returncode == 3 and 'iteration 5' in proc.stdout + proc.stderr and diverged
          and not poisoned)
    card.fault(ok, f'NaN: rc {proc.returncode}, diverged record {diverged}, '
                   f'non-finite checkpoints {poisoned}')
    log(f"  NaN at iteration 5: exit {proc.returncode}, record diverged: {diverged}, "
        f"non-finite checkpoints: {len(poisoned)}")


def _logged_iter(text: str, epoch: int, batch: int) -> bool:
    """Whether an mmengine training log shows batch ``batch`` of epoch ``epoch``."""
    return re.search(rf'Epoch\(train\)\s+\[\s*{epoch}\]\[\s*{batch}/', text) is not None


def _orphans(marker: str) -> List[int]:
    out = subprocess.run(['pgrep', '-f', marker], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def section_dead_rank(card: Scorecard, tmp: str, data_root: str, timeout_s: int = 20,
                      log=print) -> None:
    """One of two processes killed, or hung (SIGSTOP): the job ends non-zero in time, no orphans.
    The two jobs run at once: the hung one spends most of its time waiting (the collective's
    timeout, then torchrun's wait before it kills a process that ignores SIGTERM)."""
    jobs = {}
    for kind in ('dead', 'hung'):
        work = osp.join(tmp, f'rank-{kind}')
        fault = ("dict(type='KillHook', at_iter=3, rank=1)" if kind == 'dead' else '')
        cfg = write_config(osp.join(tmp, f'rank-{kind}.py'), 'mocov2', data_root, epochs=20,
                           fault=fault, extra=f'env_cfg = dict(dist_cfg=dict(timeout={timeout_s}))\n')
        env = dict(tiny_env(work), PORT=str(free_port()), PYTHON=sys.executable)
        out = osp.join(tmp, f'rank-{kind}.out')
        with open(out, 'w') as f:
            proc = subprocess.Popen(['bash', str(REPO_ROOT / 'tools' / 'dist_train.sh'), cfg, '2',
                                     '--work-dir', work, '--no-eval'], cwd=REPO_ROOT, env=env,
                                    stdout=f, stderr=subprocess.STDOUT)
        jobs[kind] = dict(work=work, proc=proc, out=out, start=time.monotonic(), end=None)
    hung, stopped = jobs['hung'], False
    while any(job['end'] is None for job in jobs.values()):
        time.sleep(0.5)
        now = time.monotonic()
        if not stopped and hung['end'] is None and now - hung['start'] < 120:
            logs = glob.glob(osp.join(hung['work'], '*', '*.log'))
            rank1 = (_rank_pid(hung['work'], 1)
                     if logs and _logged_iter(Path(logs[0]).read_text(), 1, 2) else None)
            if rank1:
                os.kill(rank1, signal.SIGSTOP)
                hung['start'], stopped = now, True
        for job in jobs.values():
            if job['end'] is None and job['proc'].poll() is not None:
                job['end'] = now
            elif job['end'] is None and now - job['start'] > timeout_s + 120:
                job['proc'].kill()
                job['proc'].wait()
                job['end'] = now
    for kind, job in jobs.items():
        took, out = job['end'] - job['start'], Path(job['out']).read_text()
        left = _orphans(job['work'])
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        names_rank = 'rank: 1' in out or 'rank 1' in out
        rc = job['proc'].returncode
        ok = rc != 0 and took <= timeout_s + 60 and not left and names_rank
        card.fault(ok, f'{kind} rank: rc {rc} after {took:.0f}s, orphans {left}, '
                       f'names rank 1: {names_rank}')
        log(f'  {kind} process: job exit {rc} after {took:.0f} s (limit '
            f'{timeout_s}+60), orphans {len(left)}, log names rank 1: {names_rank}')


def _rank_pid(work: str, rank: int) -> Optional[int]:
    """PID of the training process with RANK=rank whose command line names ``work``."""
    for pid in _orphans(work):
        try:
            environ = Path(f'/proc/{pid}/environ').read_bytes().split(b'\0')
        except OSError:
            continue
        if f'RANK={rank}'.encode() in environ and b'LOCAL_RANK=' in b' '.join(environ):
            return pid
    return None


def _write_records(args) -> int:
    results, worker, count = args
    from benchmark.reports.records import build_record, write_record
    for i in range(count):
        record = build_record(method='mixco', backbone='resnet18', pretrain_data='digits',
                              pretrain_epochs=1, eval_data='digits', seed=worker * 1000 + i,
                              world_size=1, total_batch=2,
                              protocols={'knn': {'settings': {}, 'metrics': {'top1': 50.0}}})
        write_record(record, results)
    return count


def section_records(card: Scorecard, tmp: str, writers: int = 8, each: int = 5,
                    log=print) -> None:
    """Several runs finishing at once: every record lands, none overwrites another."""
    import multiprocessing
    results = osp.join(tmp, 'concurrent-results')
    with multiprocessing.get_context('spawn').Pool(writers) as pool:
        written = sum(pool.map(_write_records, [(results, w, each) for w in range(writers)]))
    from benchmark.reports.records import load_records
    found = len(load_records(results))
    card.rows_lost += written - found
    log(f'  {writers} concurrent writers x {each} records: {found}/{written} on disk')



def section_bad_data(card: Scorecard, tmp: str, log=print) -> None:
    """5% truncated, 1% non-image, 1% zero-byte among valid odd-format images."""
    from benchmark.data.scan import scan_image_files
    from benchmark.data.fakes import (image_files_under, corrupt_image_folder, make_fake_tiny_imagenet,
                                 write_odd_format_images)
    root = make_fake_tiny_imagenet(osp.join(tmp, 'bad-data'), num_classes=5,
                                   train_per_class=40, val_per_class=4)
    wnids = Path(root, 'wnids.txt').read_text().split()
    for i, wnid in enumerate(wnids):  # odd formats as training images of every class
        for path in write_odd_format_images(Path(tmp, 'odd', wnid), seed=i):
            target = Path(root, 'train', wnid, 'images', f'{wnid}_{Path(path).name}')
            target.write_bytes(Path(path).read_bytes())
    broken = corrupt_image_folder(Path(root, 'train'), 0.05, 0.01, 0.01, seed=0)
    files = image_files_under(Path(root, 'train'))
    report = scan_image_files(files)
    exact = all(sorted(getattr(report, kind)) == broken[kind] for kind in broken)
    false_positive = set(report.bad_files) - {p for v in broken.values() for p in v}
    card.bad_input(exact and not false_positive and not report.unreadable,
                   f'bad-data scan: found {report.counts()}, planted '
                   f'{ {k: len(v) for k, v in broken.items()} }, false positives {len(false_positive)}')
    log(f"  scan of {len(files)} files: found {report.summary()}; planted "
        f"{sum(len(v) for v in broken.values())}; exact: {exact}; false positives: "
        f"{len(false_positive)}")
    work = osp.join(tmp, 'bad-data-runs')
    strict = subprocess.run(
        [sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), 'configs/mocov2_r18_tiny.py',
         '--work-dir', work, '--no-eval', '--cfg-options', f'train_dataloader.dataset.data_root={root}'],
        cwd=REPO_ROOT, env=tiny_env(work), capture_output=True, text=True, timeout=300)
    lines = strict.stderr.strip().splitlines()
    refused = strict.returncode == 2 and len(lines) == 1 and str(report.bad) in lines[0]
    card.bad_input(refused, f'bad-data strict: rc {strict.returncode}, {strict.stderr[-300:]!r}')
    log(f'  policy strict: exit {strict.returncode}: {lines[-1][:150] if lines else ""}')
    cfg = write_config(osp.join(tmp, 'bad-data-skip.py'), 'mocov2', str(root), epochs=1, batch=8,
                       dataset="bad_data='skip'")
    skip = train(cfg, work)
    counted = f'{report.bad} bad image files' in skip.stdout + skip.stderr
    card.fault(skip.returncode == 0 and counted,
               f'bad-data skip: rc {skip.returncode}, count logged {counted}: {skip.stderr[-300:]}')
    log(f'  policy skip: exit {skip.returncode}, {report.bad} files left out and logged: {counted}')
