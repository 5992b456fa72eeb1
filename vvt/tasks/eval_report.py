"""What an evaluation says per class and per video: confusion matrices, per-class accuracy, tables.

Pure functions on the per-video averaged scores of `vvt.tasks.multiview.MultiViewAggregator`:

    topk_classes(scores (N, C), k)          -> (N, k) class indices, best first
    probabilities(scores (N, C), average)   -> (N, C) softmax of averaged logits (or the averaged softmax)
    confusion_matrix(pred (N,), labels (N,), C) -> (C, C) int64, rows true, columns predicted
    per_class_accuracy(conf (C, C))         -> (C,) float, NaN for a class with no video
    topk_levels(num_classes)                -> the k of top-k worth reporting: 1, and 5 when 5 < C

and the writers of the report files beside an evaluation's JSON: per-video CSV, per-class CSV,
confusion matrix CSV and PNG.
"""
import csv
import io
from typing import Optional, Sequence

import numpy as np

TOPK = 5


def topk_levels(num_classes: int) -> tuple:
  """Top-k levels reported for `num_classes` classes: top-1 always, top-5 only when 5 < C."""
  return (1, TOPK) if TOPK < num_classes else (1,)


def topk_classes(scores: np.ndarray, k: int) -> np.ndarray:
  """(N, C) scores -> (N, min(k, C)) class indices, highest score first (ties: lower index)."""
  k = min(k, scores.shape[-1])
  return np.argsort(-scores, axis=-1, kind='stable')[:, :k]


