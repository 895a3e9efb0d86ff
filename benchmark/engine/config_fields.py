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
from benchmark.engine.config_rules import (Closed, Extra, Free, Rule, Section, Supplied,
                                           _checkpoint_file, _clip_grad, _custom_log, _dict,
                                           _flag, _int_at_least, _int_or_off, _list_of,
                                           _loss_scale, _momentum, _no_loader_shuffle,
                                           _non_negative, _number_in, _one_of, _optional,
                                           _paramwise, _positive, _priority, _probability,
                                           _regex, _signal_name, _signal_names, _template, _text)
from methods.backbones import RESNETS
from methods.mixco import LAMBDA_DISTRIBUTIONS, LAMBDA_SCOPES, PAIRINGS, TARGET_MODES
from methods.unmix import SCHEDULES

SPLITS = ('train', 'val', 'test')
SEED = _int_at_least(0, none_ok=True, below=2 ** 32)  # numpy refuses seeds outside [0, 2**32)
COUNT, SIZE = _int_at_least(0), _int_at_least(1)
MAYBE_FLAG = _optional(_flag)
START_METHODS = ('fork', 'spawn', 'forkserver')
MP_START = _optional(_one_of(START_METHODS, 'start method'))
TEXT = Free('a name or a path inside the run folder; any string')
OWN_DIR = Free("a folder; created when first written (None: the run's work_dir)")
STORAGE = Free("mmengine's storage backend arguments (None: local files)")


MIX = dict(  # MixCo on MoCo-v2 and on SimCLR (methods/mixco_moco.py, mixco_simclr.py)
    mix_temperature=_positive, mix_weight=_non_negative,
    mix_lambda=_one_of(LAMBDA_DISTRIBUTIONS), mix_alpha=_positive,
    mix_lambda_scope=_one_of(LAMBDA_SCOPES), mix_pairing=_one_of(PAIRINGS),
    mix_joint_forward=_flag, mix_in_batch_negatives=_flag, mix_target=_one_of(TARGET_MODES))
VIEW = dict(  # lightly's MoCoV2Transform / SimCLRTransform: the overrides a view dict may give
    input_size=Supplied('the dataset (input_size)'), normalize=Supplied('the view preset'),
    cj_prob=_probability, cj_strength=_non_negative, cj_bright=_non_negative,
    cj_contrast=_non_negative, cj_sat=_non_negative, cj_hue=_number_in(0, 0.5),
    min_scale=_number_in(0, 1, low_open=True), random_gray_scale=_probability,
    gaussian_blur=_probability, sigmas=_list_of(_positive, length=2),
    vf_prob=_probability, hf_prob=_probability, rr_prob=_probability,
    rr_degrees=Free('degrees, or a (min, max) pair; read only when rr_prob > 0'))
SCHEDULE = dict(  # mmengine's _ParamScheduler: every scheduler
    optimizer=Supplied('Runner.build_param_scheduler'),
    param_name=Supplied('the LR / momentum scheduler class'),
    begin=_int_at_least(0), end=_int_at_least(1), last_step=_int_at_least(-1),
    by_epoch=_flag, verbose=_flag,
    convert_to_iter_based=Extra(_flag, 'Runner.build_param_scheduler'))
OPTIMIZER = dict(  # torch.optim: keys shared by SGD, Adam, AdamW
    params=Supplied('the optimizer wrapper constructor (the model parameters)'),
    lr=_positive, weight_decay=_non_negative, maximize=_flag, foreach=MAYBE_FLAG,
    differentiable=_flag, fused=MAYBE_FLAG)
ADAM = dict(betas=_list_of(_momentum, length=2), eps=_positive, amsgrad=_flag, capturable=_flag)
DATA = dict(  # every dataset: where, and which split
    data_root=Free('a folder; the data pre-flight (launch.check_data) names it if it is missing '
                   'or malformed, right after the config and before any image'),
    split=_one_of(SPLITS))
