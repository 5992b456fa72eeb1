"""`vvt predict --window S [--stride S2]`: every window of a video of any length, scored as a short video.

Windows and strides are seconds (`2.5`, `2.5s`) or frames (`15f`); the window defaults to the model's clip span
((num_frames - 1) x dataset.stride + 1 frames), the stride to the window. Frames are decoded as the windows
advance (`vvt.data.transforms.windows`: a ring buffer of one window's frames), each window gives the config's evaluation
views, and its scores are averaged as evaluation averages a video's (`eval.average`). Per video it writes
`OUT/NAME.windows.csv` (window, start and end in seconds and frames, top-k names and probabilities) and
`OUT/NAME.timeline.png` (`vvt.inspection.timeline`), and prints the average of the windows' probabilities and the
segments where the top class changes. A video shorter than a window, or unreadable, is one line on stderr and skipped
(exit code 1 after the others).
"""
import json
import os
import sys

import numpy as np

from vvt.cli import common


def check_spans(args) -> None:
  """--window / --stride well formed and positive (UsageError, one line), before any video is read."""
  from vvt.data import parse_span
  for what in ('window', 'stride'):
    value = getattr(args, what)
    if value is not None:
      try:
        parse_span(value, 1.0, what)
      except ValueError as e:
        raise common.UsageError(str(e)) from None


def _spans(args, fps, data) -> tuple:
  """(window, stride) in frames at `fps`."""
  from vvt.data import parse_span
  span = (int(data.num_frames) - 1) * int(data.stride) + 1
  window = parse_span(args.window, fps, 'window') if args.window else span
  stride = parse_span(args.stride, fps, 'stride') if args.stride else window
  return window, stride


class ViewSums:
  """Views of windows batched through the model; per window, per head, the views' summed scores (or features: any
  (B, C) output per head)."""

  def __init__(self, predict, heads, batch_size):
    self.predict, self.heads, self.batch_size = predict, heads, batch_size
    self.views, self.owners, self.sums = [], [], {h: [] for h in heads}

  def add(self, views) -> None:
    n = len(self.sums[next(iter(self.heads))])
    for h in self.heads:
      self.sums[h].append(0.0)
    self.views.extend(views)
    self.owners.extend([n] * len(views))
    while len(self.views) >= self.batch_size:
      self._run(self.batch_size)

  def _run(self, n) -> None:
    rows = self.views[:n] + [np.zeros_like(self.views[0])] * (self.batch_size - n)
    scores, _ = self.predict(np.stack(rows))  # (scores, logits) of the views
    for h in self.heads:
      s = np.asarray(scores[h], np.float64)
      for j in range(n):
        self.sums[h][self.owners[j]] += s[j]
    self.views, self.owners = self.views[n:], self.owners[n:]

  def finish(self) -> dict:
    if self.views:
      self._run(len(self.views))
    return {h: np.stack(v) for h, v in self.sums.items()}


def score_video(item, predict, heads, data, args, batch_size, tail: bool = True) -> dict:
  """{'fps', 'window', 'stride' (frames), 'rows' [(index, start, end, start_s, end_s)], 'scores' {head: (W, C)
  summed over a window's views}, 'views' (per window), 'peak' (most frames held), 'frames' (the video's)};
  `tail`: also the window ending at the last frame where the stride's grid misses it (`WindowStream`)."""
  from vvt import progress
  from vvt.data import WindowStream
  from vvt.data import open_frames
  from vvt.data import window_starts
  from vvt.data import window_views
  name, kind, path = item
  source = open_frames(path, kind, args.fps)
  window, stride = _spans(args, source.fps, data)
  stream = WindowStream(source.frames(), window, stride, source.fps, name, tail=tail)
  expected = len(window_starts(source.declared, window, stride, tail)) if source.declared else None
  scores, rows = ViewSums(predict, heads, batch_size), []
  with progress.bar(expected, os.path.basename(name), 'window', file=sys.stderr, leave=False,
                    disable=expected is not None and expected < 20) as bar:
    for w in stream:
      rows.append((w.index, w.start, w.end, w.start_s, w.end_s))
      views = window_views(w.frames, data)
      scores.add(views)
      bar.update(1)
  return dict(fps=source.fps, window=window, stride=stride, rows=rows, scores=scores.finish(), views=len(views),
              peak=stream.peak, frames=stream.count)


