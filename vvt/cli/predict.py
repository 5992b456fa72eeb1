"""`vvt predict`: classify video files with a trained or converted checkpoint.

  vvt predict --workdir runs/divided [--step N] clip.mp4 other.webm frames_dir/ videos_dir/
  vvt predict --checkpoint runs/tsf_k400 --top_k 3 --json videos/ > predictions.json
  vvt predict --workdir runs/divided --window 2 --stride 1 --out timeline/ long_video.mp4

Each input is a video file (mp4, webm, avi, ... decoded with PyAV), a folder of frames (images, sorted
by name) or a folder of those. Every video gives the config's evaluation views (num_test_clips x
num_spatial_crops, same sampling, crops and normalisation as `vvt eval`; override them with
`--config.dataset.num_test_clips=...`), views of many videos are batched, the scores are averaged per
video as in evaluation (`eval.average`), and the top-k classes are printed with their probabilities
(class names from the checkpoint's config, else the dataset's classes.txt). Every task (`vvt.cli.predict_model`):
a classification run's probabilities are a softmax over the classes; a multi-label run's are each class's own
sigmoid probability (they need not sum to 1); a probe run predicts with its best probe (the one its evaluation
of that step names, as `vvt eval` reports it) or `--probe NAME`. `--json`: one JSON object on stdout (`probabilities`:
'softmax' or 'sigmoid'); `--logits`: also every view's logits (JSON `logits`: (views, C) per video; text: their
mean). Paths that do not exist are refused at once, before the model loads (one line, exit 2); a file that
cannot be read is reported on stderr and skipped; the exit code is 1 if any was, after all the others were
predicted.

`--window S [--stride S2]` (seconds, or frames as `15f`): every window of a video of any length, decoded as the
windows advance (memory of one window), with a per-window CSV, a timeline PNG, the average over the windows and
the segments where the top class changes (`vvt.cli.predict_windows`).
"""
import json
import os
import sys

from vvt import fileio
from vvt.cli import common


def _locate(args) -> tuple:
  """(workdir, step) of --workdir/--step or --checkpoint (a converted DIR or DIR/checkpoints/N)."""
  if bool(args.workdir) == bool(args.checkpoint):
    raise common.UsageError('give exactly one of --workdir DIR and --checkpoint PATH')
  if args.workdir:
    return args.workdir, args.step
  path = os.path.normpath(args.checkpoint)
  base, name = os.path.split(path)
  if name.isdigit() and os.path.basename(base) == 'checkpoints':
    return os.path.dirname(base), int(name)
  if os.path.basename(path) == 'checkpoints':
    return os.path.dirname(path), args.step
  if not os.path.isdir(os.path.join(path, 'checkpoints')):
    raise common.UsageError(f'--checkpoint {args.checkpoint}: not a converted checkpoint directory '
                            '(no checkpoints/ in it; `vvt convert --output DIR` writes one)')
  return path, args.step


def _inputs(paths) -> list:
  """[(name, kind, path)] of the inputs (`video_files.find_inputs`), before any model is loaded: inputs that do
  not exist, or folders with nothing to read, are one UsageError naming them all."""
  from vvt.data import find_inputs
  items = find_inputs(paths)
  missing = [name for name, kind, _ in items if kind == 'missing']
  if missing:
    raise common.UsageError(f'no video file or frame folder at {", ".join(missing)} (a folder must hold videos, '
                            'frames, or folders of frames)')
  return items


def _batches(items, views_of, batch_size, log_error):
  """Yields (uint8 (B, T, S, S, 3) padded, [(item number, row) ...]) over readable items."""
  import numpy as np
  rows, owners = [], []
  for n, item in enumerate(items):
    try:
      v = views_of(item)
    except Exception as e:  # (reported, skipped)
      log_error(n, common.one_line(e))
      continue
    rows.extend(v)
    owners.extend([n] * len(v))
    while len(rows) >= batch_size:
      yield np.stack(rows[:batch_size]), owners[:batch_size], n
      rows, owners = rows[batch_size:], owners[batch_size:]
  if rows:
    pad = [np.zeros_like(rows[0])] * (batch_size - len(rows))
    yield np.stack(rows + pad), owners, len(items) - 1


def _top(probs, names, k):
  import numpy as np
  order = np.argsort(-probs, kind='stable')[:k]
  return [{'class': int(c), 'name': names[c], 'probability': float(probs[c])} for c in order]


def _parser():
  p = common.Parser('vvt predict', __doc__, config=True)
  p.add_argument('inputs', nargs='+', metavar='VIDEO_OR_DIR', help='video files, frame folders, folders')
  p.add_argument('--workdir', help='a training run directory (its config.json and checkpoints/)')
  p.add_argument('--checkpoint', help='a converted checkpoint: `vvt convert --output DIR` (or DIR/checkpoints/N)')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--top_k', type=int, default=5, help='classes printed per video (default 5)')
  p.add_argument('--batch_size', type=int, default=None, help='views per batch (default: eval.batch_size)')
  p.add_argument('--json', action='store_true', help='print one JSON list instead of text')
  p.add_argument('--logits', action='store_true',
                 help='also the logits of every view (JSON: `logits`, (views, C) per video; text: their mean)')
  p.add_argument('--probe', default=None, metavar='NAME',
                 help='a probe run: the probe to predict with (default: the best of its evaluation of the step)')
  p.add_argument('--window', default=None, metavar='S',
                 help='score every window of S seconds (or 15f: frames) of each video, of any length; default '
                      'with --stride: the model\'s clip span. Writes OUT/NAME.windows.csv and .timeline.png')
  p.add_argument('--stride', default=None, metavar='S2',
                 help='seconds (or frames: 8f) from one window\'s start to the next (default: the window)')
  p.add_argument('--out', default='.', help='folder of the --window CSV and PNG files (default: .)')
  p.add_argument('--fps', type=float, default=25.0, help='frame rate of frame folders with --window (default 25)')
  return p


