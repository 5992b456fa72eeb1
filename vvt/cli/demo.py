"""`vvt demo` (= `make demo`): write the synthetic motion dataset if missing, train a small model on it, evaluate.

  vvt demo [--config configs/synthetic.py:SCHEME,data_dir=DIR] [--data_dir data/synthetic] [--workdir runs/demo]
           [--data_only] [--config.FIELD=VALUE ...]

Prints the video-level top-1 of the multi-view evaluation and where the run's files are. Running it again on
the same workdir resumes (or, when the run is complete, only re-evaluates the final checkpoint).
"""
import os
import time

from vvt.cli import common
from vvt.config import loader as config_lib
from vvt.config import schema


def _demo(argv):
  p = common.Parser('vvt demo', __doc__, config=True)
  p.add_argument('--data_dir', default=schema.SYNTHETIC_DIR, help='synthetic dataset directory')
  p.add_argument('--workdir', default='runs/demo', help='run directory')
  p.add_argument('--data_only', action='store_true', help='only write the dataset')
  args, spec, overrides = common.parse(p, argv)
  t0 = time.time()
  if not config_lib.ensure_synthetic(args.data_dir, log=print):
    print(f'[demo] synthetic dataset present: {args.data_dir}')
  if args.data_only:
    return 0
  spec = spec or f'configs/synthetic.py:divided,data_dir={args.data_dir}'
  run = config_lib.load_run(spec, overrides)
  from vvt.data import views_per_video
  from vvt.train import checkpoints
  from vvt.train import metrics
  from vvt.train import trainer
  print(f'[demo] training {run.model.family} / {run.model.attention} from {spec} in '
        f'{args.workdir}', flush=True)
  res = trainer.train_and_evaluate(run, args.workdir)
  wd = res['workdir']
  per_video = views_per_video(run.data)  # None: each whole video tiled (num_test_clips='all')
  views = f'{per_video} views each' if per_video else f'each tiled, {run.data.num_spatial_crops} crops a clip'
  print('')
  print(f'[demo] {run.model.attention} attention: video-level top-1 = {res["video_top1"]:.3f} on '
        f'{res["num_videos"]} test videos ({views}; chance = {1.0 / run.model.num_classes:.3f}); '
        f'clip-level top-1 = {res["clip_top1"]:.3f}; total time {time.time() - t0:.0f}s')
  print(f'[demo] run directory: {wd}')
  print(f'         checkpoints     {checkpoints.checkpoint_dir(wd)}')
  print(f'         eval results    {checkpoints.eval_results_path(wd, res["step"], run.eval.split)}')
  print(f'         metrics         {os.path.join(wd, metrics.JSONL)} (+ tensorboard/)')
  print(f'         curves          {os.path.join(wd, metrics.CURVES)}')


def main(argv) -> int:
  return common.run('vvt demo', _demo, argv)