def _report(item, got, heads, names, average, top_k, out_dir) -> dict:
  """The video's record (per head: windows' top classes, average, segments) and its CSV and PNG files."""
  from vvt.cli import predict_model
  from vvt.data import window_stem
  from vvt.inspection import timeline
  rows = got['rows']
  rec = {'input': item[0], 'kind': item[1], 'fps': got['fps'], 'window_frames': got['window'],
         'stride_frames': got['stride'], 'windows': len(rows), 'heads': {}}
  for h, c in heads.items():
    scores = got['scores'][h] / got['views']  # (W, C): each window's views averaged, as evaluation does
    probs = predict_model.probabilities(scores, average)
    mean = probs.mean(0)  # the windows' probabilities averaged: each window counts once, whatever it shows
    suffix = f'_{h}' if h else ''
    base = os.path.join(out_dir, window_stem(item[0]))
    csv_path, png_path = f'{base}.windows{suffix}.csv', f'{base}.timeline{suffix}.png'
    timeline.write_csv(csv_path, rows, probs, names[h], top_k)
    timeline.timeline_png(png_path, rows, probs, names[h], title=f'{item[0]}{" [" + h + "]" if h else ""}')
    order = np.argsort(-mean, kind='stable')[:min(top_k, c)]
    segs = timeline.segments(np.argmax(probs, 1), [r[3] for r in rows], [r[4] for r in rows])
    rec['heads'][h] = {
        'average': [{'class': int(k), 'name': names[h][k], 'probability': float(mean[k])} for k in order],
        'segments': [{'start_s': s, 'end_s': e, 'class': k, 'name': names[h][k], 'windows': [a, b],
                      'probability': float(probs[a:b + 1, k].mean())} for s, e, k, a, b in segs],
        'csv': csv_path, 'png': png_path}
  return rec


def _print(rec) -> None:
  w, fps = rec['window_frames'], rec['fps']
  for h, r in rec['heads'].items():
    head = f' [{h}]' if h else ''
    avg = ', '.join(f'{t["name"]} {t["probability"]:.3f}' for t in r['average'])
    print(f'{rec["input"]}{head}: average over {rec["windows"]} windows of {w / fps:.2f} s ({w} frames) every '
          f'{rec["stride_frames"] / fps:.2f} s: {avg}')
    for s in r['segments']:
      a, b = s['windows']
      print(f'  {s["start_s"]:8.2f} - {s["end_s"]:8.2f} s  {s["name"]}  {s["probability"]:.3f}  (windows {a}-{b})')
    print(f'  {r["csv"]}  {r["png"]}')


def run(args, spec, model, names, batch_size, items) -> int:
  """Scores, writes and prints every window of every input with `model` (`vvt.cli.predict_model.Model`); 1 if any
  input was skipped."""
  out_dir = args.out or '.'
  os.makedirs(out_dir, exist_ok=True)
  records, failed = [], []
  for item in items:
    try:
      got = score_video(item, model.predict, model.heads, spec.data, args, batch_size)
    except (ValueError, OSError) as e:  # unreadable, or shorter than a window: reported, skipped
      failed.append({'input': item[0], 'error': common.one_line(e)})
      print(f'vvt predict: skipped {common.one_line(e)}', file=sys.stderr)
      continue
    rec = _report(item, got, model.heads, names, model.average, args.top_k, out_dir)
    records.append(rec)
    if not args.json:
      _print(rec)
  if args.json:
    print(json.dumps({'predictions': records, 'failed': failed}, indent=1))
  if failed and len(items) > 1:
    print(f'vvt predict: {len(failed)} of {len(items)} inputs could not be read', file=sys.stderr)
  return 1 if failed else 0
