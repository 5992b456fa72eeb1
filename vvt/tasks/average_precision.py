"""Average precision of ranked scores, and its macro mean over classes (mAP), as multi-label video benchmarks
(Charades, AVA) report it.

    average_precision(scores (N,), positives (N,)) -> float: sum over score thresholds of
        (recall_k - recall_{k-1}) * precision_k, tied scores one threshold (scikit-learn's
        `average_precision_score`, no interpolation); NaN without a positive
    per_class_ap(scores (N, C), labels (N, C)) -> (C,) float, NaN for a class with no positive video
    mean_average_precision(scores, labels) -> float: the mean over the classes with at least one positive
"""
import numpy as np


def average_precision(scores: np.ndarray, positives: np.ndarray) -> float:
  """AP of `scores` (N,) against the binary `positives` (N,) (see the module docstring)."""
  scores = np.asarray(scores, np.float64).reshape(-1)
  y = (np.asarray(positives).reshape(-1) > 0).astype(np.float64)
  if y.sum() == 0:
    return float('nan')
  order = np.argsort(-scores, kind='mergesort')
  s, y = scores[order], y[order]
  last = np.r_[np.flatnonzero(np.diff(s)), s.size - 1]  # the last row of each run of tied scores
  tp = np.cumsum(y)[last]
  fp = (last + 1) - tp
  precision = tp / (tp + fp)
  recall = tp / tp[-1]
  return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def per_class_ap(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """(C,) AP of each class (column) of `scores` (N, C) against multi-hot `labels` (N, C); NaN without a
  positive."""
  return np.array([average_precision(scores[:, c], labels[:, c]) for c in range(scores.shape[1])])


def mean_average_precision(scores: np.ndarray, labels: np.ndarray) -> float:
  """The macro mean of `per_class_ap` over the classes with at least one positive (NaN if there is none)."""
  ap = per_class_ap(scores, labels)
  return float(np.nanmean(ap)) if np.isfinite(ap).any() else float('nan')
