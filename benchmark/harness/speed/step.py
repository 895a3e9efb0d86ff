"""One training step of a family member, as the speed harness times it: the method's config,
the model and its SGD optimizer, and the step mmengine's optimizer wrapper takes."""
from pathlib import Path
from typing import Dict, List, Optional

import torch
from mmengine.config import Config
from mmengine.registry import MODELS

from benchmark.engine.channels_last import to_channels_last, use_channels_last
from benchmark.engine.config_file import read_config
from benchmark.engine.train_views import fill_view_size
from benchmark.harness.speed.timing import Settings
from benchmark.layout import method_configs
from benchmark.names import BASELINES, METHOD_LABELS, METHOD_NAMES

# The family: every self-supervised method of benchmark/names.py METHODS, in its order (each
# baseline before its variants), each timed with its config (`method_config`). Name -> label.
FAMILY = tuple(name for name in METHOD_NAMES.values() if name != 'supervised')
METHODS: Dict[str, str] = {m: METHOD_LABELS[m] for m in FAMILY}
# Headline key prefix -> (member, its baseline): mixco_moco_time_ratio, imix_moco_..., ...
PAIRS = {(f'{m}_moco' if base == 'mocov2' else m): (m, base) for m, base in BASELINES.items()
         if m in METHODS}
PRECISIONS = {'fp32': None, 'bf16': torch.bfloat16}  # autocast dtype of a bare step


def method_config(method: str, depth: int, config_dir: Optional[Path] = None) -> Path:
    """The method's Tiny-ImageNet config at `depth`, else its first config (`method_configs`:
    its ResNet-18 Tiny-ImageNet one, else the first by name): a method with no Tiny-ImageNet
    config is timed too (the backbone is the settings' anyway)."""
    configs = method_configs(method, config_dir)
    if not configs:
        raise FileNotFoundError(f'{method}: no configs/{method}_r<depth>_<data>.py to time')
    return next((p for p in configs if p.name == f'{method}_r{depth}_tiny.py'), configs[0])


def model_cfg(method: str, s: Settings) -> Config:
    """The method's config (`method_config`) with the backbone of the settings."""
    cfg = read_config(str(method_config(method, s.depth)))
    cfg.model.backbone = dict(depth=s.depth, small_stem=s.small_stem)
    if 'mix_warmup_epochs' in cfg.model:
        # MoCHi mixes from epoch 10 on; a benchmark times the mixing step, not the warm-up.
        cfg.model.mix_warmup_epochs = 0
    return cfg


def build_step(method: str, s: Settings, device: torch.device):
    """(model, SGD optimizer) built from the method's config, on `device`, in training mode."""
    import methods  # noqa: F401  registers the models
    cfg = model_cfg(method, s)
    fill_view_size(cfg)  # device views (a _digits config) take the data's size, as tools do
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).to(device).train()
    if s.channels_last:
        use_channels_last(model)
    opt_cfg = dict(cfg.optim_wrapper.optimizer)
    opt_cfg.pop('type')
    params = [p for p in model.parameters() if p.requires_grad]
    return model, torch.optim.SGD(params, **opt_cfg)


def train_step(model, optimizer, inputs: List[torch.Tensor],
               dtype: Optional[torch.dtype] = None) -> None:
    """What mmengine's (Amp)OptimWrapper does with the loss dict: sum, backward, step, zero_grad.

    dtype: autocast dtype of the forward (None: float32); bf16 needs no loss scaling.
    """
    with torch.autocast(inputs[0].device.type, dtype=dtype, enabled=dtype is not None):
        losses = model.loss(inputs)
    sum(v for k, v in losses.items() if 'loss' in k).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def step_inputs(inputs: List[torch.Tensor], s: Settings) -> List[torch.Tensor]:
    """The views as a bare step feeds them to `model.loss` (which skips the forward pre-hook)."""
    return to_channels_last(inputs) if s.channels_last else inputs
