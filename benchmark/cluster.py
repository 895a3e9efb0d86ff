"""Public face of the cluster indices (DESIGN.md contract); the code lives in benchmark/evaluation/cluster.py."""
from benchmark.evaluation.cluster import cluster_scores  # noqa: F401
