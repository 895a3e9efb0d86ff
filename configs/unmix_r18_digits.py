# Un-Mix on MoCo-v2, ResNet-18, digits at 16 px: a demo run. Differs from mocov2_r18_digits.py
# only in the model's type and Un-Mix fields, which keep their paper values (at 16 px a CutMix
# box still spans whole strokes of a digit).
_base_ = ['./mocov2_r18_digits.py']
model = dict(type='UnMixMoCo', mix_alpha=1.0, mix_schedule='alternate')
