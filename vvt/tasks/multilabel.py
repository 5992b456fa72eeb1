"""Multi-label classification: several labels per video, sigmoid binary cross-entropy, mAP over the views.

The data carries a multi-hot 'label' int32 (B, C) (`dataset.multi_label`: the records' several `clip/label/index`
values; `vvt data convert` takes `path,label1;label2`; `vvt data synthetic --multi-label`). The model is the
backbone with its classifier of `model.num_classes` outputs (one head), read as C independent logits.

  loss           sigmoid binary cross-entropy, averaged over the C classes, per example (B,); mixup / cutmix mix
                 the multi-hot targets with the pixels (`loss.mixup_alpha`, `loss.cutmix_alpha`)
  train metric   `top1_positive`: the best-scored class is one of the video's labels
  eval scores    per-view sigmoid probabilities (B, C), averaged per video over its views
  results        `video_map` (mean over the classes with at least one positive video of the per-class average
                 precision, `vvt.tasks.average_precision`), `clip_map` (over the views), `video_top1_positive`,
                 `video_per_class_ap` {name: AP or None}; files: P_classes.csv (class, positives, AP) and
                 P_ap.png (the per-class AP)
"""
import csv
import dataclasses
import io

from etils import epath
import jax
import jax.numpy as jnp
import numpy as np
import optax

from vvt.tasks import average_precision as ap_lib
from vvt.tasks import losses
from vvt.tasks.base import Task

LABEL = 'label'


def sigmoid_cross_entropy(logits, targets):
  """Per-example binary cross-entropy of logits (B, C) and targets in [0, 1] (B, C), averaged over C: (B,)."""
  return jnp.mean(optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32), targets), axis=-1)


def top1_positive(logits, labels):
  """float (B,): 1 where the best-scored class is a label of the video (multi-hot `labels` (B, C))."""
  best = jnp.argmax(logits, -1)
  return jnp.take_along_axis(labels, best[:, None], axis=-1)[:, 0].astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class MultiLabel(Task):
  """See the module docstring."""
  num_classes: int
  mixup_alpha: float = 0.0
  cutmix_alpha: float = 0.0
  mix_switch_prob: float = 0.5
  name = 'multilabel'

  @property
  def heads(self) -> dict:
    return {'': self.num_classes}

  def label_specs(self, batch_size: int) -> dict:
    return {LABEL: ((batch_size, self.num_classes), 'int32')}

  def prepare(self, batch, inputs, rng):
    labels = {'': batch[LABEL]}
    targets = {'': labels[''].astype(jnp.float32)}
    inputs, targets, _ = losses.mix_batch(rng, inputs, targets, mixup_alpha=self.mixup_alpha,
                                          cutmix_alpha=self.cutmix_alpha, switch_prob=self.mix_switch_prob)
    return inputs, targets, labels

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    return {'': super().outputs(module, params, inputs, train=train, rng=rng)['']}

  def loss(self, outputs, targets):
    return sigmoid_cross_entropy(outputs[''], targets[''])

  @property
  def metric_names(self) -> tuple:
    return ('top1_positive',)

  def train_metrics(self, outputs, labels) -> dict:
    return {'top1_positive': top1_positive(outputs[''], labels[''])}

  def scores(self, outputs) -> dict:
    return {'': jax.nn.sigmoid(outputs[''].astype(jnp.float32))}

  def eval_labels(self, batch) -> dict:
    return {'': batch[LABEL]}

  def aggregator(self, num_videos: int) -> 'MultiLabelAggregator':
    return MultiLabelAggregator(self.num_classes, num_videos)

  @property
  def main_metric(self) -> str:
    return 'video_map'

  def probability_average(self, eval_average: str) -> str:
    """'sigmoid': each class's own probability, its views' sigmoids averaged (`eval.average` is for softmax)."""
    del eval_average
    return 'sigmoid'


