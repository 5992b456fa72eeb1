"""`vvt features`: per-video embeddings of a split by a run's or a converted checkpoint, written in shards.

  vvt features --workdir runs/divided --output feats/ [--split test] [--step N] [--format npz|safetensors]
               [--shard_size 1024] [--tokens [--tokens_view 0]] [--layers 8,11 [--combine mean|concat]] [--text FILE]
               [--config SPEC] [--config.FIELD=VALUE ...]
  vvt features --workdir ckpt/ --window 2 --stride 1 --output seqs/ long.mp4 videos/ [--list videos.txt]
               [--window_frames 16 --stride_frames 8] [--layers 8,11 [--combine mean|concat]]

Every video of the split gives the evaluation's views (num_test_clips x num_spatial_crops, the same sampling, crops
and normalisation as `vvt eval`); the model's video representation (what its classifier head reads) is averaged
over them. The videos stream through in batches and leave in shards of --shard_size videos, so a split of any
size never sits in memory; a progress bar shows the batches (off with --no-progress).
OUTPUT/features-00000.npz ... hold `embedding` (n, D), `video_index`, `video_id` and the labels (`label`, or
`label_<head>`); --format safetensors writes the same tensors with the ids in the metadata; --tokens adds every
token of one view (`tokens` (n, n_t, N, D)): the last encoder's after its final LayerNorm, what a probe run's
probes read. --layers takes the features inside the network instead (as `task.probe.layers`): each listed layer's
tokens through the final LayerNorm (0 is the first block, -1 the last), averaged (--combine mean) or concatenated
along D (--combine concat: D times the number of layers); the embedding is their mean over the tokens.
OUTPUT/features.json names the shards, the checkpoint, split, protocol and layers;
`vvt.inspection.features.read(OUTPUT)` reads them back. A checkpoint written for another clip length or
frame size runs at the config's (`--config.num_frames=16`): its position tables are resized as its reference does.
EMA params where the step has them unless --raw_params. A video-text model's features are its video embeddings
(`encode_video`: what its texts are compared with; features.json says `video_text`, what `vvt search` reads); with
--text FILE (one text a line) the texts' embeddings by its text tower are written too, OUTPUT/texts.npz (`text`,
`embedding` (Q, E)).

--window S [--stride S2] (seconds, or frames: 16f; or --window_frames/--stride_frames) with video files, frame
folders or folders of them (and/or --list FILE, one path a line): per long video the sequence of its windows'
features, OUTPUT/sequences/{video_id}.npy float32 (N_windows, D) and OUTPUT/sequences.json (each window's centre in
seconds), the feature format OpenTAD reads (`vvt.cli.features_windows`, docs/evaluation.md).
"""
import argparse

from vvt.cli import common


def _layers(text: str) -> tuple:
  """--layers '8,11' -> (8, 11)."""
  try:
    return tuple(int(part) for part in text.split(','))
  except ValueError:
    raise argparse.ArgumentTypeError(f'comma-separated layer indices (e.g. 8,11 or -1), got {text!r}') from None


WINDOW_ARGS = ('window', 'stride', 'window_frames', 'stride_frames')


def _window_arguments(p) -> None:
  p.add_argument('--window', default=None, metavar='S',
                 help='a feature sequence per long video (OUTPUT/sequences/ and sequences.json): windows of S '
                      'seconds (or 16f: frames; default with --stride: the model\'s clip span)')
  p.add_argument('--stride', default=None, metavar='S2', help='seconds (or 8f) from one window to the next '
                 '(default: the window)')
  p.add_argument('--window_frames', type=int, default=None, metavar='N', help='--window in frames')
  p.add_argument('--stride_frames', type=int, default=None, metavar='N', help='--stride in frames')
  p.add_argument('--list', default=None, metavar='FILE', help='with --window: a file of video paths, one a line')
  p.add_argument('--fps', type=float, default=25.0, help='frame rate of frame folders with --window (default 25)')
  p.add_argument('--plot', action='store_true', help='with --window: also OUTPUT/plots/{video_id}.png, the sequence '
                 'over time')
  p.add_argument('--annotations', default=None, metavar='FILE', help='with --plot: the segments to mark (an '
                 'ActivityNet-style JSON, or a folder of THUMOS14 class files)')


