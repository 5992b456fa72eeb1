"""Classification's multi-view aggregation: per-view scores summed per video, top-k, per-class accuracy, report.

`MultiViewAggregator` sums the per-view scores (logits, or softmax when `eval.average == 'softmax'`) of every
video over its valid views and averages them, giving per-clip (per-view) and per-video top-1 (and top-5 when
there are more than 5 classes), per-class and mean class accuracy, and for two-head datasets (Epic-Kitchens) the
same per head and for actions (action = both heads right). Its `arrays()` are the `.npz` of an evaluation, its
`report_files(prefix)` the files beside it:

    P_videos.csv           per video: id, label name, top-5 names and probabilities, correct
    P_classes[_head].csv   per class: videos, correct, accuracy (and _action for two heads)
    P_confusion[_head].csv / .png   the confusion matrix
"""
from typing import Mapping

from etils import epath
import numpy as np

from vvt.tasks import eval_report
from vvt.tasks import video_views


def _topk_correct(scores: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
  k = min(k, scores.shape[-1])
  top = np.argpartition(-scores, k - 1, axis=-1)[:, :k]
  return (top == labels[:, None]).any(axis=-1)


class MultiViewAggregator(video_views.VideoViews):
  """Accumulates per-view scores into per-video sums using video_index and mask (`video_views.VideoViews`:
  skipped videos, class names, video ids)."""

  def __init__(self, heads: Mapping[str, int], num_videos: int):
    super().__init__(heads, num_videos)
    self.sums = {h: np.zeros((self.num_videos, c), np.float64) for h, c in self.heads.items()}
    self.video_labels = {h: np.full((self.num_videos,), -1, np.int64) for h in self.heads}
    self.clip_correct = {h: {1: 0, 5: 0} for h in self.heads}
    self.clip_action_correct = 0

  def add(self, scores: Mapping[str, np.ndarray], video_index: np.ndarray,
          mask: np.ndarray, labels: Mapping[str, np.ndarray]) -> None:
    views = self._valid_views(video_index, mask)
    if views is None:
      return
    valid, vi = views
    self._count_views(vi)
    action = np.ones(vi.shape, bool)
    for h in self.heads:
      s = np.asarray(scores[h])[valid].astype(np.float64)
      lab = np.asarray(labels[h])[valid].astype(np.int64)
      np.add.at(self.sums[h], vi, s)
      known = self.video_labels[h][vi]
      clash = (known >= 0) & (known != lab)
      if clash.any():
        raise ValueError(f'video {int(vi[clash][0])} has views with different '
                         f'labels{" for head " + h if h else ""}')
      self.video_labels[h][vi] = lab
      c1 = _topk_correct(s, lab, 1)
      action &= c1
      self.clip_correct[h][1] += int(c1.sum())
      self.clip_correct[h][5] += int(_topk_correct(s, lab, 5).sum())
    self.clip_action_correct += int(action.sum())

  def result(self) -> dict:
    """Metrics over the evaluated videos (JSON-ready)."""
    keep = self._kept()
    counts = self.counts[keep]
    out = self._view_stats(keep)
    action = np.ones((keep.size,), bool)
    preds = {}
    for h, c in self.heads.items():
      sfx = f'_{h}' if h else ''
      avg = self.sums[h][keep] / counts[:, None]
      lab = self.video_labels[h][keep]
      levels = eval_report.topk_levels(c)
      v1 = _topk_correct(avg, lab, 1)
      action &= v1
      preds[h] = avg.argmax(-1)
      for k in levels:
        out[f'video_top{k}{sfx}'] = float(_topk_correct(avg, lab, k).mean())
        out[f'clip_top{k}{sfx}'] = self.clip_correct[h][k] / max(self.num_views, 1)
      acc = eval_report.per_class_accuracy(eval_report.confusion_matrix(preds[h], lab, c))
      out[f'video_mean_class_accuracy{sfx}'] = eval_report.mean_class_accuracy(acc)
      out[f'video_per_class_accuracy{sfx}'] = {
          name: (None if np.isnan(a) else float(a)) for name, a in zip(self.names(h), acc, strict=True)}
    if len(self.heads) > 1:
      out['video_top1_action'] = float(action.mean())
      out['clip_top1_action'] = self.clip_action_correct / max(self.num_views, 1)
      (ha, hb) = list(self.heads)[:2]
      _, acc = eval_report.pair_accuracy(preds[ha], preds[hb], self.video_labels[ha][keep],
                                         self.video_labels[hb][keep])
      out['video_mean_class_accuracy_action'] = eval_report.mean_class_accuracy(acc)
    out['class_names'] = {h or 'label': self.names(h) for h in self.heads} if len(self.heads) > 1 \
        else self.names('' if '' in self.heads else list(self.heads)[0])
    return out

  def video_scores(self) -> dict:
    return {h: (self.sums[h] / np.maximum(self.counts, 1)[:, None]).astype(np.float32)
            for h in self.heads}

  def arrays(self) -> dict:
    """The `.npz` arrays: `video_scores[_head]` float32 (num_videos, num_classes), `video_labels[_head]` int64
    (num_videos,), `class_names[_head]` str (num_classes,), `views_per_video` int64, `skipped` bool and
    `video_ids` str (num_videos,)."""
    sfx = lambda h: '_' + h if h else ''
    out = {f'video_scores{sfx(h)}': v for h, v in self.video_scores().items()}
    out.update({f'video_labels{sfx(h)}': v for h, v in self.video_labels.items()})
    out.update({f'class_names{sfx(h)}': np.array(self.names(h)) for h in self.heads})
    out['views_per_video'] = self.counts
    out['skipped'] = self.skipped
    out['video_ids'] = np.array(self._id_list())
    return out

  def report_files(self, prefix: str) -> list:
    """(path, text or png writer) of the per-video, per-class and confusion files named `prefix`_*."""
    return report_files(prefix, self)


def report_files(prefix: str, agg) -> list:
  """(path, text or png writer) of the per-video, per-class and confusion files."""
  keep = agg.evaluated()
  counts = np.maximum(agg.counts[keep], 1)[:, None]
  ids = agg.video_ids or [str(i) for i in range(agg.num_videos)]
  tables, files = {}, []
  for h, c in agg.heads.items():
    scores = agg.sums[h][keep] / counts
    lab = agg.video_labels[h][keep]
    names = agg.names(h)
    probs = eval_report.probabilities(scores, agg.average)
    tables[h] = (lab, probs, names)
    conf = eval_report.confusion_matrix(probs.argmax(-1), lab, c)
    sfx = f'_{h}' if h else ''
    files.append((f'{prefix}_classes{sfx}.csv', eval_report.classes_csv(names, conf)))
    files.append((f'{prefix}_confusion{sfx}.csv', eval_report.confusion_csv(names, conf)))
    title = f'{epath.Path(prefix).name}{" " + h if h else ""}'
    files.append((f'{prefix}_confusion{sfx}.png',
                  lambda f, n=names, m=conf, t=title: eval_report.confusion_png(f, n, m, t)))
  files.insert(0, (f'{prefix}_videos.csv', eval_report.videos_csv(ids, keep, tables, views=agg.counts[keep])))
  if len(agg.heads) > 1:
    (ha, (la, pa, na)), (hb, (lb, pb, nb)) = list(tables.items())[:2]
    pairs, acc = eval_report.pair_accuracy(pa.argmax(-1), pb.argmax(-1), la, lb)
    n = [int(((la == x) & (lb == y)).sum()) for x, y in pairs]
    files.append((f'{prefix}_classes_action.csv', eval_report.pairs_csv(pairs, acc, n, na, nb)))
  return files
