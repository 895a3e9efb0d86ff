"""Evaluation of a backbone: features, kNN, cluster indices, linear probes, the monitors run during
training, and the after-training evaluation that writes a record."""
