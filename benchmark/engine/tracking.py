"""wandb through mmengine's WandbVisBackend: online with credentials, offline without.

Training and the results/ records never depend on wandb: without credentials the run logs
offline (one warning line; `wandb sync` uploads it later), and evaluation metrics reach the
same wandb run as the training curves when a wandb backend is configured.
"""
import netrc
import os
import sys
import uuid
from typing import Any, Dict, List, Optional, Tuple

from mmengine.registry import VISBACKENDS
from mmengine.visualization import WandbVisBackend

from benchmark import dist
from benchmark.atomic_io import atomic_write_text
from benchmark.engine.checkpoints import checkpoint_meta
from benchmark.layout import WANDB_RUN_ID_FILE

WANDB_BACKENDS = ('WandbVisBackend', 'SafeWandbVisBackend')
INIT_TIMEOUT_S = 20  # wandb's default is 90 s; an unreachable server costs this much once


@VISBACKENDS.register_module()
class SafeWandbVisBackend(WandbVisBackend):
    """mmengine's WandbVisBackend that falls back to offline when wandb cannot start online.

    An unreachable server or refused credentials make `wandb.init` raise, which would end the
    training run inside mmengine's first log call. Here it costs one warning line and the run
    logs offline (`wandb sync` uploads it later); records in results/ never depend on wandb.
    """

    def _init_env(self) -> None:
        self._init_kwargs = dict(self._init_kwargs or {})
        if self._init_kwargs.get('mode', 'online') == 'online':
            self._init_kwargs.setdefault('settings', dict(init_timeout=INIT_TIMEOUT_S))
        try:
            super()._init_env()
        except Exception as err:  # noqa: BLE001 - wandb raises many types here
            import wandb
            first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ''
            print(f'warning: wandb could not start online ({type(err).__name__}: {first}); '
                  'logging offline under the work dir, upload later with `wandb sync`',
                  file=sys.stderr, flush=True)
            wandb.finish()
            self._init_kwargs['mode'] = 'offline'
            self._init_kwargs.pop('settings', None)
            super()._init_env()


def has_wandb_credentials() -> bool:
    """An API key in the environment or a `wandb login` entry in ~/.netrc."""
    if os.environ.get('WANDB_API_KEY'):
        return True
    try:
        return netrc.netrc().authenticators('api.wandb.ai') is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_mode() -> Tuple[str, Optional[str]]:
    """(mode, warning): WANDB_MODE wins; no credentials means offline with one warning."""
    mode = os.environ.get('WANDB_MODE')
    if mode:
        return mode, None
    if has_wandb_credentials():
        return 'online', None
    return 'offline', ('warning: wandb has no credentials (WANDB_API_KEY or `wandb login`); '
                       'logging offline under the work dir, upload later with `wandb sync`')


RUN_ID_FILE = WANDB_RUN_ID_FILE  # in the work dir: a resumed run logs into the same wandb run


def wandb_run_id_of(visualizer: Any) -> Optional[str]:
    """The run id given to the visualizer's wandb backend, if it has one."""
    for name in WANDB_BACKENDS:
        backend = visualizer.get_backend(name) if visualizer is not None else None
        if backend is not None:
            return (getattr(backend, '_init_kwargs', None) or {}).get('id')
    return None


def wandb_run_id(work_dir: str, resume: bool, checkpoint: Optional[str] = None) -> str:
    """The wandb run id: when resuming, the one in the checkpoint's meta (else the work dir's
    stored one); otherwise a new one, stored in the work dir."""
    if resume and checkpoint:
        try:
            run_id = checkpoint_meta(checkpoint).get('wandb_run_id')
        except Exception:  # noqa: BLE001 - an unreadable meta falls back to the stored id
            run_id = None
        if run_id:
            return run_id
    path = os.path.join(work_dir, RUN_ID_FILE)
    if resume and os.path.isfile(path):
        with open(path) as handle:
            run_id = handle.read().strip()
        if run_id:
            return run_id
    run_id = uuid.uuid4().hex[:12]  # os.urandom: draws nothing from the seeded generators
    if dist.is_main():
        atomic_write_text(path, run_id + '\n')
    return run_id


def configure_wandb(cfg: Any) -> Optional[str]:
    """Set mode, project, run name and id of every wandb backend in `cfg`; return the warning.

    The run id is kept in the work dir, so `--resume` continues the same wandb run.
    """
    backends = [b for b in cfg.get('visualizer', {}).get('vis_backends', [])
                if b.get('type') in WANDB_BACKENDS]
    if not backends:
        return None
    mode, warning = wandb_mode()
    name = os.path.basename(os.path.normpath(cfg.work_dir))
    run_id = wandb_run_id(cfg.work_dir, bool(cfg.get('resume')), cfg.get('load_from'))
    for backend in backends:
        kwargs = dict(backend.get('init_kwargs') or {})
        kwargs.setdefault('mode', mode)
        kwargs.setdefault('project', 'mixco-bench')
        kwargs.setdefault('name', name)
        kwargs.setdefault('id', run_id)
        kwargs.setdefault('resume', 'allow')
        backend['init_kwargs'] = kwargs
    return warning


def record_rows(record: Dict[str, Any]) -> List[list]:
    """One row per metric of a record: the run's leaderboard entries in long form."""
    keys = [record[k] for k in ('method', 'backbone', 'pretrain_data', 'pretrain_epochs',
                                'eval_data')]
    return [keys + [protocol, name, value if isinstance(value, (int, float)) else None,
                    value if isinstance(value, str) else '']
            for protocol, entry in sorted(record['protocols'].items())
            for name, value in sorted(entry['metrics'].items())]


ROW_COLUMNS = ['method', 'backbone', 'pretrain_data', 'pretrain_epochs', 'eval_data',
               'protocol', 'metric', 'value', 'na_reason']


def log_record(visualizer: Any, record: Dict[str, Any]) -> bool:
    """Put the record's metrics in the wandb run's summary and a table; False if no wandb."""
    try:
        backend = next(filter(None, (visualizer.get_backend(n) for n in WANDB_BACKENDS)), None)
    except (AttributeError, KeyError):
        return False
    if backend is None:
        return False
    wandb = backend.experiment  # mmengine hands out the wandb module with its run started
    rows = record_rows(record)
    wandb.run.summary.update({f'eval/{r[5]}/{r[6]}': r[7] for r in rows if r[7] is not None})
    wandb.run.summary['eval/record_id'] = record['id']
    wandb.log({'eval/results': wandb.Table(columns=ROW_COLUMNS, data=rows)})
    return True
