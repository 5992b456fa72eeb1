"""Non-maximum suppression of temporal segments, as ActionFormer's inference does it (its
`libs/utils/csrc/nms_cpu.cpp` `softnms_1d_cpu`, lines 67-160, and `libs/utils/nms.py` `batched_nms`, lines
103-190).

    suppress(segments (N, 2), scores (N,), options) -> kept indices (M,), their new scores (M,), by score
    batched_nms(segments, scores, labels, options) -> kept indices, scores: per class (`multiclass`) or over
        all classes, then the best `max_segments` of the video

Soft-NMS (`method='soft'`, Gaussian): repeatedly take the segment of the highest (decayed) score, then multiply
every remaining score by exp(-tIoU^2 / sigma) (ActionFormer's form: sigma divides tIoU^2, no factor 2) and drop the
segments whose score falls below `min_score`; the tIoU's lengths carry ActionFormer's + 1e-6. `method='hard'`:
weight 0 at tIoU >= `iou_threshold` (what the Gaussian ignores). `method='none'`: no suppression, the cap only.
Equal scores: the earlier segment first.
"""
import dataclasses

import numpy as np

METHODS = ('soft', 'hard', 'none')


@dataclasses.dataclass(frozen=True)
class NmsOptions:
  """ActionFormer's `test_cfg` (`libs/core/config.py` lines 101-113; THUMOS14: `configs/thumos_i3d.yaml`)."""
  method: str = 'soft'          # nms_method
  sigma: float = 0.5            # nms_sigma
  iou_threshold: float = 0.1    # iou_threshold (hard NMS)
  min_score: float = 0.001      # min_score (THUMOS14; 0.01 by default)
  max_segments: int = 200       # max_seg_num (THUMOS14; 1000 by default): the per-video cap
  multiclass: bool = True       # multiclass_nms: each class on its own


def _tiou(segment, others, lengths, length) -> np.ndarray:
  inter = np.clip(np.minimum(segment[1], others[:, 1]) - np.maximum(segment[0], others[:, 0]), 0, None)
  return inter / (length + lengths - inter)


def _weights(iou: np.ndarray, options: NmsOptions) -> np.ndarray:
  if options.method == 'soft':
    return np.exp(-(iou * iou) / options.sigma)
  return np.where(iou >= options.iou_threshold, 0.0, 1.0)


def suppress(segments, scores, options: NmsOptions) -> tuple[np.ndarray, np.ndarray]:
  """(kept indices (M,), their scores (M,)) of one class's `segments` (N, 2) and `scores` (N,), by descending
  score (see the module docstring); M <= `options.max_segments` (> 0; 0: no cap)."""
  segments = np.asarray(segments, np.float64).reshape(-1, 2)
  scores = np.asarray(scores, np.float64).reshape(-1).copy()
  if options.method == 'none':
    order = np.argsort(-scores, kind='stable')
    order = order[scores[order] > options.min_score] if options.min_score > 0 else order
    return _cap(order, scores[order], options.max_segments)
  lengths = segments[:, 1] - segments[:, 0] + 1e-6
  alive = np.arange(scores.size)
  kept, kept_scores = [], []
  while alive.size:
    best = int(np.argmax(scores[alive]))  # the first of equal scores
    i = alive[best]
    kept.append(i)
    kept_scores.append(scores[i])
    alive = np.delete(alive, best)
    weights = _weights(_tiou(segments[i], segments[alive], lengths[alive], lengths[i]), options)
    scores[alive] *= weights
    alive = alive[(scores[alive] >= options.min_score) & (weights > 0)]  # hard NMS: a suppressed one is gone
  return _cap(np.array(kept, np.int64), np.array(kept_scores), options.max_segments)


def _cap(indices, scores, max_segments: int):
  if max_segments > 0:
    return indices[:max_segments], scores[:max_segments]
  return indices, scores


def batched_nms(segments, scores, labels, options: NmsOptions) -> tuple[np.ndarray, np.ndarray]:
  """(kept indices (M,), their scores (M,)) of one video's detections of any class, by descending score:
  `suppress` per class (`options.multiclass`) or of all at once, then the best `max_segments`."""
  labels = np.asarray(labels).reshape(-1)
  if not options.multiclass:
    return suppress(segments, scores, options)
  segments = np.asarray(segments, np.float64).reshape(-1, 2)
  scores = np.asarray(scores, np.float64).reshape(-1)
  parts = []
  for c in np.unique(labels):
    mine = np.flatnonzero(labels == c)
    kept, kept_scores = suppress(segments[mine], scores[mine], options)
    parts.append((mine[kept], kept_scores))
  if not parts:
    return np.zeros(0, np.int64), np.zeros(0)
  indices = np.concatenate([p[0] for p in parts])
  new_scores = np.concatenate([p[1] for p in parts])
  order = np.argsort(-new_scores, kind='stable')
  return _cap(indices[order], new_scores[order], options.max_segments)
