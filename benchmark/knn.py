"""Public face of the weighted kNN (docs/design.md, "Public contracts"); the code lives in
benchmark/evaluation/knn.py."""
from benchmark.evaluation.knn import knn_predict  # noqa: F401
