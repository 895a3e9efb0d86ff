"""The wandb run's code artifact: the project's code only, or none (SafeWandbVisBackend.log_code).

A real offline wandb run from a checkout that has a virtualenv inside it: mmengine's backend
saves every .py file under the working directory with the run; ours only benchmark/, methods/,
configs/ and tools/.
"""
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.visualization import Visualizer

from benchmark.engine.tracking import SafeWandbVisBackend, is_project_code
from tests.conftest import needs_wandb

VENV_FILE = '.venv/lib/site_pkg_module.py'  # a name nothing else in the run mentions
PROJECT_FILES = ('benchmark/bench_module.py', 'methods/method_module.py',
                 'configs/config_module.py', 'tools/tool_module.py')
OTHER_FILES = ('data/data_module.py', 'work_dirs/run/copied_module.py', 'loose_module.py')


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A fake checkout as the working directory, wandb offline with its folders in tmp_path."""
    root = tmp_path / 'checkout'
    for name in (VENV_FILE, *PROJECT_FILES, *OTHER_FILES):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f'CONTENT = {path.stem!r}\n')
    monkeypatch.chdir(root)
    monkeypatch.setenv('WANDB_MODE', 'offline')
    monkeypatch.delenv('WANDB_API_KEY', raising=False)
    for var, folder in (('WANDB_DIR', 'wandb_dir'), ('WANDB_DATA_DIR', 'wandb_data'),
                        ('WANDB_CACHE_DIR', 'wandb_cache'), ('WANDB_CONFIG_DIR', 'wandb_config')):
        (tmp_path / folder).mkdir()
        monkeypatch.setenv(var, str(tmp_path / folder))
    return root


def run_with_config(tmp_path: Path, backend: dict) -> bytes:
    """A wandb run as the Runner starts one (add_config), closed; its run file's bytes."""
    vis = Visualizer(name=f'code-{id(backend)}', save_dir=str(tmp_path / 'vis'),
                     vis_backends=[dict(backend, init_kwargs=dict(mode='offline', project='t'))])
    vis.add_config(Config(dict(model=dict(type='MoCo'))))
    vis.add_scalars({'code_test_loss': 1.0}, step=1)
    vis.close()
    import wandb
    wandb.teardown()  # wandb-core writes the run file out when it stops
    runs = list((tmp_path / 'vis').glob('**/wandb/offline-run-*/run-*.wandb'))
    assert len(runs) == 1, runs
    data = runs[0].read_bytes()
    assert b'code_test_loss' in data  # the whole run is in the file
    return data


def saved(run_file: bytes, names) -> list:
    """The names whose file the run file mentions (its code artifact's manifest)."""
    return [name for name in names if Path(name).name.encode() in run_file]


def staged_contents(tmp_path: Path) -> set:
    """What wandb copied into its staging folder (the files an upload would send)."""
    staging = tmp_path / 'wandb_data' / 'artifacts' / 'staging'
    return {p.read_text(errors='replace') for p in staging.glob('*')} if staging.is_dir() else set()


@needs_wandb
def test_run_saves_the_projects_code_and_nothing_from_the_virtualenv(checkout, tmp_path):
    run_file = run_with_config(tmp_path, dict(type='SafeWandbVisBackend'))
    assert saved(run_file, PROJECT_FILES) == list(PROJECT_FILES)  # in the code artifact
    assert saved(run_file, (VENV_FILE, *OTHER_FILES)) == []
    staged = staged_contents(tmp_path)
    assert "CONTENT = 'bench_module'\n" in staged
    assert "CONTENT = 'site_pkg_module'\n" not in staged
    assert "CONTENT = 'data_module'\n" not in staged


@needs_wandb
def test_log_code_off_saves_no_code(checkout, tmp_path):
    run_file = run_with_config(tmp_path, dict(type='SafeWandbVisBackend', log_code=False))
    assert saved(run_file, (VENV_FILE, *PROJECT_FILES, *OTHER_FILES)) == []
    assert not any(text.startswith('CONTENT = ') for text in staged_contents(tmp_path))
    assert b'MoCo' in run_file  # the config itself still reaches the run


def test_project_code_is_the_four_packages_python_files(tmp_path):
    root = str(tmp_path)
    assert is_project_code(f'{root}/benchmark/engine/tracking.py', root)
    assert is_project_code(f'{root}/configs/_base_/runtime/default.py', root)
    assert not is_project_code(f'{root}/benchmark/README.md', root)
    assert not is_project_code(f'{root}/.venv/lib/python3.11/site-packages/benchmark/x.py', root)
    assert not is_project_code(f'{root}/benchmarks/x.py', root)
    assert not is_project_code(f'{root}/setup.py', root)


def test_log_code_must_be_a_flag(tmp_path):
    with pytest.raises(ValueError, match='log_code must be True or False'):
        SafeWandbVisBackend(save_dir=str(tmp_path), log_code='no')
