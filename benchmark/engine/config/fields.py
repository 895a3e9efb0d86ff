"""Every field a config can set and the values it takes: the rule table of the config check.

One entry per parameter of every type a config can name (the suite's models, datasets,
sampler, hooks, view preprocessor and metric; mmengine's loops, hooks, optimizer wrappers,
schedulers, log processor and visualizer; torch's optimizers, DataLoader, DDP and
torch.compile; the backbone and view functions) and per key of the sections mmengine reads
itself (``env_cfg``, ``auto_scale_lr``, the top level). An entry is a range rule (config_rules),
or says why any value of the annotated type is fine (`Free`), that mmengine sets it
(`Supplied`), that it is a section with its own check (`Section`), or that mmengine reads it
around the constructor (`Extra`). Classes inherit their bases' entries; ``'*'`` covers the
parameters of a third-party type not named one by one. tests/engine/test_config_fields.py
asserts that every parameter of every type a config reaches has an entry, and generates the
out-of-range cases from the rules, so a new field cannot arrive without its check.

Keys are qualified names (``module.QualName``), so this table imports none of the types.
"""
from typing import Any, Dict

from benchmark.data.base import BAD_DATA
from benchmark.engine.config.rules import (Closed, Extra, Free, Rule, Section, Supplied,
                                           checkpoint_file, clip_grad, custom_log, a_dict,
                                           flag, int_at_least, int_or_off, list_of,
                                           loss_scale, momentum, no_loader_shuffle,
                                           non_negative, number_in, one_of, optional,
                                           paramwise, positive, priority, probability,
                                           regex, signal_name, signal_names, template, text)
from methods.backbones import RESNETS
from methods.mixco import LAMBDA_DISTRIBUTIONS, LAMBDA_SCOPES, PAIRINGS, TARGET_MODES
from methods.moco import SHUFFLE_BN_MODES
from methods.unmix import SCHEDULES

SPLITS = ('train', 'val', 'test')
SEED = int_at_least(0, none_ok=True, below=2 ** 32)  # numpy refuses seeds outside [0, 2**32)
COUNT, SIZE = int_at_least(0), int_at_least(1)
MAYBE_FLAG = optional(flag)
START_METHODS = ('fork', 'spawn', 'forkserver')
MP_START = optional(one_of(START_METHODS, 'start method'))
TEXT = Free('a name or a path inside the run folder; any string')
OWN_DIR = Free("a folder; created when first written (None: the run's work_dir)")
STORAGE = Free("mmengine's storage backend arguments (None: local files)")


MIX = dict(  # MixCo's arguments, of MixCo on MoCo-v2 and on SimCLR (methods/mixco.py)
    mix_temperature=positive, mix_weight=non_negative,
    mix_lambda=one_of(LAMBDA_DISTRIBUTIONS), mix_alpha=positive,
    mix_lambda_scope=one_of(LAMBDA_SCOPES), mix_pairing=one_of(PAIRINGS),
    mix_joint_forward=flag, mix_in_batch_negatives=flag, mix_target=one_of(TARGET_MODES))
VIEW = dict(  # lightly's MoCoV2Transform / SimCLRTransform: the overrides a view dict may give
    input_size=Supplied('the dataset (input_size)'), normalize=Supplied('the view preset'),
    cj_prob=probability, cj_strength=non_negative, cj_bright=non_negative,
    cj_contrast=non_negative, cj_sat=non_negative, cj_hue=number_in(0, 0.5),
    min_scale=number_in(0, 1, low_open=True), random_gray_scale=probability,
    gaussian_blur=probability, sigmas=list_of(positive, length=2),
    vf_prob=probability, hf_prob=probability, rr_prob=probability,
    rr_degrees=Free('degrees, or a (min, max) pair; read only when rr_prob > 0'))
SCHEDULE = dict(  # mmengine's _ParamScheduler: every scheduler
    optimizer=Supplied('Runner.build_param_scheduler'),
    param_name=Supplied('the LR / momentum scheduler class'),
    begin=int_at_least(0), end=int_at_least(1), last_step=int_at_least(-1),
    by_epoch=flag, verbose=flag,
    convert_to_iter_based=Extra(flag, 'Runner.build_param_scheduler'))
OPTIMIZER = dict(  # torch.optim: keys shared by SGD, Adam, AdamW
    params=Supplied('the optimizer wrapper constructor (the model parameters)'),
    lr=positive, weight_decay=non_negative, maximize=flag, foreach=MAYBE_FLAG,
    differentiable=flag, fused=MAYBE_FLAG)
