"""The floor plan: where a run writes what, named once.

A training run writes ``work_dirs/<config stem>/`` (checkpoints, ``last_checkpoint``, logs, the
``preempted`` marker, the wandb run id, ``tsne.png``); each evaluation writes one record
``<results dir>/runs/<id>.json`` and its figures and report into ``<results dir>/runs/<id>/``;
the leaderboard renders ``<results dir>/leaderboard.{md,csv}``.

A suite (``configs/suites/<name>.py``, ``tools/run_suite.py``) trains each of its runs in
``work_dirs/suites/<name>/<run>/`` (with the suite's logs and markers beside the checkpoints)
and keeps its records and tables in ``results/suites/<name>/`` (``runs/*.json``,
``leaderboard.{md,csv}``, ``curves.png``).
"""
import os
import os.path as osp
import re
import shlex
import time
from pathlib import Path
from typing import List, Mapping, Optional, Sequence, Union

from benchmark.names import METHOD_NAMES

REPO_ROOT = Path(__file__).resolve().parents[1]


def attempt_header(command: Union[str, Sequence[str]]) -> str:
    """The line that opens an attempt in a log: `ATTEMPT_MARK`, the time, the command (a
    list is quoted as a shell would read it)."""
    command = command if isinstance(command, str) else shlex.join(command)
    return f"{ATTEMPT_MARK}{time.strftime('%Y-%m-%d %H:%M:%S')} {command}\n"


def import_path(env: Optional[Mapping[str, str]] = None) -> str:
    """PYTHONPATH for a subprocess that runs the checkout: its root first, then whatever the
    environment already had (packages installed with `pip --target` there, as on a GPU machine
    whose wheels are carried in, stay importable)."""
    current = (os.environ if env is None else env).get('PYTHONPATH')
    return os.pathsep.join([str(REPO_ROOT)] + ([current] if current else []))

CONFIG_DIR = REPO_ROOT / 'configs'
EVAL_CONFIG_DIR = CONFIG_DIR / 'eval'

WORK_DIRS = 'work_dirs'
LAST_CHECKPOINT = 'last_checkpoint'  # in the work dir: path of the newest complete checkpoint
PREEMPTED_MARKER = 'preempted'  # in the work dir after a SIGTERM/SIGUSR1 exit (code 143)
WANDB_RUN_ID_FILE = 'wandb_run_id'  # in the work dir: a resumed run logs into the same wandb run
TSNE_FIGURE = 'tsne.png'
EPOCH_CHECKPOINT = 'epoch_{}.pth'
ITER_CHECKPOINT = 'iter_{}.pth'
SCAN_CACHE = '.image_scan.json'  # in a data root: results of the image pre-flight check

RESULTS_DIR = 'results'
RECORDS = 'runs'  # <results dir>/runs/<id>.json, figures in <results dir>/runs/<id>/
REPORT = 'report.md'  # in <results dir>/runs/<id>/
LEADERBOARD = 'leaderboard'  # <results dir>/leaderboard.md and .csv
PAPER_RESULTS = REPO_ROOT / 'results' / 'paper_results.csv'

SUITE_CONFIG_DIR = CONFIG_DIR / 'suites'
SUITES = 'suites'  # work_dirs/suites/<suite>/<run>/ and <results>/suites/<suite>/
SUITE_RUN_FILE = 'suite_run.json'  # in a run's work dir: the config hash it was started with
SUITE_TRAIN_LOG = 'suite_train.log'  # in a run's work dir: training output, every attempt
SUITE_EVAL_LOG = 'suite_eval_{}.log'  # in a run's work dir: one evaluation's output
ATTEMPT_MARK = '\n==== '  # in a log: opens one attempt's output, '==== <time> <command>'
SLURM_JOB_FILE = 'slurm_job_id'  # in a run's work dir: its array task's SLURM job id
SLURM_SUBMITTING_FILE = 'slurm_submitting'  # in a run's work dir: a submission not yet recorded
SNAPSHOT_SOURCE_FILE = 'SOURCE.json'  # in a code snapshot's root: the checkout's git state
SUITE_CURVES = 'curves.png'  # in <results>/suites/<suite>/: monitor curves, mean and spread
SEQUENTIAL_FILE = 'sequential.json'  # in <results>/suites/<suite>/: --until-decided's design, looks


def config_method(name: str) -> Optional[str]:
    """The method a config is for, by its file name ``<method>_r<depth>_<data>...py``: the
    longest record name of benchmark/names.py ``METHODS`` that, with a ``_``, starts the name
    (``mixco_simclr_r18_tiny.py`` is MixCo on SimCLR's, not MixCo's); None where none does."""
    return next((method for method in sorted(METHOD_NAMES.values(), key=len, reverse=True)
                 if name.startswith(f'{method}_')), None)


def method_configs(method: str, config_dir: Optional[Path] = None) -> List[Path]:
    """The ``configs/<method>_r<depth>_*.py`` of a method (by `config_method`), its
    ``<method>_r18_tiny.py`` first, the others by name."""
    found = [path for path in Path(config_dir or CONFIG_DIR).glob(f'{method}_*.py')
             if config_method(path.name) == method
             and re.match(r'_r\d+_', path.name[len(method):])]
    return sorted(found, key=lambda path: (path.name != f'{method}_r18_tiny.py', path.name))


def config_stem(config_path: str) -> str:
    """configs/mixco_r18_tiny.py -> mixco_r18_tiny."""
    return osp.splitext(osp.basename(config_path))[0]


def default_work_dir(config_path: str) -> str:
    """work_dirs/<config stem>."""
    return osp.join(WORK_DIRS, config_stem(config_path))


def epoch_checkpoint(work_dir: str, epoch: int) -> str:
    """<work dir>/epoch_<n>.pth."""
    return osp.join(work_dir, EPOCH_CHECKPOINT.format(epoch))


def records_dir(results_dir: str) -> Path:
    """<results dir>/runs: one JSON record per evaluation."""
    return Path(results_dir) / RECORDS


def record_path(results_dir: str, record_id: str) -> Path:
    """<results dir>/runs/<id>.json."""
    return records_dir(results_dir) / f'{record_id}.json'


def run_folder(results_dir: str, record_id: str) -> Path:
    """<results dir>/runs/<id>/: the record's figures and report."""
    return records_dir(results_dir) / record_id


def leaderboard_paths(results_dir: str) -> tuple:
    """(<results dir>/leaderboard.md, <results dir>/leaderboard.csv)."""
    base = Path(results_dir) / LEADERBOARD
    return base.with_suffix('.md'), base.with_suffix('.csv')


def display_path(path) -> str:
    """`path` relative to the repository root where it lies inside it (as the docs name it),
    else as given."""
    try:
        return str(Path(path).resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def suite_config(name_or_path: str) -> Path:
    """A suite file: a path as given, or configs/suites/<name>.py for a bare name."""
    path = Path(name_or_path)
    if path.suffix == '.py' or path.exists():
        return path
    return SUITE_CONFIG_DIR / f'{name_or_path}.py'


def suite_results_dir(suite: str, results_root: str = RESULTS_DIR) -> Path:
    """<results root>/suites/<suite>: the suite's records (runs/), tables and curves."""
    return Path(results_root) / SUITES / suite


def suite_work_dir(suite: str, run: str, work_root: str = WORK_DIRS) -> Path:
    """<work root>/suites/<suite>/<run>: one run's checkpoints, logs and suite markers."""
    return Path(work_root) / SUITES / suite / run