def _score_videos(predict, items, heads, data, batch_size, keep_logits=False):
  """(sums {head: (N, C) float64}, views per video (N,), {item number: error}, logits {item number: {head: [(C,)
  per view]}} (with `keep_logits`)): the views' scores of every readable input summed per video; unreadable inputs
  are reported on stderr and skipped."""
  import numpy as np

  from vvt import progress
  from vvt.data import load_views
  sums = {h: np.zeros((len(items), c)) for h, c in heads.items()}
  counts = np.zeros(len(items), np.int64)
  failed, logits = {}, {}
  bar = progress.bar(len(items), 'predict', 'video', disable=len(items) < 2, file=sys.stderr)

  def log_error(n, text):
    failed[n] = text
    bar.write(f'vvt predict: skipped {text}', file=sys.stderr)

  done = 0
  for x, owners, last in _batches(items, lambda it: load_views(it[2], it[1], data),
                                  batch_size, log_error):
    scores, outputs = predict(x)
    for h in heads:
      np.add.at(sums[h], owners, np.asarray(scores[h], np.float64)[:len(owners)])
      for row, n in enumerate(owners if keep_logits else ()):
        logits.setdefault(n, {}).setdefault(h, []).append(np.asarray(outputs[h][row], np.float64))
    np.add.at(counts, owners, 1)
    bar.update(last + 1 - done)
    done = last + 1
  bar.update(len(items) - done)
  bar.close()
  return sums, counts, failed, logits


def _records(items, scored, heads, names, average, top_k) -> list:
  """One record per predicted video: input, kind, views, the top classes of each head and, where kept, the
  views' logits (`logits[_head]`: (views, C) lists)."""
  from vvt.cli import predict_model
  sums, counts, failed, logits = scored
  out = []
  for n, (name, kind, _) in enumerate(items):
    if n in failed or counts[n] == 0:
      continue
    rec = {'input': name, 'kind': kind, 'views': int(counts[n])}
    for h in heads:
      probs = predict_model.probabilities(sums[h][n][None] / counts[n], average)[0]
      rec['top' if not h else f'top_{h}'] = _top(probs, names[h], min(top_k, heads[h]))
      if n in logits:
        rec['logits' if not h else f'logits_{h}'] = [row.tolist() for row in logits[n][h]]
    out.append(rec)
  return out


def _print_text(records, heads) -> None:
  import numpy as np
  for rec in records:
    for h in heads:
      top = rec['top' if not h else f'top_{h}']
      text = ', '.join(f'{t["name"]} {t["probability"]:.3f}' for t in top)
      print(f'{rec["input"]}{" [" + h + "]" if h else ""}: {text}')
      logits = rec.get('logits' if not h else f'logits_{h}')
      if logits is not None:
        mean = np.mean(np.asarray(logits), axis=0)
        print(f'  logits (mean of {len(logits)} views): {" ".join(f"{v:.4f}" for v in mean)}')


def _check_args(args) -> None:
  """The arguments' own problems (UsageError, one line), before any file is read."""
  if args.top_k < 1:
    raise common.UsageError(f'--top_k must be >= 1, got {args.top_k}')
  if args.logits and (args.window is not None or args.stride is not None):
    raise common.UsageError('--logits gives the views\' logits of whole videos: it does not combine with --window')
  if args.window is not None or args.stride is not None:
    from vvt.cli import predict_windows
    predict_windows.check_spans(args)


def _predict(argv):
  args, spec, overrides = common.parse(_parser(), argv)
  _check_args(args)
  workdir, step = _locate(args)
  items = _inputs(args.inputs)  # every path checked before the model is loaded
  run = common.run_spec(spec, overrides, workdir, purpose='predict')  # needs no dataset files
  from vvt.cli import predict_model
  from vvt.data import class_names
  from vvt.data import label_names
  model = predict_model.load(run, workdir, step, args.probe)
  heads = model.heads
  names = {h: label_names(class_names(run.data, h), c) for h, c in heads.items()}
  from vvt.data import views_per_video
  views = views_per_video(run.data)  # None: as many as each video needs ('all')
  batch_size = max(views or 1, int(args.batch_size or run.eval.batch_size))
  if args.window is not None or args.stride is not None:
    from vvt.cli import predict_windows
    return predict_windows.run(args, run, model, names, batch_size, items)
  scored = _score_videos(model.predict, items, heads, run.data, batch_size, keep_logits=args.logits)
  out = _records(items, scored, heads, names, model.average, args.top_k)
  failed = scored[2]
  if args.json:
    print(json.dumps({'workdir': fileio.abspath(workdir), 'step': model.step, 'probe': model.probe,
                      'probabilities': 'sigmoid' if model.average == predict_model.SIGMOID else 'softmax',
                      'views_per_video': views, 'predictions': out,
                      'failed': [{'input': items[n][0], 'error': e} for n, e in sorted(failed.items())]},
                     indent=1))
  else:
    _print_text(out, heads)
  if failed:
    print(f'vvt predict: {len(failed)} of {len(items)} inputs could not be read', file=sys.stderr)
    return 1
  return 0


def main(argv) -> int:
  return common.run('vvt predict', _predict, argv)
