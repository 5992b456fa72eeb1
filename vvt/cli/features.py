"""`vvt features`: per-video embeddings of a split by a run's or a converted checkpoint, written in shards.

  vvt features --workdir runs/divided --output feats/ [--split test] [--step N] [--format npz|safetensors]
               [--shard_size 1024] [--tokens [--tokens_view 0]] [--layers 8,11 [--combine mean|concat]] [--text FILE]
               [--config SPEC] [--config.FIELD=VALUE ...]

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
"""
import argparse

from vvt.cli import common


def _layers(text: str) -> tuple:
  """--layers '8,11' -> (8, 11)."""
  try:
    return tuple(int(part) for part in text.split(','))
  except ValueError:
    raise argparse.ArgumentTypeError(f'comma-separated layer indices (e.g. 8,11 or -1), got {text!r}') from None


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
  p.add_argument('--text', default='', help='a video-text model: also the embeddings of these texts (one a line)')
  args, spec, overrides = common.parse(p, argv)
  if args.shard_size < 1:
    raise common.UsageError(f'--shard_size must be a positive number of videos, got {args.shard_size}')
  if args.raw_params:
    overrides = [*overrides, ('eval.raw_params', 'True')]
  queries = _queries(args.text)
  run = common.run_spec(spec, overrides, args.workdir, purpose='eval')
  if run.model.text is None and queries:
    raise common.UsageError(f'--text {args.text}: the model has no text tower (model.text): its features are no '
                            'video-text model\'s')
  if run.model.text is not None and (args.tokens or args.layers):
    raise common.UsageError('--tokens / --layers: a video-text model\'s features are its video embeddings '
                            '(encode_video)')
  from vvt.models import outputs
  bad = outputs.check_layers('--layers', args.layers, outputs.num_layers(run.model))
  if bad:
    raise common.UsageError(bad[0])
  from vvt.inspection import features
  features.extract(run, args.workdir, args.output, split=args.split, step=args.step, fmt=args.format,
                   shard_size=args.shard_size, tokens=args.tokens, tokens_view=args.tokens_view, layers=args.layers,
                   combine=args.combine, queries=queries)


def main(argv) -> int:
  return common.run('vvt features', _features, argv)
