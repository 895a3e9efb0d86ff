"""Records of a suite's whole plan with generated numbers, for its pages' tests: the suite is
expanded and planned by benchmark/suites/ (its methods, variants, settings and seeds, each
run's evaluations and protocols, the online probe where the run's config trains one), and each
step gets a record as a finished run writes it, its metrics drawn from a seeded RNG: per seed
a shared level (so paired differences are ordinary), per config/variant an effect, per record
noise, top-1 quantised to the 360 test images of digits; each record also holds its training
step's count (encoder passes and FLOPs per image) as a run records it."""
from typing import Callable, Dict, List, Optional

import numpy as np

from benchmark.names import canonical_data
from benchmark.reports.records import build_record, write_record
from benchmark.suites.plan import RunPlan
from benchmark.suites.spec import Suite

STEP = 100 / 360
ONLINE = 'online_linear'
# A training step's count as evaluate_run records it (extra.compute): images through the
# encoders per training image (with a gradient, without) and FLOPs per image, about the forward
# units times a ResNet-18 forward at 16 px (31.1 MFLOP) and a little for the heads.
IMAGES = {'mocov2': (1.0, 1.0), 'mixco': (1.5, 1.0)}
FORWARD_FLOPS = 31_088_640


def step_count(method: str, batch: int) -> dict:
    grad, keys = IMAGES[method]
    units = 3 * grad + keys
    return dict(batch=batch, images_with_grad=grad, images_without_grad=keys,
                encoder_passes=grad + keys, pass_units=units,
                flops_per_image=round(units * FORWARD_FLOPS * 1.015))


def trains_online_probe(config: str, seen: Dict[str, bool]) -> bool:
    """Whether the config's hooks include the online linear probe (recorded as online_linear)."""
    if config not in seen:
        from benchmark.engine.config_file import read_config
        hooks = read_config(config).get('custom_hooks', [])
        seen[config] = any(h.get('type') == 'OnlineLinearProbeHook' for h in hooks)
    return seen[config]


def _metrics(protocol: str, top1: float, rng: np.random.Generator) -> dict:
    if protocol.startswith('cluster'):
        return {'davies_bouldin': round(3.2 - top1 / 50 + rng.normal(0, 0.02), 4),
                'calinski_harabasz': round(200 + 4 * (top1 - 90) + rng.normal(0, 5), 2),
                'kmeans_nmi': round(0.6 + (top1 - 90) / 100, 4),
                'kmeans_ari': round(0.5 + (top1 - 90) / 100, 4)}
    value = round((top1 + rng.normal(0, 0.4)) / STEP) * STEP
    return {'top1': value, 'top5': min(100.0, value + 6)}


def planned_records(suite: Suite, plans: List[RunPlan], seed: int = 0,
                    train_images: Optional[Callable[..., Optional[int]]] = None) -> List[dict]:
    """One record per run and evaluation of `plans`, written into the suite's results folder,
    as the suite's runs would write them; returns them. `train_images(run)`: the images an
    epoch of the run trains on, so its record holds its total training FLOPs (the step's FLOPs
    per image times them times its epochs); None (or no `train_images`): not counted."""
    rng = np.random.default_rng(seed)
    levels = {s: 90.0 + rng.normal(0, 0.8) for s in suite.seeds}
    effects: Dict[str, float] = {}
    seen: Dict[str, bool] = {}
    written = []
    for plan in plans:
        run, info = plan.run, plan.run.info
        variant = f'{run.config} {run.variant_label}'
        effect = effects.setdefault(variant, 0.0 if info['method'] == 'mocov2'
                                    else float(rng.normal(0.3, 0.5)))
        mixes = info['method'] != 'mocov2'
        for evaluation in suite.evaluations:
            protocols = list(evaluation.protocols)
            if evaluation.is_default and trains_online_probe(run.config, seen):
                protocols.append(ONLINE)
            top1 = levels[run.seed] + effect
            compute = step_count(info['method'], info['total_batch'])
            images = train_images(run) if train_images else None
            if images is not None:
                compute['train_flops'] = compute['flops_per_image'] * images * run.max_epochs
            record = build_record(
                method=info['method'], backbone=info['backbone'],
                pretrain_data=info['pretrain_data'], pretrain_epochs=run.max_epochs,
                eval_data=canonical_data(evaluation.eval_data or info['pretrain_data']),
                seed=run.seed, world_size=info['world_size'], total_batch=info['total_batch'],
                time_s_per_epoch=round((7.0 if mixes else 4.3) + rng.normal(0, 0.2), 3),
                peak_memory_gb=round((1.52 if mixes else 1.51) + rng.normal(0, 0.01), 4),
                config=info['config'], protocols={
                    p: {'settings': {'k': 55} if p == 'knn' else {},
                        'metrics': _metrics(p, top1, rng)} for p in protocols},
                extra=dict(memory_kind='cpu-max-rss',
                           compute=compute))
            record = dict(record, config_sha256=run.config_sha256,
                          setting_sha256=run.setting_sha256, overrides=run.overrides)
            write_record(record, suite.results_dir)
            written.append(record)
    return written
