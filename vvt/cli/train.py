"""`vvt train` and `vvt eval`.

  vvt train --config configs/synthetic.py:divided --workdir runs/divided [--config.batch_size=16 ...]
  vvt train --config configs/kinetics400/vivit_b_fe.py --config.runlocal=True --workdir runs/try
  vvt train --workdir runs/divided              (resume a run with its own config.json)
  vvt eval  --workdir runs/divided [--config SPEC] [--step N] [--split test] [--raw_params]

--config FILE[:ARG] calls FILE's get_config(ARG) (or loads a run's config.json); --config.a.b=VALUE sets any
field. Resuming a workdir whose saved config differs in fields that change what the run learns is refused
with the differences listed, unless --allow_config_change. `vvt eval` evaluates a checkpoint's EMA params
(optimizer.ema_decay) where it has them; --raw_params (or --config.eval.raw_params=True) the trained ones.
"""
from vvt.cli import common


def _train(argv):
  p = common.Parser('vvt train', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='checkpoints, metrics and results (resumed if present)')
  p.add_argument('--allow_config_change', action='store_true',
                 help='resume even if the config differs from the run\'s saved config.json')
  args, spec, overrides = common.parse(p, argv)
  config = common.run_config(spec, overrides, args.workdir)
  # a signal recorded since `vvt train` started (vvt.cli.main) is acted on by the trainer's first start-up check
  from vvt.train import trainer  # pylint: disable=g-import-not-at-top
  res = trainer.train_and_evaluate(config, args.workdir,
                                   allow_config_change=args.allow_config_change)
  key = 'video_top1' if 'video_top1' in res else 'video_top1_action'
  print(f'[done] step {res["step"]}: {key} = {res.get(key, float("nan")):.4f}; '
        f'workdir {res["workdir"]}')


def _eval(argv):
  p = common.Parser('vvt eval', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='run directory with checkpoints/')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--split', default=None, help='dataset split (default: config.eval.split)')
  p.add_argument('--raw_params', action='store_true',
                 help='evaluate the trained params even where the checkpoint has EMA ones (config.eval.raw_params)')
  args, spec, overrides = common.parse(p, argv)
  config = common.run_config(spec, overrides, args.workdir, purpose='eval')  # never refuses a training-only field
  if args.raw_params:
    config.eval.raw_params = True
  from vvt.config import validation  # pylint: disable=g-import-not-at-top
  from vvt.train import trainer  # pylint: disable=g-import-not-at-top
  with validation.for_command('eval'):  # the evaluation validates the config again, on its mesh
    res = trainer.evaluate_checkpoint(config, args.workdir, step=args.step, split=args.split)
  key = 'video_top1' if 'video_top1' in res else 'video_top1_action'
  print(f'[done] step {res["step"]}: {key} = {res[key]:.4f}')


def train_main(argv) -> int:
  return common.run('vvt train', _train, argv)


def eval_main(argv) -> int:
  return common.run('vvt eval', _eval, argv)
