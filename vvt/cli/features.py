"""`vvt features`: per-video embeddings of a split by a run's or a converted checkpoint, written in shards.

  vvt features --workdir runs/divided --output feats/ [--split test] [--step N] [--format npz|safetensors]
               [--shard_size 1024] [--tokens [--tokens_view 0]] [--config SPEC] [--config.FIELD=VALUE ...]

Every video of the split gives the evaluation's views (num_test_clips x num_spatial_crops, the same sampling, crops
and normalisation as `vvt eval`); the model's video representation (what its classifier head reads) is averaged
over them. The videos stream through in batches and leave in shards of --shard_size videos, so a split of any
size never sits in memory; a progress bar shows the batches (off with --no-progress).
OUTPUT/features-00000.npz ... hold `embedding` (n, D), `video_index`, `video_id` and the labels (`label`, or
`label_<head>`); --format safetensors writes the same tensors with the ids in the metadata; --tokens adds every
token of one view (`tokens` (n, n_t, N, D)). OUTPUT/features.json names the shards, the checkpoint, split and
protocol; `vvt.inspection.features.read(OUTPUT)` reads them back. A checkpoint written for another clip length or
frame size runs at the config's (`--config.num_frames=16`): its position tables are resized as its reference does.
EMA params where the step has them unless --raw_params.
"""
from vvt.cli import common


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
  p.add_argument('--raw_params', action='store_true', help='the trained params even where the step has EMA ones')
  args, spec, overrides = common.parse(p, argv)
  if args.shard_size < 1:
    raise common.UsageError(f'--shard_size must be a positive number of videos, got {args.shard_size}')
  if args.raw_params:
    overrides = [*overrides, ('eval.raw_params', 'True')]
  run = common.run_spec(spec, overrides, args.workdir, purpose='eval')
  from vvt.inspection import features
  features.extract(run, args.workdir, args.output, split=args.split, step=args.step, fmt=args.format,
                   shard_size=args.shard_size, tokens=args.tokens, tokens_view=args.tokens_view)


def main(argv) -> int:
  return common.run('vvt features', _features, argv)
