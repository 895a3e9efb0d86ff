"""Result records: one JSON file per evaluation under ``results/runs/``, the source of truth.

Tables (``tools/leaderboard.py``) are generated from these records and never edited by hand.
A record is written once and never overwritten: ``write_record`` creates the final name with a
hard link (or ``O_EXCL``), so concurrent writers cannot clobber each other and readers never see
a half-written file.

Records hold ``setting_sha256`` (what a run measures: its config without seed, placement and
data paths, and its number of processes) and ``overrides`` (where its config departs from the
shipped file); records written before these fields existed lack them and are read as before.

Metric conventions: accuracies (``top1``, ``top5``) in percent; a metric that could not be
computed is the string ``'NA(<reason>)'`` (NaN/inf become ``'NA(nan)'`` etc., since JSON has no
NaN).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import re
import uuid
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

from benchmark import names
from benchmark.atomic_io import create_new
from benchmark.layout import record_path, records_dir
from benchmark.reports.provenance import git_state, host_info, package_versions

SCHEMA = 1
PROTOCOLS = tuple(names.PROTOCOLS)
REQUIRED_FIELDS = ('schema', 'id', 'created', 'method', 'backbone', 'pretrain_data',
                   'pretrain_epochs', 'eval_data', 'protocols', 'seed', 'world_size',
                   'total_batch', 'time_s_per_epoch', 'peak_memory_gb', 'config', 'checkpoint',
                   'config_sha256', 'status', 'extra', 'versions', 'git', 'host')
# Written since configuration settings exist; older records lack them and stay readable.
SETTING_FIELDS = ('setting_sha256', 'overrides')
_NA = re.compile(r'^NA\(.*\)$')


def _metric_value(protocol: str, name: str, value: Any) -> Any:
    """A float, or an ``'NA(<reason>)'`` string; non-finite floats become NA strings."""
    if isinstance(value, str):
        if not _NA.match(value):
            raise ValueError(f"record: metric {protocol}.{name} is the string {value!r}; "
                             "use a number or 'NA(<reason>)'")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:  # numpy / torch scalars
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f'record: metric {protocol}.{name} must be a number or '
                             f"'NA(<reason>)', got {type(value).__name__}") from None
    value = float(value)
    return value if math.isfinite(value) else f'NA({value})'


def _json_default(obj: Any) -> Any:
    """numpy/torch scalars and arrays, paths and sets as plain JSON values."""
    if hasattr(obj, 'tolist'):
        return obj.tolist()
    if isinstance(obj, (os.PathLike, set, frozenset, tuple)):
        return os.fspath(obj) if isinstance(obj, os.PathLike) else list(obj)
    raise TypeError(f'{type(obj).__name__} is not JSON-serialisable')


def _plain(name: str, value: Any) -> Any:
    """A JSON round trip of ``value``: what the record file will hold, or a one-line error."""
    try:
        return json.loads(json.dumps(value, default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ValueError(f'record: {name} cannot be stored as JSON ({err})') from None


def _check_protocols(protocols: dict) -> Dict[str, dict]:
    """Validate ``{name: {'settings': {...}, 'metrics': {...}}}``; return a normalised copy."""
    if not isinstance(protocols, dict) or not protocols:
        raise ValueError('record: protocols must be a non-empty dict {name: {settings, metrics}}')
    checked = {}
    for name, entry in protocols.items():
        if name not in PROTOCOLS:
            hint = ' (linear_paper or linear_fast?)' if name == 'linear' else ''
            raise ValueError(f'record: unknown protocol {name!r}{hint}; one of {PROTOCOLS}')
        if not isinstance(entry, dict) or not isinstance(entry.get('metrics'), dict):
            raise ValueError(f"record: protocol {name} needs {{'settings': {{}}, 'metrics': {{}}}}")
        settings = entry.get('settings') or {}
        metrics = {k: _metric_value(name, k, v) for k, v in entry['metrics'].items()}
        checked[name] = {'settings': _plain(f'{name} settings', dict(settings)),
                         'metrics': metrics}
    return checked


def new_id(method: str, now: datetime.datetime) -> str:
    """A unique, file-name-safe record id: UTC timestamp, method and a random suffix."""
    safe = re.sub(r'[^A-Za-z0-9_.-]+', '-', method).strip('.-') or 'method'
    return f"{now.strftime('%Y%m%dT%H%M%S%fZ')}-{safe}-{uuid.uuid4().hex[:8]}"


def _check_fields(method: str, backbone: str, pretrain_data: str, eval_data: str, status: str,
                  ints: Dict[str, Any]) -> None:
    """Raise a one-line ValueError for an empty name, a bad status or a non-integer count."""
    for name, value in (('method', method), ('backbone', backbone),
                        ('pretrain_data', pretrain_data), ('eval_data', eval_data)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f'record: {name} must be a non-empty string, got {value!r}')
    if status not in names.STATUSES:
        raise ValueError(f'record: status {status!r} is not one of {names.STATUSES}')
    for name, value in ints.items():
        unknown_ok = name in ('world_size', 'total_batch') and value is None
        if not unknown_ok and (isinstance(value, bool) or not isinstance(value, int)):
            raise ValueError(f'record: {name} must be an int, got {value!r}')


def _optional_float(name: str, value: Optional[float]) -> Optional[float]:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f'record: {name} must be finite or None, got {value}')
    return value


def build_record(*, method: str, backbone: str, pretrain_data: str, pretrain_epochs: int,
                 eval_data: str, protocols: dict, seed: int, world_size: Optional[int],
                 total_batch: Optional[int],
                 time_s_per_epoch: Optional[float] = None,
                 peak_memory_gb: Optional[float] = None, config: Optional[str] = None,
                 checkpoint: Optional[str] = None, config_text: Optional[str] = None,
                 status: str = 'ok', extra: Optional[dict] = None,
                 data_skipped: Optional[int] = None, setting_text: Optional[str] = None,
                 overrides: Optional[dict] = None,
                 views: Optional[str] = None) -> Dict[str, Any]:
    """A validated result record with id, timestamp, versions, git state and host added.

    Args:
        method: A record name of ``names.METHODS`` ('mocov2', 'mixco' (MixCo on MoCo-v2),
            ...), ``names.RANDOM_INIT``, or an external method's name.
        backbone: E.g. 'resnet18'.
        pretrain_data: E.g. 'tiny-imagenet', 'imagenet', 'digits'.
        pretrain_epochs: Pretraining epochs of the evaluated checkpoint.
        eval_data: Dataset of the evaluation, e.g. 'tiny-imagenet', 'cifar10', 'cifar100'.
        protocols: ``{name: {'settings': {...}, 'metrics': {...}}}``, name in ``PROTOCOLS``;
            metric values are numbers (accuracies in percent) or ``'NA(<reason>)'``.
        seed: Pretraining seed.
        world_size: Number of pretraining processes (None: unknown).
        total_batch: Pretraining batch summed over processes (None: unknown).
        time_s_per_epoch: Mean pretraining wall time per epoch in seconds.
        peak_memory_gb: Peak accelerator memory per process in GB.
        config: Path of the pretraining config.
        checkpoint: Path of the evaluated checkpoint.
        config_text: The config's full text (dumped); only its sha256 is stored.
        setting_text: The config without seed, placement and data paths
            (``config_text.config_setting``); stored as ``setting_sha256``, its sha256 together with
            the world size: what leaderboards group a row by. None: the record has no setting
            (grouped by method, as records written without one).
        overrides: {dotted key: value} where the config departs from its file as shipped;
            labels the record's row.
        status: 'ok', 'diverged' or 'failed'.
        extra: Any further JSON-serialisable data.
        data_skipped: Image files the pretraining data left out (``bad_data='skip'``); stored
            as ``extra['data_skipped']`` (the top-level fields are a fixed schema). None:
            unknown, not stored.
        views: Where the pretraining views were drawn, 'device' (the model's data
            preprocessor) or 'loader' (PIL in the loader workers); stored as
            ``extra['views']``. None: unknown, not stored.

    Returns:
        The record (a JSON-serialisable dict with every key of ``REQUIRED_FIELDS``).

    Raises:
        ValueError: A field has the wrong type or an unknown protocol/status.
    """
    ints = dict(pretrain_epochs=pretrain_epochs, seed=seed, world_size=world_size,
                total_batch=total_batch)
    _check_fields(method, backbone, pretrain_data, eval_data, status, ints)
    if data_skipped is not None:
        if isinstance(data_skipped, bool) or not isinstance(data_skipped, int) or data_skipped < 0:
            raise ValueError(f'record: data_skipped must be an int >= 0, got {data_skipped!r}')
        extra = dict(extra or {}, data_skipped=data_skipped)
    if views is not None:
        if views not in ('device', 'loader'):
            raise ValueError(f"record: views must be 'device' or 'loader', got {views!r}")
        extra = dict(extra or {}, views=views)
    now = datetime.datetime.now(datetime.timezone.utc)
    config_sha = (hashlib.sha256(config_text.encode()).hexdigest()
                  if config_text is not None else None)
    record = dict(schema=SCHEMA, id=new_id(method, now), created=now.isoformat(),
                  method=method, backbone=backbone, pretrain_data=pretrain_data,
                  eval_data=eval_data, protocols=_check_protocols(protocols), **ints,
                  time_s_per_epoch=_optional_float('time_s_per_epoch', time_s_per_epoch),
                  peak_memory_gb=_optional_float('peak_memory_gb', peak_memory_gb),
                  config=config, checkpoint=checkpoint, config_sha256=config_sha,
                  setting_sha256=setting_sha256(setting_text, world_size),
                  overrides=_plain('overrides', dict(overrides or {})),
                  status=status, extra=_plain('extra', dict(extra or {})),
                  versions=package_versions(),
                  git=git_state(), host=host_info())
    return record


def setting_sha256(setting_text: Optional[str], world_size: Optional[int]) -> Optional[str]:
    """The sha256 of a setting's text and its number of processes (None without a text)."""
    if setting_text is None:
        return None
    return hashlib.sha256(f'{setting_text}\n# processes: {world_size}\n'.encode()).hexdigest()