def probabilities(scores: np.ndarray, average: str = 'logits') -> np.ndarray:
  """(N, C) averaged scores -> probabilities: softmax of averaged logits, or the averaged softmax."""
  scores = np.asarray(scores, np.float64)
  if average == 'softmax':
    return scores
  e = np.exp(scores - scores.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def confusion_matrix(pred: np.ndarray, labels: np.ndarray, num_classes: int) -> np.ndarray:
  """(C, C) int64 counts: row = true class, column = predicted class."""
  conf = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(conf, (np.asarray(labels, np.int64), np.asarray(pred, np.int64)), 1)
  return conf


def per_class_accuracy(conf: np.ndarray) -> np.ndarray:
  """(C,) recall of each class (diagonal / row sum); NaN for a class with no video."""
  support = conf.sum(1)
  with np.errstate(invalid='ignore', divide='ignore'):
    return np.where(support > 0, np.diag(conf) / np.maximum(support, 1), np.nan)


def mean_class_accuracy(acc: np.ndarray) -> float:
  """Mean of the per-class accuracies over the classes that have videos."""
  present = acc[~np.isnan(acc)]
  return float(present.mean()) if present.size else float('nan')


def pair_accuracy(pred_a, pred_b, lab_a, lab_b) -> tuple:
  """Per-class accuracy of (a, b) pairs (Epic actions = (verb, noun)) over the pairs present.

  Returns (sorted list of (a, b) pairs, (P,) accuracy of each pair).
  """
  pairs = np.stack([lab_a, lab_b], 1)
  right = (np.asarray(pred_a) == lab_a) & (np.asarray(pred_b) == lab_b)
  keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
  inverse = inverse.reshape(-1)
  acc = np.bincount(inverse, weights=right, minlength=len(keys)) / np.bincount(inverse, minlength=len(keys))
  return [tuple(int(x) for x in k) for k in keys], acc


# ----------------------------------------------------------------------------- files


def _csv_text(header: Sequence[str], rows) -> str:
  buf = io.StringIO()
  w = csv.writer(buf, lineterminator='\n')
  w.writerow(header)
  for r in rows:
    w.writerow(r)
  return buf.getvalue()


def _fmt(x) -> str:
  return '' if isinstance(x, float) and np.isnan(x) else (f'{x:.6g}' if isinstance(x, float) else str(x))


def videos_csv(video_ids: Sequence[str], indices: np.ndarray, heads: dict, views=None) -> str:
  """Per-video table. `heads`: {head: (labels (N,), probs (N, C), names list)}; one video per row:
  video_index, video_id, views (the views its scores average, with `views` (N,) given), then per head
  (suffix `_<head>` for named heads) label, label_name, top<i>_name / top<i>_score for i = 1..min(5, C),
  correct; `correct_action` when two heads."""
  header, cols = ['video_index', 'video_id'] + ([] if views is None else ['views']), []
  correct_all = np.ones(len(indices), bool)
  for h, (lab, probs, names) in heads.items():
    sfx = f'_{h}' if h else ''
    top = topk_classes(probs, TOPK)
    right = top[:, 0] == lab
    correct_all &= right
    header += [f'label{sfx}', f'label_name{sfx}']
    header += [f'top{i + 1}_{w}{sfx}' for i in range(top.shape[1]) for w in ('name', 'score')]
    header.append(f'correct{sfx}')
    cols.append((lab, probs, names, top, right))
  if len(heads) > 1:
    header.append('correct_action')
  rows = []
  for n, vi in enumerate(indices):
    row = [int(vi), video_ids[int(vi)] if int(vi) < len(video_ids) else str(int(vi))]
    row += [] if views is None else [int(views[n])]
    for lab, probs, names, top, right in cols:
      row += [int(lab[n]), names[int(lab[n])]]
      for c in top[n]:
        row += [names[int(c)], f'{probs[n, c]:.6f}']
      row.append(int(right[n]))
    if len(heads) > 1:
      row.append(int(correct_all[n]))
    rows.append(row)
  return _csv_text(header, rows)


def classes_csv(names: Sequence[str], conf: np.ndarray) -> str:
  """Per-class table: class, name, videos, correct, accuracy (empty for a class with no video)."""
  acc = per_class_accuracy(conf)
  rows = [(c, names[c], int(conf[c].sum()), int(conf[c, c]), _fmt(float(acc[c])))
          for c in range(len(names))]
  return _csv_text(['class', 'name', 'videos', 'correct', 'accuracy'], rows)


def pairs_csv(pairs, acc, counts, names_a, names_b) -> str:
  """Per-action table (Epic): verb, noun, names, videos, accuracy."""
  rows = [(a, b, f'{names_a[a]}/{names_b[b]}', int(n), _fmt(float(x)))
          for (a, b), x, n in zip(pairs, acc, counts, strict=True)]
  return _csv_text(['class_a', 'class_b', 'name', 'videos', 'accuracy'], rows)


def confusion_csv(names: Sequence[str], conf: np.ndarray) -> str:
  """Confusion matrix with names: first column the true class, then one column per predicted class."""
  return _csv_text(['true \\ predicted', *names],
                   ([names[i], *conf[i].tolist()] for i in range(len(names))))


def confusion_png(path_or_file, names: Sequence[str], conf: np.ndarray,
                  title: Optional[str] = None) -> None:
  """Draws the confusion matrix (row-normalised colours, counts written when C <= 20)."""
  c = len(names)
  side = min(3.0 + 0.45 * c, 24.0)
  fig, ax = new_figure((side + 1.5, side))
  rows = conf.sum(1, keepdims=True)
  norm = conf / np.maximum(rows, 1)
  im = ax.imshow(norm, cmap='Blues', vmin=0, vmax=1)
  fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label='share of the true class')
  if c <= 40:
    class_ticks(ax, names, y=True)
  if c <= 20:
    for i in range(c):
      for j in range(c):
        ax.text(j, i, str(int(conf[i, j])), ha='center', va='center', fontsize=9,
                color='white' if norm[i, j] > 0.5 else 'black')
  ax.set_xlabel('predicted')
  ax.set_ylabel('true')
  save_png(fig, ax, path_or_file, title)


def new_figure(figsize: tuple):
  """(figure, axes) of a new off-screen matplotlib figure of `figsize` inches."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  return plt.subplots(figsize=figsize)


def class_ticks(ax, names: Sequence[str], y: bool = False) -> None:
  """Class names as the x tick labels of `ax` (slanted), and as the y ones when `y`."""
  size = 8 if len(names) > 10 else 10
  ax.set_xticks(range(len(names)), names, rotation=45, ha='right', fontsize=size)
  if y:
    ax.set_yticks(range(len(names)), names, fontsize=size)


def save_png(fig, ax, path_or_file, title: str = '') -> None:
  """Titles `ax` (when `title`), lays `fig` out, writes it as a PNG and closes it."""
  import matplotlib.pyplot as plt
  if title:
    ax.set_title(title)
  fig.tight_layout()
  fig.savefig(path_or_file, dpi=90, format='png')
  plt.close(fig)
