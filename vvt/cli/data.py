"""`vvt data ...`: write datasets.

    vvt data synthetic --output DIR [--classes 4 --train-clips 2048 ...]
    vvt data synthetic --untrimmed --output DIR [--train-videos 8 --validation-videos 4 --video-seconds 24
                       --fps 8 --events 1,3 --event-seconds 2,4 --background noise|static ...]
    vvt data convert --input videos.csv --classes classes.txt --output DIR/train ...
    vvt data convert --input paths.csv --output DIR/train ...    (a list of paths only: records without labels)
    vvt data convert ... --worker I/N      (worker I of N, any hosts; default in a SLURM array: its task)
    vvt data convert ... --assemble        (the one manifest from the workers' manifests)
"""
import argparse
import json
import sys

from vvt.cli import common

UNTRIMMED = {'train_videos': 8, 'validation_videos': 4, 'video_seconds': 24.0, 'fps': 8, 'events': (1, 3),
             'event_seconds': (2.0, 4.0), 'background': 'noise'}  # the --untrimmed flags' defaults


def _untrimmed(args):
  """`--untrimmed`: long videos with short motion events and their ActivityNet-style annotations."""
  from vvt.data import write_untrimmed
  values = {k: UNTRIMMED[k] if getattr(args, k) is None else getattr(args, k) for k in UNTRIMMED}
  try:
    info = write_untrimmed(args.output, num_classes=args.classes,
                           classes=args.class_names.split(',') if args.class_names else None, seed=args.seed,
                           frame_size=args.frame_size, **values)
  except ValueError as e:
    raise common.UsageError('; '.join(str(e).splitlines())) from None  # every problem, on one line
  print(json.dumps(info, indent=1))
  return 0


def _pair(kind):
  """'1,3' -> (1, 3) of `kind` (int or float)."""
  def parse(text):
    try:
      low, high = (kind(x) for x in text.split(','))
    except ValueError:
      raise argparse.ArgumentTypeError(f'MIN,MAX (e.g. 1,3), got {text!r}') from None
    return low, high
  return parse


def _synthetic(args):
  if args.untrimmed:
    return _untrimmed(args)
  given = [k for k in UNTRIMMED if getattr(args, k) is not None]
  if given:
    raise common.UsageError(f'--{given[0].replace("_", "-")} goes with --untrimmed')
  from vvt.data import write_synthetic
  try:
    info = write_synthetic(
        args.output, num_classes=args.classes,
        classes=args.class_names.split(',') if args.class_names else None,
        train_clips=args.train_clips,
        test_clips=args.test_clips, num_frames=args.frames,
        frame_size=args.frame_size, seed=args.seed,
        train_shards=args.train_shards, test_shards=args.test_shards, multi_label=args.multi_label,
        object_scale=args.object_scale)
  except ValueError as e:
    raise common.UsageError('; '.join(str(e).splitlines())) from None  # every problem, on one line
  print(json.dumps(info, indent=1))
  return 0


def _worker(args):
  """(I, N) from --worker, else from a SLURM array task, else None (one machine)."""
  from vvt.data import parse_worker
  from vvt.data import workers_from_slurm
  if args.worker:
    return parse_worker(args.worker)
  worker = workers_from_slurm()
  if worker and worker[1] > 1:
    print(f'[convert] worker {worker[0]}/{worker[1]} (SLURM array task)', file=sys.stderr)
  return worker


def _convert(args):
  from vvt.data import convert_videos
  if args.assemble:
    from vvt.data import assemble_workers
    from vvt.data import worker_count
    manifest = assemble_workers(args.output, worker_count(args.output))
    print(json.dumps({'output': args.output, 'manifest': manifest['path'], 'files': manifest['pattern'],
                      **manifest['totals']}, indent=1))
    return 0
  worker = _worker(args)
  manifest = convert_videos(
      args.input, args.output, classes=args.classes, num_shards=args.shards,
      fps=args.fps, short_side=args.short_side, jpeg_quality=args.jpeg_quality,
      workers=args.workers, root=args.root, max_frames=args.max_frames,
      progress=not args.no_progress, overwrite=args.overwrite, worker=worker)
  totals = manifest['totals']
  print(json.dumps({'output': args.output, 'manifest': manifest['path'],
                    'files': manifest['pattern'], **totals}, indent=1))
  if totals['failed']:
    print(f"vvt data convert: {totals['failed']} video(s) failed, reasons in "
          f"{manifest['path']}", file=sys.stderr)
  return 0


