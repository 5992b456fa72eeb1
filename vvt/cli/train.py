"""`vvt train` and `vvt eval`.

  vvt train --config configs/synthetic.py:divided --workdir runs/divided [--config.batch_size=16 ...]
  vvt train --config configs/kinetics400/vivit_b_fe.py --config.runlocal=True --workdir runs/try
  vvt train --workdir runs/divided              (resume a run with its own config.json)
  vvt train --config configs/kinetics400/timesformer_b.py --init CHECKPOINT --workdir runs/mine \\
      --config.dataset.train_files=... --config.dataset.eval_files=...   (fine-tune on the data's classes)
  vvt eval  --workdir runs/divided [--config SPEC] [--step N] [--split test] [--raw_params]

--config FILE[:ARG] calls FILE's get_config(ARG) (or loads a run's config.json); --config.a.b=VALUE sets any
field. Resuming a workdir whose saved config differs in fields that change what the run learns is refused
with the differences listed, unless --allow_config_change. --init CHECKPOINT (a vvt run or converted folder, a
`vvt export` file, or a Hugging Face model folder) starts from those weights: the model, frames, frame size and
preprocessing follow the checkpoint unless --config.FIELD sets them, the classes follow the data, and the
classifier is kept only where they are the checkpoint's (vvt/cli/finetune.py). `vvt eval` evaluates a
checkpoint's EMA params (optimizer.ema_decay) where it has them; --raw_params (or --config.eval.raw_params=True)
the trained ones. Evaluating at other frames or another frame size than the run's warns, and names the results
eval_<step>_<split>_<clips>x<crops>_<frames>f_<size>px.json.
"""
import sys

from vvt.cli import common


def _train(argv):
  p = common.Parser('vvt train', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='checkpoints, metrics and results (resumed if present)')
  p.add_argument('--allow_config_change', action='store_true',
                 help='resume even if the config differs from the run\'s saved config.json')
  p.add_argument('--init', metavar='CHECKPOINT', default=None,
                 help='start from these weights on the data\'s classes: a vvt run or converted folder, a file of '
                      '`vvt export`, or a Hugging Face model folder')
  args, spec, overrides = common.parse(p, argv)
  if args.init:
    run = _init_run(args.init, spec, overrides, args.workdir)
  else:
    run = common.run_spec(spec, overrides, args.workdir)
  from vvt.train import storage
  storage.check_workdir(args.workdir)  # a run directory it cannot write: one line before anything is said
  for line in start_lines(run):
    print(line)
  # a signal recorded since `vvt train` started (vvt.cli.main) is acted on by the trainer's first start-up check
  from vvt.train import trainer
  res = trainer.train_and_evaluate(run, args.workdir, allow_config_change=args.allow_config_change)
  key = _headline(res)
  print(f'[done] step {res["step"]}: {key} = {res.get(key, float("nan")):.4f}; '
        f'workdir {res["workdir"]}')


def _headline(res: dict) -> str:
  """The result the done line shows: top-1 (of actions for two heads), or mAP for a multi-label task."""
  return next((k for k in ('video_top1', 'video_top1_action', 'video_map') if k in res), 'video_top1')


def start_lines(run) -> list[str]:
  """What a run's start says about its classes (where they came from), the EMA and layer-wise lr decay (`run`:
  its RunSpec)."""
  from vvt.config import labels
  nc, names = run.model.num_classes, run.class_names
  if isinstance(nc, int):
    data_names, where = labels.data_class_names(run.data)
    shown = f' ({", ".join(names[:6])}{", ..." if len(names) > 6 else ""})' if names else ''
    source = (f'from {where}' if data_names is not None and names is not None and tuple(data_names) == tuple(names)
              else 'set by the config' + ('' if data_names is not None else ' (the data names none)'))
    lines = [f'[train] {nc} classes{shown} {source}']
  else:
    lines = [f'[train] classes of each head set by the config: {dict(nc)}']
  opt = run.optimizer
  if opt.ema_decay:
    lines.append(f'[train] EMA of the params on: decay {opt.ema_decay} (evaluation and export use the EMA params; '
                 '--raw_params the trained ones)')
  if opt.layer_decay not in (None, 1, 1.0):
    lines.append(f'[train] layer-wise lr decay on: {opt.layer_decay} per block (head at the full rate)')
  return lines


def _init_run(source, spec, overrides, workdir):
  """The RunSpec of `vvt train --init SOURCE`: CONFIG run on SOURCE's weights (vvt.cli.finetune)."""
  from vvt.cli import finetune
  base = common.run_config(spec, overrides, workdir, validate=False, files=(), init=False)
  start = finetune.prepare(source, base, workdir)
  lines = []
  run = common.run_spec(spec, overrides, workdir, adapt=lambda c: finetune.adapt(c, start),
                        finish=lambda c: lines.append(finetune.head_line(c, start)))
  print(*lines, sep='\n')
  return run


def _eval(argv):
  p = common.Parser('vvt eval', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='run directory with checkpoints/')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--split', default=None, help='dataset split (default: config.eval.split)')
  p.add_argument('--raw_params', action='store_true',
                 help='evaluate the trained params even where the checkpoint has EMA ones (config.eval.raw_params)')
  args, spec, overrides = common.parse(p, argv)
  if args.raw_params:
    overrides = [*overrides, ('eval.raw_params', 'True')]
  # never refuses a training-only field
  run = common.run_spec(spec, overrides, args.workdir, purpose='eval')
  from vvt.train import evaluate
  from vvt.train import trainer
  clip = evaluate.run_clip(args.workdir)
  if clip is not None and clip != (run.num_frames, run.image_size):
    from vvt.models import frame_size
    size, trained = frame_size.label(run.image_size), frame_size.label(clip[1])
    print(f'vvt eval: warning: evaluating clips of {run.num_frames} frames at {size} px; the run '
          f'trained on {clip[0]} frames at {trained} px (results named _{run.num_frames}f_{size}px)',
          file=sys.stderr)
  res = trainer.evaluate_checkpoint(run, args.workdir, step=args.step, split=args.split)
  key = _headline(res)
  print(f'[done] step {res["step"]}: {key} = {res.get(key, float("nan")):.4f}')


def train_main(argv) -> int:
  return common.run('vvt train', _train, argv)


def eval_main(argv) -> int:
  return common.run('vvt eval', _eval, argv)