HOOK_INTERVAL = _int_or_off(meaning='no periodic checkpoint (save_last still saves the last)')

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
        load_from=_checkpoint_file, resume=_flag,
        launcher=_one_of(('none', 'pytorch', 'slurm', 'mpi'), 'launcher'),
        env_cfg=Section('the env_cfg entry below'), log_processor=Section('LogProcessor'),
        log_level=_one_of(('DEBUG', 'INFO', 'WARNING', 'ERROR', 'CRITICAL'), 'log level'),
        visualizer=Section('_check_visualizer'), default_scope=Free('a registry scope name'),
        randomness=Section('Runner.set_randomness'), experiment_name=TEXT,
        cfg=Supplied('Runner.from_cfg (the config itself)')),
    'config': dict(  # Runner reads these from its cfg; the last three are the file's own
        model_wrapper_cfg=Section('MMDistributedDataParallel'),
        sync_bn=_optional(_one_of(('torch', 'mmcv'), 'sync_bn implementation')),
        find_unused_parameters=_flag,
        activation_checkpointing=Free('module names to checkpoint; mmengine looks them up'),
        efficient_conv_bn_eval=Free('module names; mmengine looks them up'),
        compile=Section('torch.compile'), _base_=Free('merged by Config.fromfile'),
        custom_imports=Section('_import_custom_modules'),
        vis_backends=Free("a helper variable of configs/_base_/runtime, checked as "
                          "visualizer.vis_backends")),
    'env_cfg': dict(cudnn_benchmark=_flag, mp_cfg=Section('set_multi_processing'),
                    dist_cfg=_optional(_dict),  # init_process_group's arguments: torch checks
                    resource_limit=SIZE),  # them when the processes start, before any data
    'auto_scale_lr': dict(enable=_flag, base_batch_size=SIZE),
    'mmengine.utils.dl_utils.setup_env.set_multi_processing': dict(
        mp_start_method=MP_START, opencv_num_threads=COUNT,
        distributed=Supplied('Runner.setup_env')),
    'mmengine.runner.runner.Runner.set_randomness': dict(
        seed=SEED, diff_rank_seed=_flag, deterministic=_flag),
    'torch.compile': {
        'model': Supplied('Runner (the model)'), 'fullgraph': _flag, 'dynamic': MAYBE_FLAG,
        'backend': Free("a torch.compile backend name ('inductor') or callable"),
        'mode': _optional(_one_of(('default', 'reduce-overhead', 'max-autotune',
                                   'max-autotune-no-cudagraphs'), 'mode')),
        'options': Free('backend options (a dict) for the backend to read'), 'disable': _flag,
        '*': Free("torch.compile's newer arguments, passed through as given")},
    'mmengine.model.wrappers.distributed.MMDistributedDataParallel': {
        'module': Supplied('Runner.wrap_model'), 'detect_anomalous_params': _flag,
        '*': Free("torch DistributedDataParallel's own arguments; torch checks them when it "
                  "wraps the model, before any data")},
    'benchmark.engine.compile_hook.CompileHook': dict(  # torch.compile's, as above
        fullgraph=_flag, dynamic=MAYBE_FLAG,
        backend=Free("a torch.compile backend name ('inductor')"),
        mode=_optional(_one_of(('default', 'reduce-overhead', 'max-autotune',
                                'max-autotune-no-cudagraphs'), 'mode')),
        options=Free('backend options (a dict) for the backend to read')),
    'benchmark.engine.channels_last.ChannelsLastDistributedDataParallel': {
        'module': Supplied('Runner.wrap_model'),
        '*': Free("MMDistributedDataParallel's arguments (the entry above), passed through")},
    # -- model
    'methods.base.EncoderModel': dict(
        backbone=Section('build_resnet'), data_preprocessor=Section('the MODELS registry'),
        init_cfg=Free("mmengine initialisers; checked when the model is built, before data")),
    'methods.backbones.build_resnet': dict(depth=_one_of(tuple(RESNETS), 'depth'),
                                           small_stem=_flag),
    'methods.moco.MoCo': dict(feature_dim=SIZE, queue_size=SIZE, key_momentum=_momentum,
                              temperature=_positive, head_batch_norm=_flag),
    'methods.mixco_moco.MixCoMoCo': MIX,
    'methods.simclr.SimCLR': dict(feature_dim=SIZE, temperature=_positive, joint_forward=_flag,
                                  head_batch_norm=_flag, gather_negatives=_flag, sync_bn=_flag),
    'methods.mixco_simclr.MixCoSimCLR': MIX,
    'methods.imix.IMixMoCo': dict(mix_alpha=_positive, mix_lambda_scope=_one_of(LAMBDA_SCOPES),
                                  mix_lambda_fold=_flag),
    'methods.unmix.UnMixMoCo': dict(mix_alpha=_positive, mix_schedule=_one_of(SCHEDULES),
                                    mix_global_prob=_probability),
    'methods.mochi.MoCHiMoCo': dict(mix_hardest=SIZE, mix_synthetic=COUNT,
                                    mix_query_synthetic=COUNT, mix_warmup_epochs=COUNT),
    'methods.supervised.Supervised': dict(num_classes=_int_at_least(2)),
    'benchmark.evaluation.linear_probe.LinearProbe': dict(num_classes=_int_at_least(2),
                                                          checkpoint=_checkpoint_file),
    'mmengine.model.base_model.data_preprocessor.BaseDataPreprocessor': dict(
        non_blocking=_flag),
    'benchmark.data.gpu_views.GPUViewPreprocessor': dict(
        view=Section('config_check._device_view and check_view_pairing',
                     bad=('bogus', dict(name='linear_train'), dict(name='mocov2', min_scale=0))),
        input_size=_optional(_int_at_least(8)),
        normalize=Free("dict(mean=[3 numbers], std=[3 numbers]) or None; the view preset's "
                       "default is ImageNet's"),
        num_views=SIZE, chunk_size=_optional(SIZE)),
    'lightly.transforms.moco_transform.MoCoV2Transform': VIEW,
    'lightly.transforms.simclr_transform.SimCLRTransform': VIEW,
    # -- data
    'torch.utils.data.dataloader.DataLoader': dict(
        dataset=Section('the DATASETS registry'), batch_size=SIZE,
        shuffle=_no_loader_shuffle,
        sampler=Section('the DATA_SAMPLERS registry'), batch_sampler=Section('DATA_SAMPLERS'),
        num_workers=COUNT, collate_fn=Section('the FUNCTIONS registry'), pin_memory=_flag,
        drop_last=_flag, timeout=_non_negative,
        worker_init_fn=Section('the FUNCTIONS registry (mmengine seeds workers without it)'),
        multiprocessing_context=MP_START,
        generator=Free('a torch.Generator object; configs leave it out (the sampler seeds)'),
        prefetch_factor=_optional(SIZE), persistent_workers=_flag,
        pin_memory_device=Free("a device name ('cuda'); '' follows pin_memory"),
        in_order=_flag,
        num_batch_per_epoch=Extra(SIZE, 'Runner.build_dataloader (a shorter epoch)'),
        disable_subprocess_warning=Extra(_flag, 'Runner.build_dataloader')),
    'benchmark.data.base._ImageDataset': dict(
        input_size=_int_at_least(8),
        view=Section('config_check._view', bad=('bogus', dict(name='bogus'),
                                                dict(name='mocov2', min_scale=0)))),
    'benchmark.data.image_files._FolderDataset': dict(DATA, bad_data=_one_of(BAD_DATA, 'policy')),
    'benchmark.data.arrays.CIFAR10': DATA,
    'benchmark.data.arrays.Digits': DATA,
    'benchmark.data.sampler.ResumableSampler': dict(
        dataset=Supplied('Runner.build_dataloader'), shuffle=_flag, seed=SEED, round_up=_flag),
    'mmengine.dataset.sampler.DefaultSampler': dict(
        dataset=Supplied('Runner.build_dataloader'), shuffle=_flag, seed=SEED, round_up=_flag),
    'mmengine.dataset.utils.default_collate': dict(data_batch=Supplied('the DataLoader')),
    'mmengine.dataset.utils.pseudo_collate': dict(data_batch=Supplied('the DataLoader')),
    # -- loops
    'mmengine.runner.base_loop.BaseLoop': dict(runner=Supplied('Runner.build_*_loop'),
                                               dataloader=Supplied('Runner.build_*_loop')),
    'mmengine.runner.loops.EpochBasedTrainLoop': dict(
        max_epochs=SIZE, val_begin=SIZE, val_interval=SIZE,
        dynamic_intervals=_optional(_list_of(_list_of(SIZE, length=2), min_len=0)),
        by_epoch=Extra(_flag, 'Runner.build_train_loop (in place of type)')),
    'mmengine.runner.loops.IterBasedTrainLoop': dict(
        max_iters=SIZE, val_begin=SIZE, val_interval=SIZE,
        dynamic_intervals=_optional(_list_of(_list_of(SIZE, length=2), min_len=0)),
        by_epoch=Extra(_flag, 'Runner.build_train_loop (in place of type)')),
    'mmengine.runner.loops.ValLoop': dict(evaluator=Supplied('Runner.build_val_loop'), fp16=_flag),
    'mmengine.runner.loops.TestLoop': dict(evaluator=Supplied('Runner.build_test_loop'),
                                           fp16=_flag),
    # -- optimizer and schedule
    'mmengine.optim.optimizer.optimizer_wrapper.OptimWrapper': dict(
        optimizer=Section('the OPTIMIZERS registry'), accumulative_counts=SIZE,
        clip_grad=_clip_grad,
        paramwise_cfg=Extra(_paramwise, 'DefaultOptimWrapperConstructor'),
        constructor=Extra(Free('a registered constructor, which reads the rest its own way'),
                          'Runner.build_optim_wrapper')),
    'mmengine.optim.optimizer.amp_optimizer_wrapper.AmpOptimWrapper': dict(
        loss_scale=_loss_scale,
        dtype=_optional(_one_of(('float16', 'bfloat16', 'float32', 'float64'), 'dtype')),
        use_fsdp=_flag),
    'torch.optim.sgd.SGD': dict(OPTIMIZER, momentum=_momentum, dampening=_probability,
                                nesterov=_flag),
    'torch.optim.adam.Adam': dict(OPTIMIZER, **ADAM, decoupled_weight_decay=_flag),
    'torch.optim.adamw.AdamW': dict(OPTIMIZER, **ADAM),
    'mmengine.optim.scheduler.param_scheduler._ParamScheduler': SCHEDULE,
    'mmengine.optim.scheduler.param_scheduler.CosineAnnealingParamScheduler': dict(
        T_max=_optional(SIZE), eta_min=_optional(_non_negative),
        eta_min_ratio=_optional(_non_negative)),
    'mmengine.optim.scheduler.param_scheduler.MultiStepParamScheduler': dict(
        milestones=_list_of(SIZE, increasing=True), gamma=_positive),
    'mmengine.optim.scheduler.param_scheduler.StepParamScheduler': dict(step_size=SIZE,
                                                                        gamma=_positive),
    'mmengine.optim.scheduler.param_scheduler.LinearParamScheduler': dict(
        start_factor=_number_in(0, 1, low_open=True), end_factor=_number_in(0, 1)),
    'mmengine.optim.scheduler.param_scheduler.ConstantParamScheduler': dict(
        factor=_number_in(0, 1, low_open=True)),
    # -- hooks
    'mmengine.hooks.hook.Hook': dict(priority=Extra(_priority, 'Runner.register_hook')),
    'mmengine.hooks.logger_hook.LoggerHook': dict(
        interval=SIZE, ignore_last=_flag, interval_exp_name=SIZE, out_dir=OWN_DIR,
        out_suffix=Free('file suffixes to copy to out_dir (a string or a list)'),
        keep_local=_flag, file_client_args=STORAGE, log_metric_by_epoch=_flag,
        backend_args=STORAGE),
    'mmengine.hooks.checkpoint_hook.CheckpointHook': dict(
        interval=HOOK_INTERVAL, by_epoch=_flag, save_optimizer=_flag, save_param_scheduler=_flag,
        out_dir=OWN_DIR, max_keep_ckpts=_int_or_off(meaning='keeping every checkpoint'),
        save_last=_flag,
        save_best=Free("a metric name, a list of them or 'auto'; metrics exist only once "
                       "evaluation runs"),
        rule=_optional(_one_of(('greater', 'less'), 'rule')),
        greater_keys=Free('metric names where greater is better'),
        less_keys=Free('metric names where less is better'),
        file_client_args=STORAGE, filename_tmpl=_template, backend_args=STORAGE,
        published_keys=Free('checkpoint keys to keep in a published copy'),
        save_begin=COUNT, **{'**': Closed('they go to Runner.save_checkpoint, which takes no '
                                          'keyword but those the hook passes')}),
    'benchmark.engine.checkpoint_hook.SafeCheckpointHook': dict(iter_interval=COUNT),
    'benchmark.evaluation.knn_monitor.KNNMonitorHook': dict(
        interval=SIZE, num_train=SIZE, num_test=SIZE, k=SIZE, temperature=_positive, seed=SEED,
        batch_size=SIZE, num_workers=COUNT),
    'benchmark.engine.preemption.PreemptionHook': dict(signals=_signal_names),
    'benchmark.evaluation.online_probe.OnlineLinearProbeHook': dict(
        lr=_positive, momentum=_momentum, weight_decay=_non_negative, interval=SIZE,
        num_test=_optional(SIZE), seed=SEED, batch_size=SIZE, num_workers=COUNT),
    'benchmark.harness.fault_hooks.KillHook': dict(  # the fault campaign's
        at_iter=_optional(SIZE), during_save=_optional(SIZE), delay_s=_non_negative,
        during_eval=_flag, rank=COUNT, signal_at_iter=_optional(SIZE), sig=_signal_name),
    'benchmark.harness.fault_hooks.PoisonHook': dict(at_iter=SIZE, rank=COUNT),
    # -- evaluation, logging, visualisation
    'mmengine.evaluator.evaluator.Evaluator': dict(metrics=Section('the METRICS registry')),
    'mmengine.evaluator.metric.BaseMetric': dict(
        collect_device=_one_of(('cpu', 'gpu'), 'device'), prefix=_optional(_text),
        collect_dir=Free('a temporary folder for collecting results across processes')),
    'benchmark.evaluation.linear_metric.LinearAccuracy': dict(topk=_list_of(SIZE)),
    'mmengine.runner.log_processor.LogProcessor': dict(
        window_size=SIZE, by_epoch=_flag, custom_cfg=_custom_log, num_digits=COUNT,
        log_with_hierarchy=_flag, mean_pattern=_regex),
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
