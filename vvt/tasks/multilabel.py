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
from vvt.tasks import eval_report
from vvt.tasks import losses
from vvt.tasks import video_views
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


class MultiLabelAggregator(video_views.VideoViews):
  """Per-video sums of the views' probabilities (N, C) and the videos' multi-hot labels; mAP and per-class AP
  (`vvt.tasks.base.Aggregator`; `video_views.VideoViews`: skipped videos, class names, video ids)."""

  def __init__(self, num_classes: int, num_videos: int):
    super().__init__({'': int(num_classes)}, num_videos)
    self.num_classes = int(num_classes)
    self.sums = np.zeros((self.num_videos, self.num_classes), np.float64)
    self.video_labels = np.full((self.num_videos, self.num_classes), -1, np.int64)
    self.clip_scores, self.clip_labels = [], []
    self.average = 'sigmoid'

  def add(self, scores, video_index, mask, labels) -> None:
    views = self._valid_views(video_index, mask)
    if views is None:
      return
    valid, vi = views
    s = np.asarray(scores[''])[valid].astype(np.float64)
    lab = np.asarray(labels[''])[valid].astype(np.int64)
    known = self.video_labels[vi]
    clash = (known[:, 0] >= 0) & (known != lab).any(-1)
    if clash.any():
      raise ValueError(f'video {int(vi[clash][0])} has views with different labels')
    self._count_views(vi)
    np.add.at(self.sums, vi, s)
    self.video_labels[vi] = lab
    self.clip_scores.append(s)
    self.clip_labels.append(lab)

  def video_scores(self) -> np.ndarray:
    return (self.sums / np.maximum(self.counts, 1)[:, None]).astype(np.float32)

  def _kept_videos(self):
    """(indices (K,), mean probabilities (K, C), multi-hot labels (K, C)) of the evaluated videos."""
    keep = self._kept()
    return keep, self.sums[keep] / self.counts[keep][:, None], self.video_labels[keep]

  def result(self) -> dict:
    keep, scores, labels = self._kept_videos()
    ap = ap_lib.per_class_ap(scores, labels)
    clip_s = np.concatenate(self.clip_scores) if self.clip_scores else np.zeros((0, self.num_classes))
    clip_l = np.concatenate(self.clip_labels) if self.clip_labels else np.zeros((0, self.num_classes))
    best = scores.argmax(-1)
    return {**self._view_stats(keep),
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
            'video_ids': np.array(self._id_list())}

  def report_files(self, prefix: str) -> list:
    """P_classes.csv (class, name, positive videos, AP) and P_ap.png (the per-class AP, mAP as a line)."""
    _, scores, labels = self._kept_videos()
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
  c = len(names)
  fig, ax = eval_report.new_figure((min(3.0 + 0.35 * c, 24.0), 4.0))
  ax.bar(range(c), np.nan_to_num(ap), color='tab:blue')
  if np.isfinite(ap).any():
    m = float(np.nanmean(ap))
    ax.axhline(m, ls='--', color='tab:red', label=f'mAP {m:.3f}')
    ax.legend(loc='lower right')
  if c <= 60:
    eval_report.class_ticks(ax, names)
  ax.set_ylim(0, 1)
  ax.set_ylabel('average precision')
  eval_report.save_png(fig, ax, path_or_file, title)


def from_config(run) -> MultiLabel:
  """The multilabel task of a RunSpec `run`: one head of `run.model.num_classes` classes, `run.loss`'s mixup /
  cutmix (`vvt.config.validation` checks that the data is multi-label, `dataset.multi_label`)."""
  nc = run.model.num_classes
  if isinstance(nc, tuple):  # a ModelSpec's heads: (head, classes) pairs
    raise ValueError("task.name='multilabel' takes one head: num_classes must be an int")
  loss = run.loss
  return MultiLabel(num_classes=int(nc), mixup_alpha=loss.mixup_alpha, cutmix_alpha=loss.cutmix_alpha,
                    mix_switch_prob=loss.mix_switch_prob)
