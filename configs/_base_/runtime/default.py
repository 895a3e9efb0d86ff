# Runtime shared by every run: hooks, logging, seeding, distributed backend.
custom_imports = dict(imports=['methods', 'benchmark.components'], allow_failed_imports=False)

default_hooks = dict(
    # mmengine's RuntimeInfoHook, but the step's loss terms are read from the device once per
    # logging interval (and before checkpoints), not after every iteration.
    runtime_info=dict(type='DeferredRuntimeInfoHook'),
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # Atomic writes, RNG states of every process, and iter_<n>.pth every iter_interval
    # iterations (only the newest kept), so a kill loses at most that many iterations.
    checkpoint=dict(type='SafeCheckpointHook', interval=1, max_keep_ckpts=3, save_last=True,
                    iter_interval=200),
    sampler_seed=dict(type='DistSamplerSeedHook'),
)
# RunInfoHook stores world size, time per epoch and peak memory in checkpoint meta.
# KNNMonitorHook logs knn_monitor/top1 of 1,000 train / 500 val images every 10 epochs and
# after the last one.
# NaNGuardHook stops the run at a non-finite loss within one logging interval, before anything
# is saved; PreemptionHook turns SIGTERM/SIGUSR1 into checkpoint + exit 143.
custom_hooks = [dict(type='RunInfoHook'), dict(type='KNNMonitorHook', interval=10),
                dict(type='NaNGuardHook'), dict(type='PreemptionHook')]
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    # NCCL on GPUs; tools/train.py switches to gloo when the processes have no GPU.
    dist_cfg=dict(backend='nccl'),
)
log_processor = dict(window_size=50, by_epoch=True)
log_level = 'INFO'
# wandb: online with credentials (WANDB_API_KEY / `wandb login`), else offline under the work
# dir with one warning (tools/train.py decides; WANDB_MODE=disabled turns it off).
# SafeWandbVisBackend: mmengine's WandbVisBackend, but an unreachable server or refused
# credentials mean one warning and offline logging instead of a crashed run.
vis_backends = [dict(type='LocalVisBackend'), dict(type='SafeWandbVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
# diff_rank_seed: each process draws its own augmentations and MixCo lambdas (seed + rank).
randomness = dict(seed=0, diff_rank_seed=True, deterministic=False)
load_from = None
resume = False