def check_layers(run, layers) -> None:
  """UsageError (one line) for a layer the run's model does not have."""
  from vvt.models import outputs
  bad = outputs.check_layers('--layers', layers, outputs.num_layers(run.model))
  if bad:
    raise common.UsageError(bad[0])


def _queries(path: str) -> list:
  """The texts of --text FILE (one a line), [] without it; UsageError naming the file when it has none."""
  if not path:
    return []
  from vvt.inspection import search
  try:
    return search.read_queries(path)
  except (OSError, ValueError) as e:
    raise common.UsageError(f'--text {e}') from None


def _features(argv):
  p = common.Parser('vvt features', __doc__, config=True)
  p.add_argument('inputs', nargs='*', metavar='VIDEO_OR_DIR',
                 help='with --window: long videos (files, frame folders, folders of them)')
  p.add_argument('--workdir', required=True, help='run or converted-checkpoint directory with checkpoints/')
  p.add_argument('--output', required=True, help='directory for the shards and features.json')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--split', default=None, help='dataset split (default: config.eval.split)')
  p.add_argument('--format', default='npz', choices=('npz', 'safetensors'))
  p.add_argument('--shard_size', type=int, default=1024, help='videos per shard (default 1024)')
  p.add_argument('--tokens', action='store_true', help='also every token of one view per video')
  p.add_argument('--tokens_view', type=int, default=0, help='the view whose tokens --tokens writes (default 0)')
  p.add_argument('--layers', type=_layers, default=(), help='comma-separated layers whose tokens give the features '
                 '(e.g. 8,11 or -1; default: the model\'s own representation and final-normed tokens)')
  p.add_argument('--combine', default='mean', choices=('mean', 'concat'),
                 help='the layers\' tokens averaged or concatenated along D (default mean)')
  p.add_argument('--raw_params', action='store_true', help='the trained params even where the step has EMA ones')
  _window_arguments(p)
  p.add_argument('--text', default='', help='a video-text model: also the embeddings of these texts (one a line)')
  args, spec, overrides = common.parse(p, argv)
  if args.shard_size < 1:
    raise common.UsageError(f'--shard_size must be a positive number of videos, got {args.shard_size}')
  if args.raw_params:
    overrides = [*overrides, ('eval.raw_params', 'True')]
  queries = _queries(args.text)
  if any(getattr(args, k) is not None for k in WINDOW_ARGS):
    if queries:
      raise common.UsageError('--text goes with the features of a dataset split, not with --window')
    from vvt.cli import features_windows
    return features_windows.run_windows(args, spec, overrides)
  if args.inputs or args.list or args.plot or args.annotations:
    raise common.UsageError('video inputs, --list, --plot and --annotations go with --window (features of a '
                            'dataset split read the config\'s dataset)')
  run = common.run_spec(spec, overrides, args.workdir, purpose='eval')
  if run.model.text is None and queries:
    raise common.UsageError(f'--text {args.text}: the model has no text tower (model.text): its features are no '
                            'video-text model\'s')
  if run.model.text is not None and (args.tokens or args.layers):
    raise common.UsageError('--tokens / --layers: a video-text model\'s features are its video embeddings '
                            '(encode_video)')
  check_layers(run, args.layers)
  from vvt.inspection import features
  features.extract(run, args.workdir, args.output, split=args.split, step=args.step, fmt=args.format,
                   shard_size=args.shard_size, tokens=args.tokens, tokens_view=args.tokens_view, layers=args.layers,
                   combine=args.combine, queries=queries)


def main(argv) -> int:
  return common.run('vvt features', _features, argv)
