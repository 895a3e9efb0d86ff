"""Evaluation of a backbone: features, kNN, cluster indices, linear probes, the monitors run during
training, and the after-training evaluation that writes a record (with one training step's count
of encoder passes and FLOPs, step_cost.py)."""
