"""The picture of a localisation evaluation: true and predicted segments of a few videos on their time axes.

    draw(aggregator, f, videos=4, top=None)   PNG into the file `f`: per video two rows, the ground truth above
                                               and the best detections below (as many as it has true segments,
                                               at least 3, or `top`), coloured by class, opacity by score
"""
import numpy as np

from vvt.tasks import eval_report


def _rows(agg, videos: int):
  """[(video id, truth (segments s, labels), detections (segments s, scores, labels))] of the first `videos`."""
  seq, out = agg.sequences, []
  for i in sorted(agg.found)[:videos]:
    out.append((seq.video_ids[i], (seq.seconds(i, seq.segments[i]), seq.labels[i]), agg.found[i]))
  return out


def draw(agg, f, videos: int = 4, top=None) -> None:
  """See the module docstring."""
  rows = _rows(agg, videos)
  fig, ax = eval_report.new_figure((9, 0.9 + 0.8 * max(1, len(rows))))
  colours = [f'C{c % 10}' for c in range(max(1, agg.task.num_classes))]
  ticks = []
  for n, (vid, (true_segs, true_labels), (segs, scores, labels)) in enumerate(rows):
    y = -2.0 * n
    for (a, b), c in zip(true_segs, true_labels, strict=True):
      ax.barh(y, b - a, left=a, height=0.7, color=colours[int(c) % len(colours)])
    best = int(top or max(3, len(true_labels)))
    for (a, b), s, c in list(zip(segs, scores, labels, strict=True))[:best]:
      ax.barh(y - 0.8, b - a, left=a, height=0.7, color=colours[int(c) % len(colours)],
              alpha=float(np.clip(s, 0.15, 1.0)))
    ticks += [(y, f'{vid} true'), (y - 0.8, 'predicted')]
  if ticks:
    ax.set_yticks([t for t, _ in ticks], [name for _, name in ticks], fontsize=8)
  for c, name in enumerate(agg.class_names[:10]):
    ax.barh(np.nan, 0, color=colours[c % len(colours)], label=name)
  ax.legend(loc='upper right', fontsize=7, ncol=min(5, len(agg.class_names) or 1))
  ax.set_xlabel('seconds')
  eval_report.save_png(fig, ax, f, 'true (above) and predicted (below) segments')
