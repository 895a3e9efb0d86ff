"""A real kill and resume of any training config through `tools/dist_train.sh`: NCCL processes
on GPUs, gloo CPU processes without one.

The run is SIGKILLed (`KillHook`) right after iteration ``kill_at``, resumed with ``--resume``
from its newest checkpoint and trained to the end; an uninterrupted run of the same config can
be the reference the resumed weights are compared with. On CPU resume is bit-identical (the
fault campaign checks that on tiny configs, and `require_identical` makes it a condition here);
on a GPU cuDNN's convolution kernels are not deterministic (``randomness.deterministic=False``,
as the paper configs run), so there the comparison is reported, not required, next to the
difference between two uninterrupted runs (``noise_floor``), which says what "close" means.
`tools/kill_resume.py` runs it; the fault campaign's own cases live in `fault_campaign`.
"""
from __future__ import annotations

import os.path as osp
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional

import torch
from mmengine.config import Config

from benchmark.engine.checkpoints import read_checkpoint
from benchmark.cli import one_line
from benchmark.harness.faults.runs import (IMPORTS, differing, referenced_corrupt, tiny_env,
                                           train)
from benchmark.layout import LAST_CHECKPOINT

_RESUMED = re.compile(r'resumed epoch: (\d+), iter: (\d+)')
# How a SIGKILL shows: the process's own code, or torchrun's report of its child.
_SIGKILLED = re.compile(r'exitcode\s*:\s*-9|Signal 9 \(SIGKILL\)')


def overlay_config(path: str, config: str, *, data_root: Optional[str], epochs: int,
                   iter_interval: int, options: Optional[dict] = None,
                   kill_at: Optional[int] = None) -> str:
    """``config`` resolved, with the data, length, iteration checkpoints and (with ``kill_at``)
    the KillHook set; written to ``path`` as a self-contained config file."""
    cfg = Config.fromfile(config)
    if options:
        cfg.merge_from_dict(options)
    if data_root is not None:
        cfg.train_dataloader.dataset.data_root = data_root
    cfg.train_cfg.max_epochs = epochs
    cfg.default_hooks.checkpoint.update(iter_interval=iter_interval)
    imports = list(cfg.get('custom_imports', {}).get('imports', []))
    cfg.custom_imports = dict(imports=imports + [m for m in IMPORTS if m not in imports],
                              allow_failed_imports=False)
    hooks = list(cfg.get('custom_hooks', []))
    if kill_at is not None:
        hooks.append(dict(type='KillHook', at_iter=kill_at))
    cfg.custom_hooks = hooks
    cfg.dump(path)
    return path


def killed_by_sigkill(proc) -> bool:
    """The run died of SIGKILL (not of an error of its own before the kill)."""
    return proc.returncode == -9 or bool(_SIGKILLED.search(proc.stdout + proc.stderr))


def final_state(work_dir: str) -> tuple:
    """(iteration, model state) of the checkpoint `last_checkpoint` names (weights-only)."""
    pointer = Path(work_dir) / LAST_CHECKPOINT
    if not pointer.is_file():
        raise FileNotFoundError(f'{work_dir}: no {LAST_CHECKPOINT}; the run saved nothing')
    ckpt = read_checkpoint(pointer.read_text().strip())
    return int(ckpt['meta']['iter']), ckpt['state_dict']


def compare(a: dict, b: dict) -> dict:
    """Bit-identity and the largest absolute difference of two model states."""
    diff = differing(a, b)
    shared = [n for n in diff if n in a and n in b and a[n].shape == b[n].shape]
    worst = max((float((a[n].double() - b[n].double()).abs().max()) for n in shared
                 if a[n].is_floating_point()), default=0.0)
    return dict(identical=not diff, tensors_differing=len(diff), tensors=len(a),
                max_abs_diff=worst)


def against_reference(out: dict, weights: dict, uninterrupted: Callable[[str], Optional[dict]],
                      require_identical: bool, noise_floor: bool) -> None:
    """Compare the resumed weights with an uninterrupted run's (and, with ``noise_floor``, that
    run with a second one); the results and any failures go into ``out``."""
    failures = out['failures']
    reference = uninterrupted('reference')
    if reference is None:
        return
    out['comparison'] = compare(reference, weights)
    if out['reference_iter'] != out['final_iter']:
        failures.append(f'resumed run ended at iteration {out["final_iter"]}, the '
                        f'uninterrupted one at {out["reference_iter"]}')
    if require_identical and not out['comparison']['identical']:
        failures.append(f'{out["comparison"]["tensors_differing"]} tensors differ from the '
                        f'uninterrupted run')
    again = uninterrupted('reference2') if noise_floor else None
    if again is not None:
        out['noise_floor'] = compare(reference, again)