class MultiLabelAggregator:
  """Per-video sums of the views' probabilities (N, C) and the videos' multi-hot labels; mAP and per-class AP
  (`vvt.tasks.base.Aggregator`)."""

  def __init__(self, num_classes: int, num_videos: int):
    self.num_classes, self.num_videos = int(num_classes), int(num_videos)
    self.heads = {'': self.num_classes}
    self.sums = np.zeros((num_videos, num_classes), np.float64)
    self.counts = np.zeros((num_videos,), np.int64)
    self.video_labels = np.full((num_videos, num_classes), -1, np.int64)
    self.skipped = np.zeros((num_videos,), bool)
    self.clip_scores, self.clip_labels = [], []
    self.num_views = 0
    self.class_names = {'': None}
    self.video_ids = None
    self.average = 'sigmoid'

  def skip(self, indices) -> None:
    indices = np.asarray(indices, np.int64).reshape(-1)
    self.skipped[indices[(indices >= 0) & (indices < self.num_videos)]] = True

  def add(self, scores, video_index, mask, labels) -> None:
    valid = np.asarray(mask) > 0
    vi = np.asarray(video_index)[valid].astype(np.int64)
    if vi.size == 0:
      return
    if vi.min() < 0 or vi.max() >= self.num_videos:
      raise ValueError(f'evaluation batch has video_index {vi.min()}..{vi.max()} '
                       f'outside [0, {self.num_videos}) on a valid (mask=1) row')
    s = np.asarray(scores[''])[valid].astype(np.float64)
    lab = np.asarray(labels[''])[valid].astype(np.int64)
    known = self.video_labels[vi]
    clash = (known[:, 0] >= 0) & (known != lab).any(-1)
    if clash.any():
      raise ValueError(f'video {int(vi[clash][0])} has views with different labels')
    self.num_views += int(vi.size)
    np.add.at(self.counts, vi, 1)
    np.add.at(self.sums, vi, s)
    self.video_labels[vi] = lab
    self.clip_scores.append(s)
    self.clip_labels.append(lab)

  def evaluated(self) -> np.ndarray:
    return np.flatnonzero(~self.skipped)

  def names(self, head: str = '') -> list:
    names = self.class_names.get(head)
    return list(names) if names and len(names) == self.num_classes else [str(i) for i in range(self.num_classes)]

  def video_scores(self) -> np.ndarray:
    return (self.sums / np.maximum(self.counts, 1)[:, None]).astype(np.float32)

  def _kept(self):
    keep = self.evaluated()
    missing = keep[self.counts[keep] == 0]
    if missing.size:
      raise ValueError(f'{missing.size} of {self.num_videos} evaluation videos got '
                       f'no view (first: {missing[:5].tolist()})')
    if keep.size == 0:
      raise ValueError(f'all {self.num_videos} evaluation videos were skipped as bad records')
    return keep, self.sums[keep] / self.counts[keep][:, None], self.video_labels[keep]

  def result(self) -> dict:
    keep, scores, labels = self._kept()
    counts = self.counts[keep]
    ap = ap_lib.per_class_ap(scores, labels)
    clip_s = np.concatenate(self.clip_scores) if self.clip_scores else np.zeros((0, self.num_classes))
    clip_l = np.concatenate(self.clip_labels) if self.clip_labels else np.zeros((0, self.num_classes))
    best = scores.argmax(-1)
    return {'num_videos': int(keep.size), 'num_views': self.num_views,
            'views_per_video_min': int(counts.min()), 'views_per_video_max': int(counts.max()),
            'views_per_video_mean': float(counts.mean()),
            'videos_skipped': int(self.skipped.sum()),
            'skipped_video_indices': np.flatnonzero(self.skipped).tolist(),
            'video_map': ap_lib.mean_average_precision(scores, labels),
            'clip_map': ap_lib.mean_average_precision(clip_s, clip_l),
            'video_top1_positive': float(labels[np.arange(len(best)), best].mean()),
            'classes_with_positives': int(np.isfinite(ap).sum()),
            'video_per_class_ap': {n: (None if np.isnan(a) else float(a))
                                   for n, a in zip(self.names(), ap, strict=True)},
            'class_names': self.names()}

  def arrays(self) -> dict:
    """`video_scores` float32 (N, C) (mean probabilities), `video_labels` int64 (N, C) multi-hot,
    `class_names` (C,), `views_per_video`, `skipped`, `video_ids` (N,)."""
    return {'video_scores': self.video_scores(), 'video_labels': self.video_labels,
            'class_names': np.array(self.names()), 'views_per_video': self.counts, 'skipped': self.skipped,
            'video_ids': np.array(self.video_ids or [str(i) for i in range(self.num_videos)])}

  def report_files(self, prefix: str) -> list:
    """P_classes.csv (class, name, positive videos, AP) and P_ap.png (the per-class AP, mAP as a line)."""
    _, scores, labels = self._kept()
    ap = ap_lib.per_class_ap(scores, labels)
    names = self.names()
    rows = [(c, names[c], int((labels[:, c] > 0).sum()), '' if np.isnan(ap[c]) else f'{ap[c]:.6f}')
            for c in range(self.num_classes)]
    out = io.StringIO()
    csv.writer(out, lineterminator='\n').writerows([('class', 'name', 'positives', 'ap')] + rows)
    text = out.getvalue()
    title = epath.Path(prefix).name
    return [(f'{prefix}_classes.csv', text), (f'{prefix}_ap.png', lambda f: ap_png(f, names, ap, title))]


def ap_png(path_or_file, names, ap: np.ndarray, title: str = '') -> None:
  """Bars of the per-class AP (classes without a positive left empty) and the mAP as a dashed line."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  c = len(names)
  fig, ax = plt.subplots(figsize=(min(3.0 + 0.35 * c, 24.0), 4.0))
  ax.bar(range(c), np.nan_to_num(ap), color='tab:blue')
  if np.isfinite(ap).any():
    m = float(np.nanmean(ap))
    ax.axhline(m, ls='--', color='tab:red', label=f'mAP {m:.3f}')
    ax.legend(loc='lower right')
  if c <= 60:
    ax.set_xticks(range(c), names, rotation=45, ha='right', fontsize=8 if c > 10 else 10)
  ax.set_ylim(0, 1)
  ax.set_ylabel('average precision')
  if title:
    ax.set_title(title)
  fig.tight_layout()
  fig.savefig(path_or_file, dpi=90, format='png')
  plt.close(fig)


def from_config(config) -> MultiLabel:
  """The multilabel task of a run config: one head of `model.num_classes` classes, `loss.mixup_alpha` /
  `cutmix_alpha` (`vvt.config.validation` checks that the data is multi-label, `dataset.multi_label`)."""
  nc = config.model.num_classes
  if hasattr(nc, 'items') or isinstance(nc, (tuple, list)):
    raise ValueError("task.name='multilabel' takes one head: num_classes must be an int")
  return MultiLabel(num_classes=int(nc), mixup_alpha=float(config.loss.mixup_alpha),
                    cutmix_alpha=float(config.loss.cutmix_alpha), mix_switch_prob=float(config.loss.mix_switch_prob))
