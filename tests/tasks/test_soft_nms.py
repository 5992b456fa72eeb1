"""Soft-NMS against the published algorithm written here as ActionFormer's in-place loop (swap the best to the front,
decay the rest, swap a dropped segment with the last), on distinct scores."""
import math

import numpy as np
import pytest

from vvt.tasks import soft_nms


def _reference(segments, scores, sigma, min_score):
  x = [list(s) + [float(p), i] for i, (s, p) in enumerate(zip(segments, scores, strict=True))]
  n, out = len(x), []
  for i in range(len(x)):
    if i >= n:
      break
    best = max(range(i, n), key=lambda j: x[j][2])
    x[i], x[best] = x[best], x[i]
    out.append((x[i][3], x[i][2]))
    pos = i + 1
    while pos < n:
      a, b = x[i], x[pos]
      inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
      la, lb = a[1] - a[0] + 1e-6, b[1] - b[0] + 1e-6
      b[2] *= math.exp(-(inter / (la + lb - inter)) ** 2 / sigma)
      if b[2] < min_score:
        x[pos] = x[n - 1]
        n -= 1
        continue
      pos += 1
  return out


def test_gaussian_soft_nms_matches_the_in_place_loop():
  rng = np.random.default_rng(1)
  for _ in range(20):
    n = int(rng.integers(1, 25))
    starts = rng.uniform(0, 40, n)
    segments = np.stack([starts, starts + rng.uniform(0.5, 15, n)], 1)
    scores = rng.permutation(np.linspace(0.02, 0.98, n))
    options = soft_nms.NmsOptions(sigma=float(rng.choice([0.3, 0.5, 0.9])), min_score=0.05, max_segments=0)
    kept, kept_scores = soft_nms.suppress(segments, scores, options)
    want = _reference(segments, scores, options.sigma, options.min_score)
    assert kept.tolist() == [i for i, _ in want]
    np.testing.assert_allclose(kept_scores, [s for _, s in want], rtol=1e-12)


def test_a_copy_is_decayed_and_a_distant_segment_is_not():
  segments = [[0, 10], [0, 10], [50, 60]]
  kept, scores = soft_nms.suppress(segments, [0.9, 0.8, 0.7], soft_nms.NmsOptions(sigma=0.5, min_score=0.001))
  assert kept.tolist() == [0, 2, 1]
  assert scores[1] == pytest.approx(0.7)
  assert scores[2] == pytest.approx(0.8 * math.exp(-1 / 0.5), rel=1e-5)


def test_hard_nms_drops_overlaps_above_the_threshold_and_the_cap_keeps_the_best():
  segments = [[0, 10], [1, 11], [8, 18], [50, 60]]
  options = soft_nms.NmsOptions(method='hard', iou_threshold=0.5, min_score=0.0, max_segments=2)
  kept, _ = soft_nms.suppress(segments, [0.9, 0.8, 0.7, 0.6], options)
  assert kept.tolist() == [0, 2]  # (1, 11) overlaps 9/11; (8, 18) 2/18; the cap leaves (50, 60) out


def test_per_class_suppression_keeps_overlaps_of_other_classes():
  segments = [[0, 10], [0, 10], [0, 10]]
  labels = [0, 1, 0]
  scores = [0.9, 0.8, 0.7]
  per_class = soft_nms.NmsOptions(method='hard', iou_threshold=0.5, min_score=0.0)
  kept, _ = soft_nms.batched_nms(segments, scores, labels, per_class)
  assert kept.tolist() == [0, 1]
  together, _ = soft_nms.batched_nms(segments, scores, labels, soft_nms.NmsOptions(
      method='hard', iou_threshold=0.5, min_score=0.0, multiclass=False))
  assert together.tolist() == [0]
  assert soft_nms.batched_nms(np.zeros((0, 2)), [], [], per_class)[0].size == 0
