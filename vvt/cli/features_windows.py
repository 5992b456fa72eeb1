"""`vvt features --window S --stride S2 VIDEO_OR_DIR ...`: the sequence of window features of each long video.

Every window of a video (seconds: `2`, `2.5s`; frames: `16f`, or `--window_frames 16`; the window defaults to the
model's clip span, the stride to the window) is read as `vvt predict --window` reads it (`vvt.cli.predict_windows`:
decoded as the windows advance, one window's frames in memory), gives the config's evaluation views, and its
feature is the views' mean embedding (the model's representation, or --layers/--combine). Windows start every
stride from the first frame; none is added at the tail, so row i stands for frames [i * stride, i * stride + window)
and its centre. Per video OUTPUT/sequences/{video_id}.npy float32 (N_windows, D) and, last, OUTPUT/sequences.json
(`vvt.data.feature_sequences`). A video shorter than one window, or unreadable, is one line on stderr, listed in
sequences.json's `videos_skipped` and counted at the end (exit code 1 after the others). `--plot`: also
OUTPUT/plots/{video_id}.png (`vvt.inspection.sequence_plots`), with the segments of `--annotations FILE` (an
ActivityNet-style JSON or a THUMOS14 folder, `vvt.data.read_annotations`, read before the model loads) where it
annotates the video.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from vvt.cli import common


def _span_header(text, frames, what) -> dict:
  """{what_seconds, what_frames} of sequences.json: seconds as given, or None where given in frames."""
  if frames is not None:
    return {f'{what}_seconds': None, f'{what}_frames': int(frames)}
  if text is None:
    return {f'{what}_seconds': None, f'{what}_frames': None}
  t = str(text).strip().lower()
  if t.endswith('f'):
    return {f'{what}_seconds': None, f'{what}_frames': int(round(float(t[:-1])))}
  return {f'{what}_seconds': float(t.rstrip('s')), f'{what}_frames': None}


def check_args(args) -> None:
  """The window arguments' own problems (UsageError, one line) before any file is read; sets args.window and
  args.stride from --window_frames / --stride_frames."""
  from vvt.cli import predict_windows
  for what in ('window', 'stride'):
    frames = getattr(args, f'{what}_frames')
    if frames is None:
      continue
    if getattr(args, what) is not None:
      raise common.UsageError(f'give one of --{what} and --{what}_frames')
    if frames < 1:
      raise common.UsageError(f'--{what}_frames must be a positive number of frames, got {frames}')
    setattr(args, what, f'{frames}f')
  predict_windows.check_spans(args)
  if args.tokens or args.split:
    raise common.UsageError(f'--{"tokens" if args.tokens else "split"} is for the features of a dataset split: '
                            'it does not combine with --window')


def _list_file(path: str) -> list:
  """The video paths of a list file: one a line (a CSV/TSV line: its first field; a header `path` skipped),
  relative paths from the list's folder."""
  root = os.path.dirname(os.path.abspath(path))
  out = []
  with open(path, encoding='utf-8') as f:
    for line in f:
      first = line.strip().replace('\t', ',').split(',')[0].strip()
      if first and first.lower() != 'path' and not first.startswith('#'):
        out.append(first if os.path.isabs(first) else os.path.join(root, first))
  return out


def inputs(args) -> tuple:
  """([(name, kind, path)], {video_id: path}) of the positional inputs and --list; UsageError naming inputs that do
  not exist, an empty selection, or two videos with one id."""
  from vvt.cli import predict
  from vvt.data import sequence_ids
  paths = list(args.inputs)
  if args.list:
    if not os.path.isfile(args.list):
      raise common.UsageError(f'--list {args.list}: no such file')
    paths += _list_file(args.list)
  if not paths:
    raise common.UsageError('--window needs videos: give video files, frame folders or folders of them, or --list')
  items = predict._inputs(paths)
  try:
    ids = sequence_ids([path for _, _, path in items])
  except ValueError as e:
    raise common.UsageError(str(e)) from None
  return items, ids


def _header(args, run, workdir, model) -> dict:
  return dict(**_span_header(args.window_text, args.window_frames, 'window'),
              **_span_header(args.stride_text, args.stride_frames, 'stride'),
              layers=[int(i) for i in args.layers], combine=args.combine if args.layers else None,
              checkpoint=workdir, step=model.step, weights=model.weights, views_per_window=None,
              num_frames=run.model.num_frames)


