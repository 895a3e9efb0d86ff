# MoCo-v2 and MixCo on digits in both regimes: at equal epochs (30, as the demo runs them) and at
# equal training compute (each method at the whole number of epochs whose training FLOPs come
# nearest MoCo-v2's at 30: MixCo's step costs more, so it trains fewer epochs). The demo's
# settings (ResNet-18 at a quarter width, 16 px, one process with the configs' total batch of
# 64); its records count as this suite's (reuse), so the demo's seeds are not trained again.
# The page's last section, 'At equal training compute', gives the verdicts there beside the
# equal-epoch ones (docs/suites.md#runs-at-equal-training-compute).
configs = ['configs/mocov2_r18_digits.py', 'configs/mixco_r18_digits.py']
seeds = [0, 1, 2, 3, 4, 5, 6]
procs = 1
cfg_options = {'train_dataloader.batch_size': 64, 'model.backbone.width': 0.25}
evaluations = ['default']
reuse = ['demo_digits']
budget = dict(baseline='configs/mocov2_r18_digits.py', epochs=30)
