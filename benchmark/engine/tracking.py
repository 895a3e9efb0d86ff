"""wandb through mmengine's WandbVisBackend: online with credentials, offline without.

Training and the results/ records never depend on wandb: without credentials the run logs
offline (one warning line; `wandb sync` uploads it later), and evaluation metrics reach the
same wandb run as the training curves when a wandb backend is configured.
"""
import base64
import importlib.util
import json
import netrc
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, List, Optional, Tuple

from mmengine.config import Config
from mmengine.registry import VISBACKENDS
from mmengine.visualization import WandbVisBackend

from benchmark import dist
from benchmark.atomic_io import atomic_write_text
from benchmark.engine.compat import wandb_init_kwargs
from benchmark.engine.checkpoints import checkpoint_meta
from benchmark.layout import WANDB_RUN_ID_FILE

WANDB_BACKENDS = ('WandbVisBackend', 'SafeWandbVisBackend')
# The folders, under the working directory (the checkout), whose .py files a run's code
# artifact holds: the project's own code, never a virtualenv or data inside the checkout.
PROJECT_CODE = ('benchmark', 'methods', 'configs', 'tools')
INIT_TIMEOUT_S = 20  # wandb's default is 90 s; a server that fails after the probe costs this
PROBE_TIMEOUT_S = 3.0  # the probe's hard bound (DNS, connect and answer together)
VIEWER_QUERY = b'{"query": "query Viewer { viewer { id } }"}'


@VISBACKENDS.register_module()
class SafeWandbVisBackend(WandbVisBackend):
    """mmengine's WandbVisBackend that falls back to offline when wandb cannot start online.

    Upstream (wandb 0.31): with an unreachable server, HTTP 5xx or a refused key `wandb.init`
    retries until its init timeout (the resume-status query of `resume='allow'` takes 10+ s
    even with `init_timeout=3`), then raises, which would end the training run inside
    mmengine's first log call. The wandb-core service also keeps the failed run registered
    under its id (since wandb 0.26.1 a second `wandb.init` with that id raises
    `run ID ... is in use`), and `wandb.finish()` cannot release it: no run was returned.
    And its telemetry exporter, set up for the global mode, asks the server again at exit.
    So a short probe (the GraphQL viewer query with the key, `PROBE_TIMEOUT_S`) goes first;
    if it fails, or `wandb.init` fails anyway, the run logs offline under the same id after
    one warning line (`wandb sync` uploads it later); records in results/ never depend on wandb.

    The run's code artifact holds only the project's code (`PROJECT_CODE`), or nothing with
    ``log_code=False``: mmengine's `add_config` calls wandb's `run.log_code()` on the whole
    working directory, which copies every .py file under the checkout, a virtualenv inside it
    included (13,000+ files), into wandb's staging folder on every run.

    Args:
        save_dir: As WandbVisBackend (the Visualizer fills it in).
        log_code: Save the .py files of benchmark/, methods/, configs/ and tools/ under the
            working directory with the run (True), or no code at all (False).
        **kwargs: WandbVisBackend's arguments (init_kwargs, define_metric_cfg, commit,
            log_code_name, watch_kwargs).
    """

    def __init__(self, save_dir: str, log_code: bool = True, **kwargs) -> None:
        if not isinstance(log_code, bool):
            raise ValueError(f'SafeWandbVisBackend: log_code must be True or False, '
                             f'got {log_code!r}')
        super().__init__(save_dir, **kwargs)
        self.log_code = log_code

    def add_config(self, config: Config, **kwargs) -> None:
        """The config into the run's config, as mmengine; code: the project's or none."""
        wandb = self.experiment  # starts the run (mmengine's force_init_env)
        wandb.config.update(config.to_dict(),
                            allow_val_change=self._init_kwargs.get('allow_val_change', False))
        if self.log_code:
            wandb.run.log_code(root='.', name=self._log_code_name, include_fn=is_project_code)

    def _init_env(self) -> None:
        self._init_kwargs = dict(self._init_kwargs or {})
        mode = self._init_kwargs.get('mode') or os.environ.get('WANDB_MODE') or 'online'
        if mode != 'online':
            super()._init_env()
            return
        problem = probe_wandb_server(*wandb_server_and_key(self._init_kwargs))
        if problem:
            self._init_offline(problem)
            return
        self._init_kwargs.setdefault('settings', dict(init_timeout=INIT_TIMEOUT_S))
        try:
            super()._init_env()
        except Exception as err:  # noqa: BLE001 - wandb raises many types here
            import wandb
            first = str(err).strip().splitlines()[0][:200] if str(err).strip() else ''
            try:  # stops wandb-core, which still holds the failed run's id
                wandb.teardown()
            except (Exception, SystemExit):  # noqa: BLE001 - it exits on wandb-core's failure
                pass
            self._init_offline(f'{type(err).__name__}: {first}')

    def _init_offline(self, reason: str) -> None:
        print(f'warning: wandb could not start online ({reason}); logging offline under the '
              'work dir, upload later with `wandb sync`', file=sys.stderr, flush=True)
        import wandb
        # wandb's process-wide telemetry exporter follows the global mode (WANDB_MODE), not
        # the run's, and at exit asks the server with a 10 s timeout: go offline as a whole.
        wandb.setup(settings=wandb.Settings(mode='offline'))
        self._init_kwargs['mode'] = 'offline'
        self._init_kwargs.pop('settings', None)
        super()._init_env()


