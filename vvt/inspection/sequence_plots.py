"""A picture of one video's feature sequence (`vvt features --window`) beside its annotated segments.

    sequence_png('seq.png', features (N, D), centres (N,) seconds, segments=((start_s, end_s, label), ...),
                 labels=('down', 'up', ...), title='training_0000')

Top: the features over time, each dimension standardised over the video (an image: time across, the D dimensions
down), so what changes stands out whatever the scale of the dimensions. Middle: how much the representation moves
from one window to the next (1 - cosine similarity of consecutive rows, at the midpoint of their centres): peaks
where the content changes. Bottom: the annotated segments (`vvt.data.read_annotations`), named by label.
"""
from __future__ import annotations

import numpy as np

from vvt import fileio


def change(features: np.ndarray) -> np.ndarray:
  """(N - 1,) 1 - cosine similarity of consecutive rows of features (N, D) (0: the same direction)."""
  x = np.asarray(features, np.float64)
  norms = np.linalg.norm(x, axis=1)
  cos = (x[1:] * x[:-1]).sum(1) / np.maximum(norms[1:] * norms[:-1], 1e-12)
  return 1.0 - cos


def _standardised(features: np.ndarray) -> np.ndarray:
  x = np.asarray(features, np.float64)
  return (x - x.mean(0)) / np.maximum(x.std(0), 1e-6)


def sequence_png(path: str, features: np.ndarray, centres, segments=(), labels=(), title: str = '') -> None:
  """Writes the picture (see the module docstring) of features (N, D) at `centres` (N,) seconds, with `segments`
  ((start_s, end_s, label index), ...) named by `labels`."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  centres = np.asarray(centres, np.float64)
  half = (centres[1] - centres[0]) / 2 if len(centres) > 1 else 0.5
  span = (centres[0] - half, centres[-1] + half)
  fig, (top, mid, band) = plt.subplots(3, 1, figsize=(10, 4.4), sharex=True,
                                       gridspec_kw={'height_ratios': [4, 2, 1]})
  top.imshow(_standardised(features).T, aspect='auto', cmap='RdBu_r', vmin=-3, vmax=3, interpolation='nearest',
             extent=(span[0], span[1], features.shape[1], 0))
  top.set_ylabel('dimension')
  top.set_title(title, fontsize=9)
  mid.plot((centres[1:] + centres[:-1]) / 2, change(features), '-', lw=1.2, color='black')
  mid.set_ylabel('1 - cos\n(next window)', fontsize=8)
  for start, end, label in segments:
    name = labels[label] if label < len(labels) else str(label)
    colour = plt.get_cmap('tab10')(int(label) % 10)
    band.axvspan(start, end, color=colour, lw=0)
    mid.axvspan(start, end, color=colour, alpha=0.15, lw=0)
    band.text((start + end) / 2, 0.5, name, ha='center', va='center', fontsize=7)
  band.set_yticks([])
  band.set_ylabel('annotated', rotation=0, ha='right', va='center', fontsize=8)
  band.set_xlabel('time (s)')
  band.set_xlim(*span)
  fig.tight_layout()
  fileio.save_png(path, fig, dpi=110)
  plt.close(fig)
