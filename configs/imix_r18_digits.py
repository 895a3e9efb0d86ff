# i-Mix on MoCo-v2, ResNet-18, digits at 16 px: a demo run. Differs from mocov2_r18_digits.py
# only in the model's type and i-Mix fields, which keep their paper values: i-Mix has no
# separate temperature or weight to rescale, and lambda does not depend on the data size.
_base_ = ['./mocov2_r18_digits.py']
model = dict(type='IMixMoCo', mix_alpha=1.0, mix_lambda_scope='pair', mix_lambda_fold=True)
