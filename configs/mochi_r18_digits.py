# MoCHi on MoCo-v2, ResNet-18, digits at 16 px: a demo run. Differs from mocov2_r18_digits.py
# only in the model's type and MoCHi fields, scaled to this demo:
# * the queue holds K = 1024, so N = 1024 would make every entry "hard": N = 64 (a sixteenth
#   of the queue), with s = 64 and s' = 32 keeping the defaults' N : s : s' = 2 : 2 : 1;
# * 30 epochs instead of 100: mixing starts after epoch 3 instead of 10.
_base_ = ['./mocov2_r18_digits.py']
model = dict(type='MoCHiMoCo', mix_hardest=64, mix_synthetic=64, mix_query_synthetic=32,
             mix_warmup_epochs=3)
