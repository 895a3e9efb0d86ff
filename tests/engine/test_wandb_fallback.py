"""wandb online but its server fails: one warning, offline logging, the run and its record complete.

Four local servers on 127.0.0.1: one that accepts connections and never answers, one that
answers HTTP 500, one that refuses the key (401 on the viewer query), and a closed port. A whole
training run against the first: tests/e2e/test_train_tool_runs.py.
"""
import http.server
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from mmengine.visualization import Visualizer

from benchmark.engine import tracking
from benchmark.engine.tracking import log_record, probe_wandb_server
from tests.conftest import needs_wandb

KEY = 'k' * 40
SERVERS = ('silent', 'http500', 'refuses_key', 'closed')
WARNING = 'warning: wandb could not start online'
TINY = ['train_dataloader.batch_size=8', 'train_dataloader.dataset.input_size=32',
        'train_cfg.max_epochs=1', 'model.queue_size=64', 'train_dataloader.num_workers=0',
        'train_dataloader.persistent_workers=False']
RECORD = dict(id='r1', method='moco', backbone='resnet18', pretrain_data='digits',
              pretrain_epochs=1, eval_data='digits',
              protocols={'knn': {'settings': {}, 'metrics': {'top1': 50.0}}})


def http_server(answer) -> tuple:
    """A threaded HTTP server on 127.0.0.1: `answer(body) -> (status, json bytes)` per POST."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            status, body = answer(self.rfile.read(int(self.headers.get('Content-Length') or 0)))
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_POST

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1], lambda: (server.shutdown(), server.server_close())


def silent_server() -> tuple:
    """Accepts connections (the backlog) and never reads or answers."""
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    sock.listen(64)
    return sock.getsockname()[1], sock.close


@contextmanager
def wandb_server(kind: str):
    """The base URL of a local server behaving as `kind`; stopped on exit."""
    error = b'{"errors": [{"message": "no"}]}'
    if kind == 'silent':
        port, stop = silent_server()
    elif kind == 'http500':
        port, stop = http_server(lambda body: (500, error))
    elif kind == 'refuses_key':  # like the real server for a bad key: 401 on the viewer query
        port, stop = http_server(lambda body: (401, error))
    elif kind == 'accepts_key':  # the viewer query names a user; everything else fails
        port, stop = http_server(lambda body: (200, b'{"data": {"viewer": {"id": "u1"}}}')
                                 if b'viewer' in body else (500, error))
    else:  # closed: a port that was free a moment ago
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', 0))
            port = sock.getsockname()[1]
        stop = None
    try:
        yield f'http://127.0.0.1:{port}'
    finally:
        if stop:
            stop()


@pytest.fixture
def online_env(tmp_path, monkeypatch):
    """Online mode with a key, no ~/.netrc; wandb's process-wide state fresh before and after."""
    import wandb
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.setenv('WANDB_MODE', 'online')
    monkeypatch.setenv('WANDB_API_KEY', KEY)
    wandb.teardown()  # wandb reads the environment once per process, at its first use
    yield monkeypatch
    wandb.teardown()


@pytest.fixture
def init_modes(online_env):
    """The `mode` of every wandb.init call, in order (the real init still runs)."""
    import wandb
    modes, real = [], wandb.init

    def spy(*args, **kwargs):
        modes.append(kwargs.get('mode'))
        return real(*args, **kwargs)

    online_env.setattr(wandb, 'init', spy)
    return modes


@pytest.mark.parametrize('kind', SERVERS)
def test_probe_names_the_failure_within_its_bound(kind):
    with wandb_server(kind) as url:  # 'did not answer within 1 s': the probe's own timeout
        problem = probe_wandb_server(url, KEY, timeout=1.0)
    expected = {'silent': 'did not answer within 1 s', 'http500': 'answered HTTP 500',
                'refuses_key': 'refused the API key: HTTP 401', 'closed': 'unreachable'}[kind]
    assert problem.startswith(url) and expected in problem


def test_probe_passes_a_server_that_accepts_the_key():
    with wandb_server('accepts_key') as url:
        assert probe_wandb_server(url, KEY, timeout=2.0) is None
    with wandb_server('refuses_key') as url:  # no key: reachability only, wandb.init judges
        assert probe_wandb_server(url, None, timeout=2.0) is None


def start_backend(tmp_path: Path, url: str, monkeypatch) -> tuple:
    """Start a SafeWandbVisBackend online against `url` as train.py does; (seconds, visualizer)."""
    monkeypatch.setenv('WANDB_BASE_URL', url)
    vis = Visualizer(name=f'wandb-{tmp_path.name}', save_dir=str(tmp_path), vis_backends=[
        dict(type='SafeWandbVisBackend', init_kwargs=dict(
            mode='online', project='t', id='run0fixed123', resume='allow'))])
    start = time.monotonic()
    vis.add_scalars({'loss': 1.0}, step=1)  # mmengine starts wandb at the first log call
    return time.monotonic() - start, vis


@pytest.mark.slow
@needs_wandb
@pytest.mark.parametrize('kind', SERVERS)
def test_backend_starts_offline_with_one_warning(kind, tmp_path, online_env, init_modes, capsys):
    """The probe sends the run offline before wandb.init (no online attempt and its timeouts):
    one warning, the same run id."""
    with wandb_server(kind) as url:
        _, vis = start_backend(tmp_path, url, online_env)
        assert log_record(vis, RECORD)
        vis.close()
    assert init_modes == ['offline']
    warnings = [line for line in capsys.readouterr().err.splitlines() if WARNING in line]
    assert len(warnings) == 1 and url in warnings[0]
    runs = list(tmp_path.glob('**/wandb/offline-run-*-run0fixed123'))
    assert len(runs) == 1 and list(runs[0].glob('files/media/table/eval/results_*.table.json'))


@pytest.mark.slow
@needs_wandb
def test_init_failing_after_the_probe_retries_offline_under_the_same_id(tmp_path, online_env,
                                                                       init_modes, capsys):
    """The probe passes but wandb.init fails: wandb-core still holds the id (`run ID ... is in
    use`) until it is torn down; the offline run then starts under that id."""
    online_env.setattr(tracking, 'INIT_TIMEOUT_S', 1)
    with wandb_server('accepts_key') as url:
        _, vis = start_backend(tmp_path, url, online_env)
        vis.close()
    err = capsys.readouterr().err
    assert 'is in use' not in err
    assert len([line for line in err.splitlines() if WARNING in line]) == 1
    assert len(list(tmp_path.glob('**/wandb/offline-run-*-run0fixed123'))) == 1
    assert init_modes == ['online', 'offline']  # one online try, then offline, no loop


def test_a_socket_timeout_reads_as_no_answer(monkeypatch):
    """The socket may time out just before the probe's own bound does (a loaded machine): the
    message is the same 'did not answer' either way."""
    import urllib.request

    def slow(*args, **kwargs):
        raise urllib.error.URLError(TimeoutError('timed out'))

    monkeypatch.setattr(urllib.request, 'urlopen', slow)
    assert probe_wandb_server('http://127.0.0.1:9', KEY, timeout=1.0) == \
        'http://127.0.0.1:9 did not answer within 1 s'
