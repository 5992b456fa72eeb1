"""Temporal action localisation: ActionFormer (`vvt.models.actionformer`) on frozen feature sequences.

A batch: 'inputs' (B, L, D) features, 'steps' (B, L) bool (the valid steps), 'segments' (B, S, 2) in feature steps
and 'segment_labels' (B, S) int32 (-1: padding) (`vvt.data.sequence_train_batches`).

  targets   every pyramid location (`vvt.models.actionformer.points`) is labelled as ActionFormer's
            `label_points_single_video` (`libs/modeling/meta_archs.py` lines 449-532): positive for the segments
            whose centre region (`center_radius` strides around the centre, inside the segment) holds it and whose
            largest distance to a boundary is in the level's regression range; of several, the shortest (all
            those within 1e-3 of its length for the classes); regression targets: the distances to its start and
            end over the level's stride
  loss      sigmoid focal loss (alpha 0.25, gamma 2; `libs/modeling/losses.py` lines 4-51) over the valid
            locations, plus `loss_weight` x the 1-D distance-IoU loss (`ctr_diou_loss_1d`, lines 108-160) over the
            positives, both over the batch's positives (ActionFormer divides by a moving average of them,
            `meta_archs.py` lines 553-557; here the batch's own count, at least 1)
  inference per level: sigmoid scores above `pre_nms_thresh`, the best `pre_nms_topk`, decoded to segments,
            those longer than `duration_thresh` steps (`inference_single_video`, lines 644-708); then NMS and the
            per-video cap (`vvt.tasks.soft_nms`); steps -> seconds by the sequence's window centres
  results   mAP at each tIoU of `protocol` and their average (`vvt.tasks.temporal_map`), per-class AP
"""
import csv
import dataclasses
import io

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vvt.tasks import soft_nms
from vvt.tasks import temporal_map
from vvt.tasks.base import Task
from vvt.tasks.localization_options import LocalizationSpec

FOCAL_ALPHA, FOCAL_GAMMA = 0.25, 2.0


def point_targets(points, segments, labels, num_classes: int, radius: float):
  """(cls (P, C) float32 in {0, 1}, reg (P, 2) float32) of one video: `points` (P, 4) (step, low, high, stride),
  `segments` (S, 2) in steps, `labels` (S,) int (-1: none). See the module docstring."""
  t, low, high, stride = (points[:, i:i + 1] for i in range(4))
  start, end = segments[None, :, 0], segments[None, :, 1]
  left, right = t - start, end - t
  if radius > 0:
    centre = 0.5 * (start + end)
    inside = jnp.minimum(t - jnp.maximum(centre - stride * radius, start),
                         jnp.minimum(centre + stride * radius, end) - t) > 0
  else:
    inside = jnp.minimum(left, right) > 0
  reach = jnp.maximum(left, right)
  lengths = jnp.where(inside & (reach >= low) & (reach <= high) & (labels[None, :] >= 0), end - start, jnp.inf)
  shortest = jnp.min(lengths, axis=1, keepdims=True)
  chosen = ((lengths <= shortest + 1e-3) & jnp.isfinite(lengths)).astype(jnp.float32)
  cls = jnp.clip(chosen @ jax.nn.one_hot(labels, num_classes), 0.0, 1.0)
  index = jnp.argmin(lengths, axis=1)
  reg = jnp.stack([left, right], -1)[jnp.arange(points.shape[0]), index] / stride
  return cls, reg


def points_of(length: int, levels: int, ranges) -> np.ndarray:
  """(P, 4) pyramid locations (`vvt.models.actionformer.points`)."""
  from vvt.models.actionformer import points
  return points(length, levels, ranges)


def focal_loss(logits, targets):
  """Sigmoid focal loss per element (RetinaNet's, alpha 0.25, gamma 2)."""
  p = jax.nn.sigmoid(logits)
  ce = optax.sigmoid_binary_cross_entropy(logits, targets)
  p_t = p * targets + (1 - p) * (1 - targets)
  alpha_t = FOCAL_ALPHA * targets + (1 - FOCAL_ALPHA) * (1 - targets)
  return alpha_t * ce * (1 - p_t) ** FOCAL_GAMMA


def diou_loss(pred, target, eps: float = 1e-8):
  """1-D distance-IoU loss of distances (..., 2) to start and end from one point."""
  lp, rp, lg, rg = pred[..., 0], pred[..., 1], target[..., 0], target[..., 1]
  inter = jnp.minimum(lp, lg) + jnp.minimum(rp, rg)
  union = lp + rp + lg + rg - inter
  iou = inter / jnp.maximum(union, eps)
  enclosing = jnp.maximum(lp, lg) + jnp.maximum(rp, rg)
  rho = 0.5 * (rp - lp - rg + lg)
  return 1.0 - iou + rho ** 2 / jnp.maximum(enclosing ** 2, eps)


