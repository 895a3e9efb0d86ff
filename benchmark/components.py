"""Importing this module registers every type a config can name in mmengine's registries.

Configs say ``custom_imports = dict(imports=['methods', 'benchmark.components'])`` and nothing
else, so modules can move inside the package without breaking a config.
"""
import methods  # noqa: F401  models: MoCo, MixCoMoCo, SimCLR, MixCoSimCLR, Supervised
from benchmark import data  # noqa: F401  datasets and ResumableSampler
from benchmark.data import gpu_views  # noqa: F401  GPUViewPreprocessor
from benchmark.engine import (channels_last, checkpoint_hook, compat, compile_hook,  # noqa: F401
                              deferred_log, nan_guard, preemption, prefetch_loop, run_info,
                              step_graph, tracking)
from benchmark.evaluation import knn_monitor, linear_metric, linear_probe, online_probe  # noqa: F401

IMPORTS = ['methods', 'benchmark.components']  # what a config's custom_imports lists