def write_record(record: Dict[str, Any], results_dir: str = 'results') -> Path:
    """Write ``record`` to ``results_dir/runs/<id>.json`` atomically, never overwriting.

    Args:
        record: A record from ``build_record``.
        results_dir: The results folder; ``runs/`` is created inside it if needed.

    Returns:
        The path of the new file.

    Raises:
        FileExistsError: A record with this id exists already (it is left unchanged).
        ValueError: The record has no usable id or is not JSON-serialisable.
    """
    rid = record.get('id')
    if not isinstance(rid, str) or not re.fullmatch(r'[A-Za-z0-9_.-]+', rid) or rid[0] == '.':
        raise ValueError(f'record: id {rid!r} is not a file-name-safe string; use build_record')
    final = record_path(results_dir, rid)
    if final.exists():  # cheap early check; create_new is what guarantees it
        raise FileExistsError(f'record {final} exists already; records are never overwritten')
    data = (json.dumps(record, indent=1, sort_keys=True, allow_nan=False) + '\n').encode()
    try:
        create_new(str(final), data)
    except FileExistsError:
        raise FileExistsError(f'record {final} exists already; records are never '
                              'overwritten') from None
    return final


def _problem(record: Any) -> Optional[str]:
    """Why ``record`` is not a usable record, or None."""
    if not isinstance(record, dict):
        return f'not a JSON object but {type(record).__name__}'
    missing = [key for key in REQUIRED_FIELDS if key not in record]
    if missing:
        return f'missing field(s) {", ".join(missing)}'
    if record['schema'] != SCHEMA:
        return f"schema {record['schema']!r} is not {SCHEMA}"
    if not isinstance(record['created'], str) or not isinstance(record['protocols'], dict):
        return 'created is not a string or protocols is not an object'
    if not all(isinstance(entry, dict) and isinstance(entry.get('metrics'), dict)
               for entry in record['protocols'].values()):
        return "a protocol has no 'metrics' object"
    if not isinstance(record['pretrain_epochs'], int) or not isinstance(record['seed'], int):
        return 'pretrain_epochs or seed is not an integer'
    return None


def load_records(results_dir: str = 'results') -> List[Dict[str, Any]]:
    """All valid records in ``results_dir/runs/*.json``, oldest first.

    Files that are not valid JSON records are skipped with a one-line warning.
    """
    records = []
    for path in sorted(records_dir(results_dir).glob('*.json')):
        try:
            record = json.loads(path.read_text(encoding='utf-8'))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            warnings.warn(f'skipping {path}: not valid JSON ({err})', stacklevel=2)
            continue
        problem = _problem(record)
        if problem:
            warnings.warn(f'skipping {path}: {problem}', stacklevel=2)
            continue
        records.append(record)
    return sorted(records, key=lambda r: (r['created'], r['id']))
