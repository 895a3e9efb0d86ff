"""Public face of the weighted kNN (DESIGN.md contract); the code lives in benchmark/evaluation/knn.py."""
from benchmark.evaluation.knn import knn_accuracy, knn_predict  # noqa: F401
