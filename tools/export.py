"""Export a checkpoint's encoder (the one the evaluations use) for torchvision's ResNet.

python tools/export.py work_dirs/mixco_r18_tiny/epoch_100.pth --format safetensors
python tools/export.py work_dirs/mixco_r18_tiny --format torchvision --out mixco_r18.pth
python tools/export.py authors.pth.tar --format torchvision --config configs/mixco_r18_tiny.py
python tools/export.py random --format torchvision --config configs/mixco_r18_digits.py

Writes the weights and, beside them, ``<weights>.json``: the line that builds the torchvision
model they load into, the stem, how the run's evaluations feed it (input size, grey to RGB,
resize, centre crop, normalisation, and all of it as one torchvision transform) and the
checkpoint's sha256 (see docs/evaluation.md).
"""
import sys

import benchmark.components  # noqa: F401  registers every type a config can name
from benchmark.cli import ArgumentParser, existing_file, run_tool
from benchmark.engine.config.check import validate_config
from benchmark.engine.config.keywords import ConfigError
from benchmark.engine.config_file import CfgOptionsAction, merge_options, read_config
from benchmark.engine.export import FORMATS, export_backbone


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('checkpoint', help="a checkpoint file (ours, the MixCo/MoCo authors', "
                        "torchvision's), a work dir (its newest checkpoint), or 'random' (the "
                        'seeded random encoder of --config)')
    parser.add_argument('--format', required=True, choices=list(FORMATS),
                        help='torchvision: a torch.save state dict (.pth); safetensors')
    parser.add_argument('--out', help='the weights file, or a folder for the default name '
                        '(default: <checkpoint name>_backbone.<pth|safetensors> beside the '
                        'checkpoint); the sidecar is <weights>.json')
    parser.add_argument('--config', type=existing_file, help='the pretraining config: needed '
                        "for 'random' and checkpoints without one (ours carry theirs)")
    parser.add_argument('--cfg-options', nargs='+', action=CfgOptionsAction, default={},
                        help="overrides of --config (e.g. randomness.seed=1 for 'random')")
    parser.add_argument('--force', action='store_true', help='replace existing output files')
    parser.add_argument('--debug', action='store_true', help='show tracebacks of errors')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.cfg_options and not args.config:
        raise ValueError('--cfg-options needs --config')
    config = None
    if args.config:
        try:
            config = read_config(args.config)
            merge_options(config, args.cfg_options)
            validate_config(config)
        except ConfigError as err:
            raise ConfigError(f'{args.config}: {err}') from None
    paths = export_backbone(args.checkpoint, args.format, args.out, config, args.force)
    print(f'weights: {paths[0]}')
    print(f'sidecar: {paths[1]}')
    return 0


if __name__ == '__main__':
    sys.exit(run_tool(main))
