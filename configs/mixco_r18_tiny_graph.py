# MixCo on MoCo-v2, ResNet-18, Tiny-ImageNet, 100 epochs, as mixco_r18_tiny_fast.py, with the
# training step after the views replayed from one CUDA graph (StepGraphHook,
# benchmark/engine/step_graph.py): one CUDA device in one process; eager on a CPU and under DDP.
_base_ = ['./mixco_r18_tiny_fast.py']
custom_hooks = _base_.custom_hooks + [dict(type='StepGraphHook')]
