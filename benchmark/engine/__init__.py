"""The mmengine run made safe: checkpoints, resume, hooks, pre-emption, wandb; the config checker in `config/`.

| hook (registered name) | file | what it does |
|---|---|---|
| SafeCheckpointHook | checkpoint_hook.py | atomic checkpoints with every process's RNG states, `iter_<n>.pth`, resume mid-epoch, never saves non-finite weights |
| NaNGuardHook | nan_guard.py | stops the run at a non-finite loss term within one logging interval (checked there, at each epoch's end and before every checkpoint save), naming the iteration where it appeared; nothing is saved after it (exit 3, diverged record) |
| DeferredRuntimeInfoHook (default_hooks.runtime_info) | deferred_log.py | mmengine's RuntimeInfoHook, with the step's log variables read from the device once per logging interval (and before checkpoints) instead of every iteration |
| PreemptionHook | preemption.py | SIGTERM/SIGUSR1: finish the step, save through SafeCheckpointHook, exit 143 |
| RunInfoHook | run_info.py | world size, total batch, time per epoch and peak memory into checkpoint meta |
| ProgressHook (registered by tools/train.py, not a config key) | progress.py | epoch, iteration, time per epoch and ETA: a line per epoch (at most one per 30 s within one) and `progress.json` in the work dir |
| ChannelsLastHook | channels_last.py | weights and image batches in NHWC; distributed runs wrap in ChannelsLastDistributedDataParallel (converted before DDP's buckets) |
| CompileHook | compile_hook.py | torch.compile of each ResNet encoder in place (names, so checkpoints, unchanged) |
| StepGraphHook | step_graph.py | the training step after the views replayed from one CUDA graph (one CUDA device, one process; eager elsewhere), captured again when the epoch, the learning rate or the batch's shapes change |
| SafeWandbVisBackend (a vis backend) | tracking.py | wandb online when it can, offline with one warning when it cannot |
| KNNMonitorHook | ../evaluation/knn_monitor.py | kNN accuracy on a fixed subset every n epochs (an evaluation hook) |
| OnlineLinearProbeHook | ../evaluation/online_probe.py | linear head on detached features trained during pretraining; `online_linear/top1` every epoch, recorded as `online_linear` |

Other modules: `config/` (`check`, what a config names built without data, each refusal one
line naming the key; `keywords`, what a component accepts; `rules`, what no constructor can see,
as tables): the pre-flight check; `config_file`: a config file read and `--cfg-options` merged;
`train_views`: where the training views are drawn; `config_text`: a config's text, its identity
and its setting; `launch`: a training run's arguments -> a `PreparedRun` (`prepare_run`: each
step in the module that owns it); `checkpoints`: read a checkpoint file
(every way it can be bad is one line), a backbone or meta strictly, choose the checkpoint
`--resume` continues from; `export`: the evaluated encoder as a torchvision state dict;
`prefetch_loop`: PrefetchViewsTrainLoop, mmengine's epoch loop taking its batches one ahead so
the next batch's device views are drawn during the step (a loop, set by tools/train.py); `compat`: the mmengine 0.10.7 fixes (its log history at a constant cost per update among them); `rng_state`: RNG states as
checkpoint-safe data.
"""