def _untrimmed_arguments(s) -> None:
  """`vvt data synthetic`'s options of untrimmed videos (`--untrimmed`)."""
  u = s.add_argument_group('untrimmed videos (--untrimmed)')
  u.add_argument('--untrimmed', action='store_true',
                 help='long videos of background with short motion events, written as mp4 files, and their '
                      'ActivityNet-style annotations.json (training and validation subsets)')
  u.add_argument('--train-videos', dest='train_videos', type=int, default=None, help='default 8')
  u.add_argument('--validation-videos', dest='validation_videos', type=int, default=None, help='default 4')
  u.add_argument('--video-seconds', dest='video_seconds', type=float, default=None, help='default 24')
  u.add_argument('--fps', type=int, default=None, help='frames per second (default 8)')
  u.add_argument('--events', type=_pair(int), default=None, metavar='MIN,MAX', help='events per video (default 1,3)')
  u.add_argument('--event-seconds', dest='event_seconds', type=_pair(float), default=None, metavar='MIN,MAX',
                 help='length of an event (default 2,4)')
  u.add_argument('--background', choices=('static', 'noise'), default=None,
                 help='a still background, or one with fresh pixel noise every frame (default noise)')


def build_parser():
  parser = common.Parser('vvt data', __doc__)
  sub = parser.add_subparsers(dest='command', required=True)

  s = sub.add_parser('synthetic', help='write the synthetic motion dataset')
  s.add_argument('--output', required=True, help='output directory')
  s.add_argument('--classes', type=int, default=4, help='2..8 motion classes')
  s.add_argument('--class-names', default='',
                 help='comma-separated motion classes to use instead, in label order, '
                      'e.g. down_and_back,up_and_back')
  s.add_argument('--train-clips', type=int, default=2048)
  s.add_argument('--test-clips', type=int, default=256)
  s.add_argument('--frames', type=int, default=16, help='frames per clip')
  s.add_argument('--frame-size', type=int, default=64, help='frame side, pixels')
  s.add_argument('--seed', type=int, default=0)
  s.add_argument('--train-shards', type=int, default=8)
  s.add_argument('--test-shards', type=int, default=2)
  s.add_argument('--multi-label', action='store_true',
                 help='half the clips show a second object of another class and carry both labels')
  s.add_argument('--object-scale', dest='object_scale', type=float, default=1.0,
                 help="the object's side times this (0 < S <= 4; default 1: 9-15 px of a 64 px frame)")
  _untrimmed_arguments(s)
  s.set_defaults(func=_synthetic)

  c = sub.add_parser('convert', help='videos listed in a CSV/TSV -> TFRecords')
  c.add_argument('--input', required=True,
                 help='CSV/TSV file: path,label[,...] per line (header optional), or paths only')
  c.add_argument('--classes', default=None,
                 help='class list file, one class name per line (line i = label i); left out for a list of paths '
                      'only (a header `path` alone): records without labels, for pretraining')
  c.add_argument('--output', required=True,
                 help='output prefix, e.g. out/train -> out/train.tfrecord-00000-of-00016')
  c.add_argument('--shards', type=int, default=16)
  c.add_argument('--root', default='', help='directory of relative video paths '
                 '(default: the CSV file\'s directory)')
  c.add_argument('--fps', type=float, default=0.0,
                 help='resample to this frame rate (0 = keep each video\'s own rate); the rate '
                      'each recipe assumes (its dataset.fps): docs/recipes.md')
  c.add_argument('--short-side', type=int, default=256,
                 help='resize the shorter side to this (0 = keep)')
  c.add_argument('--jpeg-quality', type=int, default=90)
  c.add_argument('--max-frames', type=int, default=0, help='0 = no limit')
  c.add_argument('--workers', type=int, default=0, help='processes (0 = CPU count)')
  c.add_argument('--overwrite', action='store_true',
                 help='rewrite shards that already exist')
  c.add_argument('--worker', default='', metavar='I/N',
                 help='convert only the shards of worker I of N (s %% N == I); default in a SLURM job array: '
                      'the task\'s place in the array; the last worker to finish writes the one manifest')
  c.add_argument('--assemble', action='store_true',
                 help='write OUTPUT.manifest.json from the finished workers\' manifests (nothing is converted)')
  c.set_defaults(func=_convert)
  return parser


def _data(argv):
  args = build_parser().parse_args(argv)
  return args.func(args)


def main(argv) -> int:
  return common.run('vvt data', _data, argv)
