"""A config file read (`read_config`), its modules imported (`import_custom_modules`) and
--cfg-options merged (`CfgOptionsAction`, `merge_options`): each failure one ConfigError line."""
import importlib
import os
from typing import Optional

from mmengine.config import Config, DictAction

from benchmark import dist
from benchmark.cli import one_line
from benchmark.engine.config.keywords import ConfigError, check_keys, require_dict

# Module paths that configs of earlier versions of the suite listed in custom_imports.
OLD_MODULES = ('benchmark.datasets', 'benchmark.sampler', 'benchmark.hooks',
               'benchmark.knn_monitor', 'benchmark.checkpoint_hook', 'benchmark.preemption',
               'benchmark.tracking', 'benchmark.nan_guard', 'benchmark.linear_metric',
               'methods.linear_probe', 'benchmark.views', 'benchmark.fault_hooks')


def read_config(path: str) -> Config:
    """`Config.fromfile`, a bad file (missing, a syntax error, a module of custom_imports that
    does not import) as one ConfigError line."""
    if not os.path.isfile(path):
        raise ConfigError(f'config {path} not found; see configs/ for the list')
    try:
        cfg = Config.fromfile(path, import_custom_modules=False)
    except SyntaxError as err:
        where = err.filename if err.filename and err.filename != '<unknown>' else path
        line = f', line {err.lineno}' if err.lineno else ''
        raise ConfigError(f'{where}{line}: Python syntax error: {err.msg}') from None
    except (OSError, KeyError, TypeError, ValueError, AttributeError, NameError,
            ImportError) as err:
        raise ConfigError(f'config {path}: {type(err).__name__}: {one_line(err)}') from None
    import_custom_modules(cfg.get('custom_imports'))  # one line per module that fails
    return cfg


class CfgOptionsAction(DictAction):
    """mmengine's DictAction, but a malformed KEY=VALUE is one `error:` line and exit code 2."""

    def __call__(self, parser, namespace, values, option_string=None):
        for item in values:
            try:
                if '=' not in item or not item.split('=', 1)[0]:
                    raise ValueError('expected KEY=VALUE')
                super().__call__(parser, namespace, [item], option_string)
            except (ValueError, AssertionError) as err:
                if dist.is_main():
                    parser.exit(2, f'error: {option_string} {item!r}: {one_line(err)}\n')
                parser.exit(2)


def merge_options(cfg: Config, options: dict) -> None:
    """`cfg.merge_from_dict(options)`, with a merge that cannot apply as one ConfigError line
    (and the modules of a custom_imports it changes imported, as `read_config` does)."""
    try:
        cfg.merge_from_dict(options)
    except (KeyError, TypeError, AssertionError) as err:
        raise ConfigError(f'--cfg-options: {one_line(err)}') from None
    if any(key.split('.')[0] == 'custom_imports' for key in options):
        import_custom_modules(cfg.get('custom_imports'))


def import_custom_modules(custom: Optional[dict]) -> None:
    """Import the modules custom_imports names (read_config leaves them to this: one line)."""
    if custom is None:
        return
    require_dict(custom, 'custom_imports')
    check_keys(custom, {'imports', 'allow_failed_imports'}, 'custom_imports')
    imports = custom.get('imports', [])
    for name in [imports] if isinstance(imports, str) else imports:
        try:
            importlib.import_module(name)
        except ImportError as err:
            if custom.get('allow_failed_imports', False):
                continue
            if name in OLD_MODULES:
                raise ConfigError(f'custom_imports.imports: {name!r} no longer exists; configs '
                                  "import only methods and benchmark.components (custom_imports "
                                  "= dict(imports=['methods', 'benchmark.components']))") from None
            raise ConfigError(f'custom_imports.imports: cannot import {name!r} '
                              f'({one_line(err)})') from None
