"""mAP@tIoU against an independent implementation of the published algorithm (ActivityNet's detection evaluation),
written here as plain loops over python floats: a different formulation of the matching (best unmatched segment by
max over (tIoU, index)) and of the interpolated AP (each recall step times the best precision at that recall or
beyond)."""
import math

import numpy as np
import pytest

from vvt.tasks import temporal_map as tm


def _iou(a, b):
  inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
  union = (a[1] - a[0]) + (b[1] - b[0]) - inter
  return inter / union if union > 0 else 0.0


def _brute_ap(truth, dets, threshold):
  """truth: [(video, start, end)], dets: [(video, start, end, score)] of one class -> AP."""
  if not dets:
    return 0.0
  ranked = sorted(range(len(dets)), key=lambda i: (-dets[i][3], i))
  used = set()
  hits = []
  for i in ranked:
    v, s, e, _ = dets[i]
    options = [(_iou((s, e), (g[1], g[2])), j) for j, g in enumerate(truth)
               if g[0] == v and j not in used and _iou((s, e), (g[1], g[2])) >= threshold]
    # the best segment of the video by tIoU: if it is taken, the next best; ties -> the later index
    if options:
      used.add(max(options)[1])
    hits.append(bool(options))
  precision, recall, tp = [], [], 0
  for n, hit in enumerate(hits, 1):
    tp += hit
    precision.append(tp / n)
    recall.append(tp / len(truth))
  ap, previous = 0.0, 0.0
  for n, r in enumerate(recall):
    if r > previous:
      ap += (r - previous) * max(precision[n:])
      previous = r
  return ap


def _brute_map(truth, dets, thresholds):
  """truth/dets lists with labels: (video, start, end, label[, score]) -> (per-class dict, mAP per threshold)."""
  classes = sorted({g[3] for g in truth})
  per = {c: [_brute_ap([g[:3] for g in truth if g[3] == c],
                       [d[:3] + (d[4],) for d in dets if d[3] == c], t) for t in thresholds] for c in classes}
  return per, [sum(per[c][k] for c in classes) / len(classes) for k in range(len(thresholds))]


def _segments(rows, scored):
  if not rows:
    return tm.Segments.of([], [], [], [] if scored else None)
  cols = list(zip(*rows, strict=True))
  return tm.Segments.of(cols[0], list(zip(cols[1], cols[2], strict=True)), cols[3], cols[4] if scored else None)


def _check(truth, dets, thresholds, num_classes):
  got = tm.detection_map(_segments(truth, False), _segments(dets, True), thresholds, num_classes)
  per, mean = _brute_map(truth, dets, thresholds)
  for c, aps in per.items():
    np.testing.assert_allclose(got.per_class[:, c], aps, rtol=0, atol=1e-12)
  np.testing.assert_allclose(got.map, mean, rtol=0, atol=1e-12)
  assert got.average_map == pytest.approx(sum(mean) / len(mean), abs=1e-12)
  return got


def test_random_detections_match_the_brute_force_at_both_protocols():
  rng = np.random.default_rng(0)
  for trial in range(12):
    truth, dets = [], []
    for v in range(4):
      for _ in range(rng.integers(0, 4)):
        s = float(rng.uniform(0, 50))
        truth.append((v, s, s + float(rng.uniform(1, 20)), int(rng.integers(0, 3))))
    for _ in range(rng.integers(0, 30)):
      v, s = int(rng.integers(0, 5)), float(rng.uniform(0, 50))  # video 4 has no ground truth
      score = float(rng.choice([0.1, 0.5, 0.9])) if trial % 2 else float(rng.uniform())  # odd trials: ties
      dets.append((v, s, s + float(rng.uniform(1, 20)), int(rng.integers(0, 4)), score))
    if truth:
      for protocol in tm.PROTOCOLS.values():
        _check(truth, dets, protocol, 4)


def test_a_class_without_detections_scores_zero_and_one_without_truth_is_left_out():
  truth = [(0, 0.0, 10.0, 0), (0, 20.0, 30.0, 1)]
  dets = [(0, 0.0, 10.0, 0, 0.9), (0, 20.0, 30.0, 2, 0.8)]  # class 1: none; class 2: no ground truth
  got = _check(truth, dets, tm.THUMOS14, 3)
  assert got.per_class[:, 0].tolist() == [1.0] * 5
  assert got.per_class[:, 1].tolist() == [0.0] * 5
  assert np.isnan(got.per_class[:, 2]).all()
  assert got.map.tolist() == [0.5] * 5


def test_a_duplicate_detection_is_a_false_positive_after_the_match():
  truth = [(0, 0.0, 10.0, 0)]
  dets = [(0, 0.0, 10.0, 0, 0.9), (0, 0.0, 10.0, 0, 0.8), (0, 40.0, 50.0, 0, 0.95)]
  got = _check(truth, dets, (0.5,), 1)
  assert got.map[0] == pytest.approx(0.5)  # ranks: fp, tp, fp -> precision 1/2 at recall 1


def test_touching_segments_do_not_overlap_and_ties_keep_their_order():
  truth = [(0, 0.0, 10.0, 0), (0, 10.0, 20.0, 0)]
  dets = [(0, 10.0, 20.0, 0, 0.5), (0, 20.0, 30.0, 0, 0.5), (0, 0.0, 10.0, 0, 0.5)]
  assert tm.segment_iou(np.array([10.0, 20.0]), [[0.0, 10.0], [20.0, 30.0]]).tolist() == [0.0, 0.0]
  got = _check(truth, dets, tm.ACTIVITYNET, 1)
  # in input order: tp, fp, tp -> precision 1, 1/2, 2/3 at recall 1/2, 1/2, 1
  assert got.map[0] == pytest.approx(0.5 * 1.0 + 0.5 * (2 / 3))


def test_the_best_unmatched_segment_is_taken_when_the_best_is_matched():
  truth = [(0, 0.0, 10.0, 0), (0, 2.0, 12.0, 0)]
  dets = [(0, 0.0, 10.0, 0, 0.9), (0, 0.0, 10.0, 0, 0.8)]  # the second matches (2, 12): tIoU 8/12
  got = _check(truth, dets, (0.5, 0.7), 1)
  assert got.map.tolist() == [1.0, 0.5]


def test_the_protocols_thresholds():
  assert tm.THUMOS14 == (0.3, 0.4, 0.5, 0.6, 0.7)
  assert len(tm.ACTIVITYNET) == 10 and tm.ACTIVITYNET[0] == 0.5 and tm.ACTIVITYNET[-1] == 0.95
  assert math.isnan(tm.detection_map(_segments([], False), _segments([], True), (0.5,), 2).average_map)