ADAM = dict(betas=list_of(momentum, length=2), eps=positive, amsgrad=flag, capturable=flag)
DATA = dict(  # every dataset: where, and which split
    data_root=Free('a folder; the data pre-flight (launch.check_data) names it if it is missing '
                   'or malformed, right after the config and before any image'),
    split=one_of(SPLITS))
HOOK_INTERVAL = int_or_off(meaning='no periodic checkpoint (save_last still saves the last)')

FIELDS: Dict[str, Dict[str, Rule]] = {
    # -- the top level: Runner's arguments, the keys it reads from cfg, the config file's own
    'mmengine.runner.runner.Runner': dict(
        model=Section('config_check._check_model'), work_dir=OWN_DIR,
        train_dataloader=Section('_check_loader'), val_dataloader=Section('_check_loader'),
        test_dataloader=Section('_check_loader'), train_cfg=Section('_check_train_loop'),
        val_cfg=Section('_check_eval_loop'), test_cfg=Section('_check_eval_loop'),
        auto_scale_lr=Section('the auto_scale_lr entry below'),
        optim_wrapper=Section('_check_optim_wrapper'), param_scheduler=Section('_check_schedulers'),
        val_evaluator=Section('_check_evaluator'), test_evaluator=Section('_check_evaluator'),
        default_hooks=Section('_check_default_hooks'), custom_hooks=Section('_check_custom_hooks'),
        data_preprocessor=Free("merged into model.data_preprocessor by the Runner"),
        load_from=checkpoint_file, resume=flag,
        launcher=one_of(('none', 'pytorch', 'slurm', 'mpi'), 'launcher'),
        env_cfg=Section('the env_cfg entry below'), log_processor=Section('LogProcessor'),
        log_level=one_of(('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'), 'log level'),
        visualizer=Section('_check_visualizer'), default_scope=Free('a registry scope name'),
        randomness=Section('Runner.set_randomness'), experiment_name=TEXT,
        cfg=Supplied('Runner.from_cfg (the config itself)')),
    'config': dict(  # Runner reads these from its cfg; the last three are the file's own
        model_wrapper_cfg=Section('MMDistributedDataParallel'),
        sync_bn=optional(one_of(('torch', 'mmcv'), 'sync_bn implementation')),
        find_unused_parameters=flag,
        activation_checkpointing=Free('module names to checkpoint; mmengine looks them up'),
        efficient_conv_bn_eval=Free('module names; mmengine looks them up'),
        compile=Section('torch.compile'), _base_=Free('merged by Config.fromfile'),
        custom_imports=Section('_import_custom_modules'),
        vis_backends=Free("a helper variable of configs/_base_/runtime, checked as "
                          "visualizer.vis_backends")),
    'env_cfg': dict(cudnn_benchmark=flag, mp_cfg=Section('set_multi_processing'),
                    dist_cfg=optional(a_dict),  # init_process_group's arguments: torch checks
                    resource_limit=SIZE),  # them when the processes start, before any data
    'auto_scale_lr': dict(enable=flag, base_batch_size=SIZE),
    'mmengine.utils.dl_utils.setup_env.set_multi_processing': dict(
        mp_start_method=MP_START, opencv_num_threads=COUNT,
        distributed=Supplied('Runner.setup_env')),
    'mmengine.runner.runner.Runner.set_randomness': dict(
        seed=SEED, diff_rank_seed=flag, deterministic=flag),
    'torch.compile': {
        'model': Supplied('Runner (the model)'), 'fullgraph': flag, 'dynamic': MAYBE_FLAG,
        'backend': Free("a torch.compile backend name ('inductor') or callable"),
        'mode': optional(one_of(('default', 'reduce-overhead', 'max-autotune',
                                   'max-autotune-no-cudagraphs'), 'mode')),
        'options': Free('backend options (a dict) for the backend to read'), 'disable': flag,
        '*': Free("torch.compile's newer arguments, passed through as given")},
    'mmengine.model.wrappers.distributed.MMDistributedDataParallel': {
        'module': Supplied('Runner.wrap_model'), 'detect_anomalous_params': flag,
        '*': Free("torch DistributedDataParallel's own arguments; torch checks them when it "
                  "wraps the model, before any data")},
    'benchmark.engine.compile_hook.CompileHook': dict(  # torch.compile's, as above
        fullgraph=flag, dynamic=MAYBE_FLAG,
        backend=Free("a torch.compile backend name ('inductor')"),
        mode=optional(one_of(('default', 'reduce-overhead', 'max-autotune',
                                'max-autotune-no-cudagraphs'), 'mode')),
        options=Free('backend options (a dict) for the backend to read')),
    'benchmark.engine.channels_last.ChannelsLastDistributedDataParallel': {
        'module': Supplied('Runner.wrap_model'),
        '*': Free("MMDistributedDataParallel's arguments (the entry above), passed through")},
    # -- model
    'methods.base.EncoderModel': dict(
        backbone=Section('build_resnet'), data_preprocessor=Section('the MODELS registry'),
        init_cfg=Free("mmengine initialisers; checked when the model is built, before data")),
    'methods.backbones.build_resnet': dict(depth=one_of(tuple(RESNETS), 'depth'),
                                           small_stem=flag),
    'methods.moco.MoCo': dict(feature_dim=SIZE, queue_size=SIZE, key_momentum=momentum,
                              temperature=positive, head_batch_norm=flag,
                              shuffle_bn=one_of(SHUFFLE_BN_MODES, 'shuffle_bn mode'),
                              bn_splits=SIZE),  # check._check_bn_splits: it divides the batch
    'methods.mixco.MixCoMixin': MIX,  # MixCoMoCo and MixCoSimCLR take them (as a base)
    'methods.simclr.SimCLR': dict(feature_dim=SIZE, temperature=positive, joint_forward=flag,
                                  head_batch_norm=flag, gather_negatives=flag, sync_bn=flag),
    'methods.imix.IMixMoCo': dict(mix_alpha=positive, mix_lambda_scope=one_of(LAMBDA_SCOPES),
                                  mix_lambda_fold=flag),
    'methods.unmix.UnMixMoCo': dict(mix_alpha=positive, mix_schedule=one_of(SCHEDULES),
                                    mix_global_prob=probability),
    'methods.mochi.MoCHiMoCo': dict(mix_hardest=SIZE, mix_synthetic=COUNT,
                                    mix_query_synthetic=COUNT, mix_warmup_epochs=COUNT),
    'methods.supervised.Supervised': dict(num_classes=int_at_least(2)),
    'benchmark.evaluation.linear_probe.LinearProbe': dict(num_classes=int_at_least(2),
                                                          checkpoint=checkpoint_file),
    'mmengine.model.base_model.data_preprocessor.BaseDataPreprocessor': dict(
        non_blocking=flag),
    'benchmark.data.gpu_views.GPUViewPreprocessor': dict(
        view=Section('check.device_view and views.check_view_pairing',
                     bad=('bogus', dict(name='linear_train'), dict(name='mocov2', min_scale=0))),
        input_size=optional(int_at_least(8)),
        normalize=Free("dict(mean=[3 numbers], std=[3 numbers]) or None; the view preset's "
                       "default is ImageNet's"),
        num_views=SIZE, chunk_size=optional(SIZE)),
    'lightly.transforms.moco_transform.MoCoV2Transform': VIEW,
    'lightly.transforms.simclr_transform.SimCLRTransform': VIEW,
    # -- data
    'torch.utils.data.dataloader.DataLoader': dict(
        dataset=Section('the DATASETS registry'), batch_size=SIZE,
        shuffle=no_loader_shuffle,
        sampler=Section('the DATA_SAMPLERS registry'), batch_sampler=Section('DATA_SAMPLERS'),
        num_workers=COUNT, collate_fn=Section('the FUNCTIONS registry'), pin_memory=flag,
        drop_last=flag, timeout=non_negative,
        worker_init_fn=Section('the FUNCTIONS registry (mmengine seeds workers without it)'),
        multiprocessing_context=MP_START,
        generator=Free('a torch.Generator object; configs leave it out (the sampler seeds)'),
        prefetch_factor=optional(SIZE), persistent_workers=flag,
        pin_memory_device=Free("a device name ('cuda'); '' follows pin_memory"),
        in_order=flag,
        num_batch_per_epoch=Extra(SIZE, 'Runner.build_dataloader (a shorter epoch)'),
        disable_subprocess_warning=Extra(flag, 'Runner.build_dataloader')),
    'benchmark.data.base.ImageDataset': dict(
        input_size=int_at_least(8),
        view=Section('config_check._view', bad=('bogus', dict(name='bogus'),
                                                dict(name='mocov2', min_scale=0)))),
    'benchmark.data.image_files._FolderDataset': dict(DATA, bad_data=one_of(BAD_DATA, 'policy')),
    'benchmark.data.arrays.CIFAR10': DATA,
    'benchmark.data.arrays.Digits': DATA,
    'benchmark.data.sampler.ResumableSampler': dict(
        dataset=Supplied('Runner.build_dataloader'), shuffle=flag, seed=SEED, round_up=flag),
    'mmengine.dataset.sampler.DefaultSampler': dict(
        dataset=Supplied('Runner.build_dataloader'), shuffle=flag, seed=SEED, round_up=flag),
    'mmengine.dataset.utils.default_collate': dict(data_batch=Supplied('the DataLoader')),
    'mmengine.dataset.utils.pseudo_collate': dict(data_batch=Supplied('the DataLoader')),
    # -- loops
    'mmengine.runner.base_loop.BaseLoop': dict(runner=Supplied('Runner.build_*_loop'),
                                               dataloader=Supplied('Runner.build_*_loop')),
    'mmengine.runner.loops.EpochBasedTrainLoop': dict(
        max_epochs=SIZE, val_begin=SIZE, val_interval=SIZE,
        dynamic_intervals=optional(list_of(list_of(SIZE, length=2), min_len=0)),
        by_epoch=Extra(flag, 'Runner.build_train_loop (in place of type)')),
    'mmengine.runner.loops.IterBasedTrainLoop': dict(
        max_iters=SIZE, val_begin=SIZE, val_interval=SIZE,
        dynamic_intervals=optional(list_of(list_of(SIZE, length=2), min_len=0)),
        by_epoch=Extra(flag, 'Runner.build_train_loop (in place of type)')),
    'mmengine.runner.loops.ValLoop': dict(evaluator=Supplied('Runner.build_val_loop'), fp16=flag),
    'mmengine.runner.loops.TestLoop': dict(evaluator=Supplied('Runner.build_test_loop'),
                                           fp16=flag),
    # -- optimizer and schedule
    'mmengine.optim.optimizer.optimizer_wrapper.OptimWrapper': dict(
        optimizer=Section('the OPTIMIZERS registry'), accumulative_counts=SIZE,
        clip_grad=clip_grad,
        paramwise_cfg=Extra(paramwise, 'DefaultOptimWrapperConstructor'),
        constructor=Extra(Free('a registered constructor, which reads the rest its own way'),
                          'Runner.build_optim_wrapper')),
    'mmengine.optim.optimizer.amp_optimizer_wrapper.AmpOptimWrapper': dict(
        loss_scale=loss_scale,
        dtype=optional(one_of(('float16', 'bfloat16', 'float32', 'float64'), 'dtype')),
        use_fsdp=flag),
    'torch.optim.sgd.SGD': dict(OPTIMIZER, momentum=momentum, dampening=probability,
                                nesterov=flag),
    'torch.optim.adam.Adam': dict(OPTIMIZER, **ADAM, decoupled_weight_decay=flag),
    'torch.optim.adamw.AdamW': dict(OPTIMIZER, **ADAM),
    'mmengine.optim.scheduler.param_scheduler._ParamScheduler': SCHEDULE,
    'mmengine.optim.scheduler.param_scheduler.CosineAnnealingParamScheduler': dict(
        T_max=optional(SIZE), eta_min=optional(non_negative),
        eta_min_ratio=optional(non_negative)),
    'mmengine.optim.scheduler.param_scheduler.MultiStepParamScheduler': dict(
        milestones=list_of(SIZE, increasing=True), gamma=positive),
    'mmengine.optim.scheduler.param_scheduler.StepParamScheduler': dict(step_size=SIZE,
                                                                        gamma=positive),
    'mmengine.optim.scheduler.param_scheduler.LinearParamScheduler': dict(
        start_factor=number_in(0, 1, low_open=True), end_factor=number_in(0, 1)),
    'mmengine.optim.scheduler.param_scheduler.ConstantParamScheduler': dict(
        factor=number_in(0, 1, low_open=True)),
    # -- hooks
    'mmengine.hooks.hook.Hook': dict(priority=Extra(priority, 'Runner.register_hook')),
    'mmengine.hooks.logger_hook.LoggerHook': dict(
        interval=SIZE, ignore_last=flag, interval_exp_name=SIZE, out_dir=OWN_DIR,
        out_suffix=Free('file suffixes to copy to out_dir (a string or a list)'),
        keep_local=flag, file_client_args=STORAGE, log_metric_by_epoch=flag,
        backend_args=STORAGE),
    'mmengine.hooks.checkpoint_hook.CheckpointHook': dict(
        interval=HOOK_INTERVAL, by_epoch=flag, save_optimizer=flag, save_param_scheduler=flag,
        out_dir=OWN_DIR, max_keep_ckpts=int_or_off(meaning='keeping every checkpoint'),
        save_last=flag,
        save_best=Free("a metric name, a list of them or 'auto'; metrics exist only once "
                       "evaluation runs"),
        rule=optional(one_of(('greater', 'less'), 'rule')),
        greater_keys=Free('metric names where greater is better'),
        less_keys=Free('metric names where less is better'),
        file_client_args=STORAGE, filename_tmpl=template, backend_args=STORAGE,
        published_keys=Free('checkpoint keys to keep in a published copy'),
        save_begin=COUNT, **{'**': Closed('they go to Runner.save_checkpoint, which takes no '
                                          'keyword but those the hook passes')}),
    'benchmark.engine.checkpoint_hook.SafeCheckpointHook': dict(iter_interval=COUNT),
    'benchmark.engine.deferred_log.DeferredRuntimeInfoHook': dict(interval=optional(SIZE)),
    'benchmark.engine.nan_guard.NaNGuardHook': dict(interval=optional(SIZE)),
    'benchmark.evaluation.knn_monitor.KNNMonitorHook': dict(
        interval=SIZE, num_train=SIZE, num_test=SIZE, k=optional(SIZE), temperature=positive, seed=SEED,
        batch_size=SIZE, num_workers=COUNT),
    'benchmark.engine.preemption.PreemptionHook': dict(signals=signal_names),
    'benchmark.evaluation.online_probe.OnlineLinearProbeHook': dict(
        lr=positive, momentum=momentum, weight_decay=non_negative, interval=SIZE,
        num_test=optional(SIZE), seed=SEED, batch_size=SIZE, num_workers=COUNT),
    'benchmark.harness.faults.hooks.KillHook': dict(  # the fault campaign's
        at_iter=optional(SIZE), during_save=optional(SIZE), delay_s=non_negative,
        during_eval=flag, rank=COUNT, signal_at_iter=optional(SIZE), sig=signal_name),
    'benchmark.harness.faults.hooks.PoisonHook': dict(at_iter=SIZE, rank=COUNT),
    # -- evaluation, logging, visualisation
    'mmengine.evaluator.evaluator.Evaluator': dict(metrics=Section('the METRICS registry')),
    'mmengine.evaluator.metric.BaseMetric': dict(
        collect_device=one_of(('cpu', 'gpu'), 'device'), prefix=optional(text),
        collect_dir=Free('a temporary folder for collecting results across processes')),
    'benchmark.evaluation.linear_metric.LinearAccuracy': dict(topk=list_of(SIZE)),
    'mmengine.runner.log_processor.LogProcessor': dict(
        window_size=SIZE, by_epoch=flag, custom_cfg=custom_log, num_digits=COUNT,
        log_with_hierarchy=flag, mean_pattern=regex),
    'mmengine.visualization.visualizer.Visualizer': dict(
        name=TEXT, image=Free('an image array; configs leave it out'),
        vis_backends=Section('_check_visualizer'), save_dir=OWN_DIR,
        fig_save_cfg=Free('matplotlib figure arguments'),
        fig_show_cfg=Free('matplotlib figure arguments')),
    'mmengine.visualization.vis_backend.BaseVisBackend': dict(
        save_dir=Free("a folder (default: the Visualizer's, in the run's log folder)"),
        name=Extra(TEXT, 'the Visualizer')),
    'mmengine.visualization.vis_backend.LocalVisBackend': dict(
        img_save_dir=TEXT, config_save_file=TEXT, scalar_save_file=TEXT),
    'mmengine.visualization.vis_backend.WandbVisBackend': dict(
        init_kwargs=Free("wandb.init's arguments (project, name...); wandb checks them"),
        define_metric_cfg=Free("wandb.define_metric's arguments"), commit=MAYBE_FLAG,
        log_code_name=Free('a wandb artifact name'), watch_kwargs=Free("wandb.watch's arguments")),
    'benchmark.engine.tracking.SafeWandbVisBackend': dict(log_code=flag),
}


def qualified_name(obj: Any) -> str:
    """``module.QualName`` of a class or function: its key in `FIELDS`."""
    return obj if isinstance(obj, str) else f'{obj.__module__}.{obj.__qualname__}'


def fields_of(obj: Any) -> Dict[str, Rule]:
    """The entries of a class (its bases' first, its own override), a function or a section."""
    chain = reversed(obj.__mro__) if isinstance(obj, type) else [obj]
    merged: Dict[str, Rule] = {}
    for owner in chain:
        merged.update(FIELDS.get(qualified_name(owner), {}))
    return merged