def killed_and_resumed(out: dict, timed_train: Callable, killed_cfg: str, plain_cfg: str,
                       run_dir: str, kill_at: int) -> None:
    """The run killed after iteration ``kill_at``, then resumed to its end; what happened goes
    into ``out`` (with its final ``weights`` where the resume ended well)."""
    failures = out['failures']
    killed = timed_train(killed_cfg, run_dir, False, 'killed')
    if killed.returncode == 0:
        failures.append(f'the run was not killed at iteration {kill_at} (it has fewer?)')
    elif not killed_by_sigkill(killed):
        failures.append(f'the run failed (rc {killed.returncode}) before the kill at iteration '
                        f'{kill_at}: see killed.log')
    try:  # the newest complete checkpoint the kill left: where --resume must continue
        out['newest_checkpoint_iter'] = final_state(run_dir)[0]
    except (FileNotFoundError, ValueError) as err:
        out['newest_checkpoint_iter'] = None
        failures.append(f'after the kill: {err}')
    resumed = timed_train(plain_cfg, run_dir, True, 'resumed')
    found = _RESUMED.search(resumed.stdout + resumed.stderr)
    out['resumed_from_iter'] = int(found.group(2)) if found else None
    if resumed.returncode != 0:
        failures.append(f'the resumed run exited {resumed.returncode}: '
                        f'{(resumed.stderr.strip().splitlines() or [""])[-1][:300]}')
    elif not found:
        failures.append('the resumed run did not log "resumed epoch: E, iter: I"')
    elif out['resumed_from_iter'] != out['newest_checkpoint_iter']:
        failures.append(f'resumed from iteration {out["resumed_from_iter"]}, not from the newest '
                        f'checkpoint the kill left ({out["newest_checkpoint_iter"]})')
    out['corrupt_checkpoints'] = referenced_corrupt(run_dir)
    failures += [f'corrupt checkpoint: {c}' for c in out['corrupt_checkpoints']]
    if resumed.returncode == 0:
        out['final_iter'], out['weights'] = final_state(run_dir)


def kill_and_resume(config: str, work: str, *, data_root: Optional[str] = None, nproc: int = 1,
                    epochs: int = 2, kill_at: int, iter_interval: int,
                    options: Optional[dict] = None, reference: bool = True,
                    require_identical: Optional[bool] = None, noise_floor: Optional[bool] = None,
                    concurrent: bool = False, timeout: float = 1800,
                    log: Callable[[str], None] = print) -> dict:
    """Kill the run after iteration ``kill_at``, resume it, and check it ends where it should.

    Returns what happened (return codes, where it resumed, final iteration, seconds, the
    comparison with the uninterrupted run) and ``passed``; ``failures`` says why not.
    ``require_identical`` (default: on CPU) makes bit-identity with the reference a condition;
    ``noise_floor`` (default: where identity is not required) trains a second uninterrupted run
    and reports how far the two references are apart. ``concurrent`` trains the uninterrupted
    runs at the same time as the killed and resumed one (each its own processes and rendezvous
    port), so on a GPU the check takes about one run's time in place of three or four.
    """
    if require_identical is None:
        require_identical = not torch.cuda.is_available()
    if noise_floor is None:
        noise_floor = reference and not require_identical
    Path(work).mkdir(parents=True, exist_ok=True)
    common = dict(data_root=data_root, epochs=epochs, iter_interval=iter_interval,
                  options=options)
    killed_cfg = overlay_config(osp.join(work, 'killed.py'), config, kill_at=kill_at, **common)
    plain_cfg = overlay_config(osp.join(work, 'plain.py'), config, **common)
    run_dir = osp.join(work, 'run')
    out = dict(config=config, nproc=nproc, backend='nccl' if torch.cuda.is_available() else 'gloo',
               device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'cpu',
               epochs=epochs, kill_at=kill_at, iter_interval=iter_interval, failures=[])
    failures = out['failures']

    def timed_train(cfg: str, folder: str, resume: bool, what: str):
        log(f'  {what} ...')
        start = time.perf_counter()
        env = tiny_env(folder)
        if concurrent:  # a fixed rendezvous port would be taken by the first of the runs
            env.pop('PORT', None)
        proc = train(cfg, folder, nproc=nproc, resume=resume, torchrun=True, timeout=timeout,
                     env=env)
        out[f'{what}_seconds'] = round(time.perf_counter() - start, 1)
        out[f'{what}_rc'] = proc.returncode
        Path(work, f'{what}.log').write_text(proc.stdout + proc.stderr)
        return proc

    def uninterrupted(name: str) -> Optional[dict]:
        """Its final weights, or None (a failure noted) when it did not finish."""
        folder = osp.join(work, name)
        try:
            proc = timed_train(plain_cfg, folder, False, name)
            if proc.returncode != 0:
                failures.append(f'the uninterrupted run {name} exited {proc.returncode}')
                return None
            out[f'{name}_iter'], state = final_state(folder)
        except (OSError, ValueError, subprocess.TimeoutExpired) as err:
            failures.append(f'the uninterrupted run {name}: {one_line(err)}')
            return None
        return state

    names = (['reference'] + (['reference2'] if noise_floor else [])) if reference else []
    with ThreadPoolExecutor(max(1, len(names))) as pool:
        started = {n: pool.submit(uninterrupted, n) for n in (names if concurrent else ())}
        killed_and_resumed(out, timed_train, killed_cfg, plain_cfg, run_dir, kill_at)
        weights = out.pop('weights', None)
        if weights is not None and reference:
            against_reference(out, weights, lambda n: (
                started[n].result() if n in started else uninterrupted(n)),
                require_identical, noise_floor)
    out['require_identical'] = require_identical
    out['passed'] = not failures
    return out