@dataclasses.dataclass(frozen=True)
class Localization(Task):
  """The localisation task of `spec` (`task.localization`) with `num_classes` classes; batches carry at most
  `truth_segments` ground-truth segments per video."""
  spec: LocalizationSpec
  num_classes: int
  truth_segments: int = 32
  name = 'localization'
  metric_names = ('cls_loss', 'reg_loss')
  main_metric = 'average_map'

  @property
  def heads(self) -> dict:
    return {'': self.num_classes}

  def label_specs(self, batch_size: int) -> dict:
    length, s = self.spec.max_seq_len, self.truth_segments
    return {'steps': ((batch_size, length), 'bool'), 'segments': ((batch_size, s, 2), 'float32'),
            'segment_labels': ((batch_size, s), 'int32')}

  def build_model(self, model_config=None, backend=None):
    """The ActionFormer head of `spec` (the video backbone, `model_config`, made the features beforehand)."""
    del model_config, backend
    from vvt.models.actionformer import ActionFormer
    s = self.spec
    return ActionFormer(num_classes=self.num_classes, embed_dim=s.embed_dim, num_heads=s.num_heads, window=s.window,
                        embed_layers=s.embed_layers, stem_layers=s.stem_layers, levels=s.levels,
                        head_layers=s.head_layers, prior_prob=s.prior_prob)

  def prepare(self, batch, inputs, rng) -> tuple:
    """({'features' (B, L, D), 'steps' (B, L)}, targets, labels): the targets and labels are the batch's segments."""
    del rng
    targets = {k: batch[k] for k in ('steps', 'segments', 'segment_labels', 'mask')}
    return {'features': inputs, 'steps': batch['steps']}, targets, targets

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    return module.apply({'params': params}, inputs['features'], inputs['steps'], train=train)

  def loss(self, outputs, targets):
    """(B,) each video's share of the batch's loss (already over the batch's positives: the rows sum to it)."""
    parts = self.losses(outputs, targets)
    return parts['cls_loss'] + parts['reg_loss']

  def train_metrics(self, outputs, labels) -> dict:
    return self.losses(outputs, labels)

  def scores(self, outputs) -> dict:
    """{'probs' (B, P, C) sigmoid scores, 0 at invalid locations, 'offsets' (B, P, 2)}."""
    valid = outputs['valid'].astype(jnp.float32)[..., None]
    return {'probs': jax.nn.sigmoid(outputs['logits'].astype(jnp.float32)) * valid, 'offsets': outputs['offsets']}

  def eval_labels(self, batch) -> dict:
    return {}

  def aggregator(self, num_videos: int):
    """A `DetectionAggregator`; its `sequences` (the evaluated `SequenceSet`) set by the evaluation."""
    del num_videos
    return DetectionAggregator(self, None)

  def points(self, length: int) -> np.ndarray:
    return points_of(length, self.spec.levels, self.spec.regression_ranges)

  def losses(self, outputs, batch):
    """{'cls_loss', 'reg_loss'} (B,) of the head's `outputs` on `batch` (see the module docstring); their sum
    over the rows is the batch's loss."""
    pts = jnp.asarray(self.points(batch['steps'].shape[1]))
    targets = jax.vmap(lambda s, l: point_targets(pts, s, l, self.num_classes, self.spec.center_radius))
    cls, reg = targets(batch['segments'], batch['segment_labels'])
    valid = outputs['valid'].astype(jnp.float32) * batch['mask'][:, None]
    positive = (cls.sum(-1) > 0) * valid
    norm = jnp.maximum(positive.sum(), 1.0)
    focal = (focal_loss(outputs['logits'].astype(jnp.float32), cls).sum(-1) * valid).sum(-1) / norm
    regress = (diou_loss(outputs['offsets'], reg) * positive).sum(-1) / norm
    return {'cls_loss': focal, 'reg_loss': self.spec.loss_weight * regress}

  def detections(self, probs: np.ndarray, offsets: np.ndarray, length: int):
    """(segments (M, 2) in steps, scores (M,), labels (M,)) of one video's sigmoid scores (P, C) (zero where
    invalid) and distances (P, 2), by descending score after NMS (see the module docstring)."""
    s, pts = self.spec, self.points(length)
    segs, scores, labels, first = [], [], [], 0
    for level in range(s.levels):
      n = int(np.ceil(length / 2 ** level))
      p = probs[first:first + n].reshape(-1)
      keep = np.flatnonzero(p > s.pre_nms_thresh)
      keep = keep[np.argsort(-p[keep], kind='stable')][:s.pre_nms_topk]
      at, c = first + keep // self.num_classes, keep % self.num_classes
      seg = np.stack([pts[at, 0] - offsets[at, 0] * pts[at, 3], pts[at, 0] + offsets[at, 1] * pts[at, 3]], 1)
      long = seg[:, 1] - seg[:, 0] > s.duration_thresh
      segs.append(seg[long])
      scores.append(p[keep][long])
      labels.append(c[long])
      first += n
    segs, scores, labels = np.concatenate(segs), np.concatenate(scores), np.concatenate(labels)
    kept, kept_scores = soft_nms.batched_nms(segs, scores, labels, s.nms_options)
    return segs[kept], kept_scores, labels[kept]


