"""Temporal action detection: mAP at temporal-IoU thresholds, as the ActivityNet official evaluation computes it
(ActivityNet `Evaluation/eval_detection.py`: `compute_average_precision_detection`, lines 182-260, and
`Evaluation/utils.py`: `interpolated_prec_rec` lines 14-23, `segment_iou` lines 25-51; ActionFormer's
`libs/utils/metrics.py` computes it the same way).

    segment_iou(segment (2,), candidates (M, 2)) -> (M,) tIoU
    interpolated_ap(precision (N,), recall (N,)) -> float: VOC 2011 interpolated AP
    class_ap(truth, detections, thresholds) -> (K,) AP of one class at each of the K thresholds
    detection_map(truth, detections, thresholds, num_classes) -> `DetectionMap` (per-class AP (K, C), mAP (K,),
        their average)

Per class: the detections are sorted by score, descending (ties keep their input order: a stable sort; the
official code reverses an unstable argsort, so its order among ties is unspecified); each is matched, at each
threshold, to the ground-truth segment of its video with the highest tIoU >= the threshold that no higher-scored
detection matched (among equal tIoUs the later segment, as the official reversed argsort of a short array); one
match per ground-truth segment; everything else is a false positive. Precision and recall over the ranked list,
then the interpolated AP (precision made monotone from the right, summed over the recall steps).

Classes: as the official code, whose class index is read from the ground truth, the mAP averages the classes that
have at least one ground-truth segment in the evaluated videos; a class with ground truth and no detection has AP
0 (the official `prediction.empty` branch); detections of a class without ground truth are in no class's AP
(their per-class AP is NaN, and the mAP leaves them out). A detection in a video without ground truth of its class
is a false positive.
"""
import dataclasses

import numpy as np

THUMOS14 = (0.3, 0.4, 0.5, 0.6, 0.7)  # ActionFormer paper, Sec. 4.1: tIoU [0.3:0.1:0.7]
ACTIVITYNET = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))  # ActivityNet-1.3: [0.5:0.05:0.95]
PROTOCOLS = {'thumos14': THUMOS14, 'activitynet': ACTIVITYNET}


@dataclasses.dataclass(frozen=True)
class Segments:
  """Temporal segments of several videos: `video` (N,) int video numbers, `segments` (N, 2) float (start, end)
  in seconds (or feature steps: any one unit), `labels` (N,) int class indices and, for detections, `scores`
  (N,) float."""
  video: np.ndarray
  segments: np.ndarray
  labels: np.ndarray
  scores: np.ndarray = None

  @classmethod
  def of(cls, video, segments, labels, scores=None) -> 'Segments':
    """Segments of array-likes (an empty `segments` may be given as [])."""
    return cls(video=np.asarray(video, np.int64).reshape(-1),
               segments=np.asarray(segments, np.float64).reshape(-1, 2),
               labels=np.asarray(labels, np.int64).reshape(-1),
               scores=None if scores is None else np.asarray(scores, np.float64).reshape(-1))

  def of_class(self, c: int) -> 'Segments':
    """The segments labelled `c`."""
    keep = self.labels == c
    return Segments(self.video[keep], self.segments[keep], self.labels[keep],
                    None if self.scores is None else self.scores[keep])


@dataclasses.dataclass(frozen=True)
class DetectionMap:
  """`thresholds` (K,), `per_class` (K, C) AP (NaN for a class without ground truth), `map` (K,) and
  `average_map` (the mean of `map`)."""
  thresholds: tuple
  per_class: np.ndarray
  map: np.ndarray
  average_map: float


def segment_iou(segment, candidates) -> np.ndarray:
  """(M,) tIoU of `segment` (2,) with each of `candidates` (M, 2); 0 where the union is empty."""
  candidates = np.asarray(candidates, np.float64).reshape(-1, 2)
  inter = np.clip(np.minimum(segment[1], candidates[:, 1]) - np.maximum(segment[0], candidates[:, 0]), 0, None)
  union = (candidates[:, 1] - candidates[:, 0]) + (segment[1] - segment[0]) - inter
  return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def interpolated_ap(precision, recall) -> float:
  """VOC 2011 interpolated AP of a ranked list's precision (N,) and recall (N,)."""
  mprec = np.concatenate([[0.0], precision, [0.0]])
  mrec = np.concatenate([[0.0], recall, [1.0]])
  mprec = np.maximum.accumulate(mprec[::-1])[::-1]
  steps = np.flatnonzero(mrec[1:] != mrec[:-1]) + 1
  return float(np.sum((mrec[steps] - mrec[steps - 1]) * mprec[steps]))


def _true_positives(truth: Segments, detections: Segments, order: np.ndarray, thresholds) -> np.ndarray:
  """(K, N) 1.0 where the detection of rank n is a true positive at threshold k (see the module docstring)."""
  tp = np.zeros((len(thresholds), order.size))
  locked = np.zeros((len(thresholds), truth.video.size), bool)
  for rank, i in enumerate(order):
    mine = np.flatnonzero(truth.video == detections.video[i])
    if mine.size == 0:
      continue
    iou = segment_iou(detections.segments[i], truth.segments[mine])
    by_iou = np.argsort(iou, kind='stable')[::-1]  # highest first; equal tIoUs: the later segment first
    for k, threshold in enumerate(thresholds):
      for j in by_iou:
        if iou[j] < threshold:
          break
        if not locked[k, mine[j]]:
          locked[k, mine[j]] = True
          tp[k, rank] = 1.0
          break
  return tp


def class_ap(truth: Segments, detections: Segments, thresholds) -> np.ndarray:
  """(K,) AP at each threshold of one class's `detections` (with scores) against its `truth` (at least one
  segment); 0 without detections."""
  ap = np.zeros(len(thresholds))
  if detections.video.size == 0:
    return ap
  order = np.argsort(-detections.scores, kind='stable')
  tp = _true_positives(truth, detections, order, thresholds)
  tp_sum = np.cumsum(tp, axis=1)
  fp_sum = np.cumsum(1.0 - tp, axis=1)
  recall = tp_sum / truth.video.size
  precision = tp_sum / (tp_sum + fp_sum)
  return np.array([interpolated_ap(precision[k], recall[k]) for k in range(len(thresholds))])


def detection_map(truth: Segments, detections: Segments, thresholds, num_classes: int) -> DetectionMap:
  """Per-class AP, mAP per threshold and their average (see the module docstring); `num_classes` C sizes the
  per-class table. NaN mAP when no class has ground truth."""
  thresholds = tuple(float(t) for t in thresholds)
  per_class = np.full((len(thresholds), num_classes), np.nan)
  for c in range(num_classes):
    mine = truth.of_class(c)
    if mine.video.size:
      per_class[:, c] = class_ap(mine, detections.of_class(c), thresholds)
  has_truth = np.isfinite(per_class[0]) if num_classes else np.zeros(0, bool)
  mean = per_class[:, has_truth].mean(axis=1) if has_truth.any() else np.full(len(thresholds), np.nan)
  return DetectionMap(thresholds=thresholds, per_class=per_class, map=mean, average_map=float(np.mean(mean)))