def is_project_code(path: str, root: str) -> bool:
    """A .py file in one of `PROJECT_CODE` under `root` (wandb's `log_code` include_fn)."""
    relative = os.path.relpath(path, root)
    return relative.endswith('.py') and relative.split(os.sep, 1)[0] in PROJECT_CODE


def wandb_server_and_key(init_kwargs: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """The server URL and API key `wandb.init(**init_kwargs)` would use (key None if unknown).

    The key comes from the run's settings, WANDB_API_KEY, or the netrc entry for the server's
    host (`wandb login`); other credentials (an identity token file) give None.
    """
    settings = init_kwargs.get('settings')
    settings = settings if isinstance(settings, dict) else {}
    try:
        from wandb.sdk import wandb_setup
        base = wandb_setup.singleton().settings  # env vars and wandb's settings files
        base_url, key = base.base_url, base.api_key
    except Exception:  # noqa: BLE001 - a wandb without this layout: the environment alone
        base_url, key = os.environ.get('WANDB_BASE_URL', 'https://api.wandb.ai'), None
    base_url = settings.get('base_url') or base_url
    key = settings.get('api_key') or key or os.environ.get('WANDB_API_KEY')
    if not key:
        try:
            entry = netrc.netrc(os.environ.get('NETRC')).authenticators(
                urllib.parse.urlsplit(base_url).hostname or '')
            key = entry[2] if entry else None
        except (OSError, netrc.NetrcParseError):
            key = None
    return base_url.rstrip('/'), key


def probe_wandb_server(base_url: str, api_key: Optional[str],
                       timeout: float = PROBE_TIMEOUT_S) -> Optional[str]:
    """None if the server accepts the key (the viewer query answers with a user), else why not.

    Without a key only reachability is checked: any answer below HTTP 500 passes. Runs in a
    daemon thread so DNS and slow answers are bounded by `timeout` too.
    """
    request = urllib.request.Request(f'{base_url}/graphql', data=VIEWER_QUERY, method='POST',
                                     headers={'Content-Type': 'application/json'})
    if api_key:
        token = base64.b64encode(f'api:{api_key}'.encode()).decode()
        request.add_header('Authorization', f'Basic {token}')
    result: List[Optional[str]] = []

    def ask() -> None:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = response.read(1 << 16)
        except urllib.error.HTTPError as err:
            if not api_key and err.code < 500:
                result.append(None)  # it answers; wandb.init judges the other credentials
            elif err.code in (401, 403):
                result.append(f'{base_url} refused the API key: HTTP {err.code}')
            else:
                result.append(f'{base_url} answered HTTP {err.code}')
            return
        except Exception as err:  # noqa: BLE001 - refused, reset, DNS, TLS, timeout
            reason = getattr(err, 'reason', err)
            if isinstance(reason, TimeoutError):  # the socket's own timeout, before join's
                result.append(f'{base_url} did not answer within {timeout:g} s')
            else:
                result.append(f'{base_url} unreachable: {type(reason).__name__}: {reason}'[:200])
            return
        try:
            viewer = (json.loads(body).get('data') or {}).get('viewer')
        except (ValueError, AttributeError):
            viewer = None
        result.append(None if viewer or not api_key else
                      f'{base_url} did not accept the API key (no viewer in its answer)')

    thread = threading.Thread(target=ask, name='wandb-probe', daemon=True)
    thread.start()
    thread.join(timeout)
    return result[0] if result else f'{base_url} did not answer within {timeout:g} s'


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
            return wandb_init_kwargs(backend).get('id')
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


def wandb_missing(consequence: str) -> str:
    """The one line said where wandb would log but is not installed (the `wandb` extra)."""
    return (f'warning: wandb is not installed, so {consequence}; pip install wandb '
            '(or the wandb extra) to log it to wandb')


def configure_wandb(cfg: Any, say: bool = False) -> Optional[str]:
    """Set mode, project, run name and id of every wandb backend in `cfg`; return the warning
    (with `say`, also printed to stderr by the main process).

    The run id is kept in the work dir, so `--resume` continues the same wandb run.
    """
    warning = _configure_wandb(cfg)
    if say and warning and dist.is_main():
        print(warning, file=sys.stderr)
    return warning


def _configure_wandb(cfg: Any) -> Optional[str]:
    backends = [b for b in cfg.get('visualizer', {}).get('vis_backends', [])
                if b.get('type') in WANDB_BACKENDS]
    if not backends:
        return None
    if importlib.util.find_spec('wandb') is None:  # e.g. a GPU image: train, log locally
        cfg.visualizer.vis_backends = [b for b in cfg.visualizer.vis_backends
                                       if b.get('type') not in WANDB_BACKENDS]
        if os.environ.get('WANDB_MODE') == 'disabled':  # asked for no wandb: nothing to say
            return None
        return wandb_missing('this run logs locally only (scalars.json in the work dir)')
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
