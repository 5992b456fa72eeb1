"""A video's class probabilities over time, window by window (`vvt predict --window`).

    segments(top, starts_s, ends_s)           -> [(start_s, end_s, class, first window, last window)]
    write_csv(path, windows, probs, names, k) the per-window table: window, start/end (s and frames), top-k
    timeline_png(path, windows, probs, names) the top classes' probabilities over time, and the top class as a
                                              coloured band

`windows` are (index, start frame, end frame, start_s, end_s) rows, `probs` float (num_windows, C). A segment is
a run of windows with the same top class; it starts where its first window starts and ends where the next
segment's first window starts (the last: where its last window ends).
"""
from __future__ import annotations

import csv
import io

import numpy as np

from vvt import fileio

MAX_PLOTTED = 8  # classes drawn as curves: those that are ever on top, then the best on average


def segments(top, starts_s, ends_s) -> list:
  """Runs of equal `top` (int (W,)): [(start_s, end_s, class, first window, last window)]."""
  out, first = [], 0
  for i in range(1, len(top) + 1):
    if i == len(top) or top[i] != top[first]:
      end = starts_s[i] if i < len(top) else ends_s[i - 1]
      out.append((float(starts_s[first]), float(end), int(top[first]), first, i - 1))
      first = i
  return out


def write_csv(path: str, windows, probs: np.ndarray, names, top_k: int) -> None:
  """One row per window: window, start_s, end_s, start_frame, end_frame, then name and probability of the top-k."""
  k = min(top_k, probs.shape[1])
  buf = io.StringIO()
  w = csv.writer(buf)
  w.writerow(['window', 'start_s', 'end_s', 'start_frame', 'end_frame']
             + [f'{c}{j}' for j in range(1, k + 1) for c in ('top', 'p')])
  for (index, start, end, start_s, end_s), p in zip(windows, probs, strict=True):
    order = np.argsort(-p, kind='stable')[:k]
    w.writerow([index, f'{start_s:.3f}', f'{end_s:.3f}', start, end]
               + [x for c in order for x in (names[c], f'{p[c]:.4f}')])
  fileio.atomic_write_text(path, buf.getvalue())


def _plotted(probs: np.ndarray) -> list:
  ever_top = list(dict.fromkeys(np.argmax(probs, 1).tolist()))
  by_mean = [int(c) for c in np.argsort(-probs.mean(0), kind='stable') if c not in ever_top]
  return (ever_top + by_mean)[:MAX_PLOTTED]


def timeline_png(path: str, windows, probs: np.ndarray, names, title: str = '') -> None:
  """Top: the probability of the top classes at each window's centre; bottom: the top class of each window."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  starts = np.asarray([w[3] for w in windows], float)
  ends = np.asarray([w[4] for w in windows], float)
  centres, top = (starts + ends) / 2, np.argmax(probs, 1)
  classes = _plotted(probs)
  colour = {c: plt.get_cmap('tab10')(i % 10) for i, c in enumerate(classes)}
  fig, (ax, band) = plt.subplots(2, 1, figsize=(10, 3.6), sharex=True, gridspec_kw={'height_ratios': [4, 1]})
  for c in classes:
    ax.plot(centres, probs[:, c], '-', lw=1.3, color=colour[c], label=names[c],
            marker='.' if len(centres) < 60 else None)
  ax.set_ylim(-0.02, 1.02)
  ax.set_ylabel('probability')
  ax.legend(loc='upper left', bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
  ax.set_title(title, fontsize=9)
  for start, end, c, _, _ in segments(top, starts, ends):
    band.axvspan(start, end, color=colour.get(c, 'grey'), lw=0)
    if end - start > 0.06 * (ends[-1] - starts[0]):
      band.text((start + end) / 2, 0.5, names[c], ha='center', va='center', fontsize=7)
  band.set_yticks([])
  band.set_ylabel('top', rotation=0, ha='right', va='center')
  band.set_xlabel('time (s)')
  band.set_xlim(starts[0], ends[-1])
  fig.tight_layout()
  fileio.save_png(path, fig, dpi=110)
  plt.close(fig)