class DetectionAggregator:
  """Collects each video's detections and scores them against its ground truth (`temporal_map`).

  add(video_index (B,), mask (B,), probs (B, P, C), offsets (B, P, 2), length)
  result() -> {'average_map', 'map@<t>' per threshold, 'protocol', 'thresholds', 'per_class_ap', 'num_videos',
              'num_detections'}; report_files(prefix) -> the per-class CSV and the PNG of a few videos
  """

  def __init__(self, task: Localization, sequences, class_names=None):
    self.task, self.sequences = task, sequences
    self.class_names = list(class_names or [str(c) for c in range(task.num_classes)])
    self.found = {}

  def add(self, video_index, mask, probs, offsets, length: int) -> None:
    for row, i in enumerate(np.asarray(video_index)):
      if mask[row] > 0 and i >= 0:
        segs, scores, labels = self.task.detections(np.asarray(probs[row]), np.asarray(offsets[row]), length)
        self.found[int(i)] = (self.sequences.seconds(int(i), segs), scores, labels)

  def truth(self) -> temporal_map.Segments:
    seq = self.sequences
    rows = [(i, seq.seconds(i, seq.segments[i]), seq.labels[i]) for i in sorted(self.found)]
    return temporal_map.Segments.of(np.concatenate([[i] * len(l) for i, _, l in rows] or [[]]),
                                    np.concatenate([s for _, s, _ in rows] or [np.zeros((0, 2))]),
                                    np.concatenate([l for _, _, l in rows] or [[]]))

  def predicted(self) -> temporal_map.Segments:
    rows = [(i, *self.found[i]) for i in sorted(self.found)]
    return temporal_map.Segments.of(np.concatenate([[i] * len(c) for i, _, _, c in rows] or [[]]),
                                    np.concatenate([s for _, s, _, _ in rows] or [np.zeros((0, 2))]),
                                    np.concatenate([c for _, _, _, c in rows] or [[]]),
                                    np.concatenate([p for _, _, p, _ in rows] or [[]]))

  def result(self) -> dict:
    spec = self.task.spec
    got = temporal_map.detection_map(self.truth(), self.predicted(), spec.thresholds, self.task.num_classes)
    out = {'average_map': got.average_map, 'protocol': spec.protocol, 'thresholds': list(got.thresholds),
           'num_videos': len(self.found), 'num_detections': int(sum(len(v[1]) for v in self.found.values()))}
    out.update({f'map@{t:g}': float(m) for t, m in zip(got.thresholds, got.map, strict=True)})
    out['per_class_ap'] = {name: (None if np.isnan(ap) else float(ap))
                           for name, ap in zip(self.class_names, got.per_class.mean(0), strict=True)}
    self.last = got
    return out

  def per_class_csv(self) -> str:
    got, truth = self.last, self.truth()
    f = io.StringIO()
    w = csv.writer(f)
    w.writerow(['class', 'segments'] + [f'ap@{t:g}' for t in got.thresholds] + ['average'])
    for c, name in enumerate(self.class_names):
      aps = got.per_class[:, c]
      w.writerow([name, int((truth.labels == c).sum())] + ['' if np.isnan(a) else f'{a:.4f}' for a in aps]
                 + ['' if np.isnan(aps).any() else f'{aps.mean():.4f}'])
    return f.getvalue()

  def report_files(self, prefix: str) -> list:
    """[(path, text or writer)]: P_classes.csv (AP per class and threshold) and P_segments.png."""
    from vvt.tasks import localization_plot
    return [(prefix + '_classes.csv', self.per_class_csv()),
            (prefix + '_segments.png', lambda f: localization_plot.draw(self, f))]


def from_config(config) -> Localization:
  """The task of a run config or RunSpec: `task.localization` and `num_classes`."""
  from vvt.tasks.localization_options import _get
  num_classes = _get(config, 'num_classes')
  if num_classes is None:
    num_classes = _get(_get(config, 'model'), 'num_classes')
  return Localization(spec=LocalizationSpec.of(_get(_get(config, 'task'), 'localization')),
                      num_classes=int(num_classes))