def _features_of(model):
  """predict(x) -> ({'': (B, D) embeddings}, None): the features step as `predict_windows.ViewSums` calls it."""
  from vvt.train import evaluate

  def predict(x):
    feats, _ = model.apply({'inputs': x})
    return {'': np.asarray(evaluate._local(feats['embedding']))}, None
  return predict


def _plot(args, vid, feats, centres, annotations) -> None:
  from vvt.inspection import sequence_plots
  os.makedirs(os.path.join(args.output, 'plots'), exist_ok=True)
  video = annotations.videos.get(vid) if annotations else None
  sequence_plots.sequence_png(os.path.join(args.output, 'plots', f'{vid}.png'), feats, centres,
                              video.segments if video else (), annotations.labels if annotations else (), title=vid)


def _one_video(item, vid, predict, run, args, batch_size, writer, annotations=None) -> dict:
  """Streams one video's windows through the model and writes its sequence (and its picture with --plot); the
  `score_video` record."""
  from vvt.cli import predict_windows
  got = predict_windows.score_video(item, predict, {'': None}, run.data, args, batch_size, tail=False)
  feats = got['scores'][''] / got['views']  # (N, D): each window's views averaged
  centres = [(r[3] + r[4]) / 2 for r in got['rows']]
  writer.add(vid, os.path.abspath(item[2]), got['frames'] / got['fps'], got['fps'], feats, centres,
             window_frames=got['window'], stride_frames=got['stride'])
  if args.plot:
    _plot(args, vid, feats, centres, annotations)
  return got


def write(args, run, workdir, model, items, ids, annotations=None) -> int:
  """Every input's feature sequence -> args.output; 1 if any input was skipped."""
  from vvt import progress
  from vvt.data import SequenceWriter
  writer = SequenceWriter(args.output, **_header(args, run, workdir, model))
  predict, batch_size = _features_of(model), model.batch_size
  bar = progress.bar(len(items), 'features', 'video', disable=len(items) < 2, file=sys.stderr)
  views = None
  for item, vid in zip(items, ids, strict=True):
    try:
      views = _one_video(item, vid, predict, run, args, batch_size, writer, annotations)['views']
    except (ValueError, OSError) as e:  # unreadable, or shorter than a window: said, listed, counted
      writer.skip(item[2], common.one_line(e))
      bar.write(f'vvt features: skipped {common.one_line(e)}', file=sys.stderr)
    bar.update(1)
  bar.close()
  writer.header['views_per_window'] = views
  index = writer.close()
  print(f'[features] {index["num_videos"]} feature sequence(s) x {index["feature_dim"]} -> {args.output}')
  if writer.skipped:
    print(f'vvt features: {len(writer.skipped)} of {len(items)} videos skipped (sequences.json: videos_skipped)',
          file=sys.stderr)
  return 1 if writer.skipped else 0


def run_windows(args, spec, overrides) -> int:
  """`vvt features --window`: checks, the checkpoint, every video's sequence."""
  args.window_text, args.stride_text = args.window, args.stride
  check_args(args)
  items, ids = inputs(args)  # every path checked before the model is loaded
  annotations = None
  if args.annotations:
    if not args.plot:
      raise common.UsageError('--annotations marks the segments in the pictures of --plot: give --plot too')
    from vvt.data import read_annotations
    annotations = read_annotations(args.annotations)  # bad annotations: one line (AnnotationError), before work
  run = common.run_spec(spec, overrides, args.workdir, purpose='predict')  # needs no dataset files
  import jax
  if jax.process_count() > 1:
    raise common.UsageError('--window runs in one process (its videos are local files)')
  from vvt.cli import features as features_cli
  features_cli.check_layers(run, args.layers)
  from vvt.inspection import features
  from vvt.train import checkpoints
  workdir = checkpoints.abspath(args.workdir)
  checkpoints.resolve_step(workdir, args.step)
  model = features.load_model(run, workdir, args.step, layers=args.layers, combine=args.combine)
  return write(args, run, workdir, model, items, list(ids), annotations)
