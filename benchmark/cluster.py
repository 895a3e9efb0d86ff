"""Public face of the cluster indices (docs/design.md, "Public contracts"); the code lives in
benchmark/evaluation/cluster.py."""
from benchmark.evaluation.cluster import cluster_scores  # noqa: F401
