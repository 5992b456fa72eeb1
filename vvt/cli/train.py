"""`vvt train` and `vvt eval`.

  vvt train --config configs/synthetic.py:divided --workdir runs/divided [--config.batch_size=16 ...]
  vvt train --config configs/kinetics400/vivit_b_fe.py --config.runlocal=True --workdir runs/try
  vvt train --workdir runs/divided              (resume a run with its own config.json)
  vvt train --config configs/kinetics400/timesformer_b.py --init CHECKPOINT --workdir runs/mine \\
      --config.dataset.train_files=... --config.dataset.eval_files=...   (fine-tune on the data's classes)
  vvt eval  --workdir runs/divided [--config SPEC] [--step N] [--split test] [--raw_params]
  vvt train --config configs/localization.py:DIR --workdir runs/loc   (a task on feature sequences: its own loop)

--config FILE[:ARG] calls FILE's get_config(ARG) (or loads a run's config.json); --config.a.b=VALUE sets any
field. A probe run (--config.task.name=probe) reads its frozen backbone from --config.task.probe.backbone=SOURCE
or --init SOURCE (any SOURCE --init takes, its model and preprocessing followed as --init follows them); it ends
with a line naming the best probe, its lr, weight decay and metric, and the table of every probe. Resuming a
workdir whose saved config differs in fields that change what the run learns is refused with the differences
listed, unless --allow_config_change. --init CHECKPOINT (a vvt run or converted folder, a
`vvt export` file, or a Hugging Face model folder) starts from those weights: the model, frames, frame size and
preprocessing follow the checkpoint unless --config.FIELD sets them, the classes follow the data, and the
classifier is kept only where they are the checkpoint's (vvt/cli/finetune.py). `vvt eval` evaluates a
checkpoint's EMA params (optimizer.ema_decay) where it has them; --raw_params (or --config.eval.raw_params=True)
the trained ones. Evaluating at other frames or another frame size than the run's warns, and names the results
eval_<step>_<split>_<clips>x<crops>_<frames>f_<size>px.json. A task whose `runs_on` hook is 'feature_sequences'
(task.name='localization') trains and evaluates in `vvt.train.localization_run`: checkpoints, resume and signals
as above, `vvt eval` writes its mAP results file again (--split and --raw_params do not apply); --init is refused.
"""
import os
import sys

from vvt.cli import common
from vvt.config.errors import ConfigError
from vvt.convert import init_options


def _train(argv):
  p = common.Parser('vvt train', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='checkpoints, metrics and results (resumed if present)')
  p.add_argument('--allow_config_change', action='store_true',
                 help='resume even if the config differs from the run\'s saved config.json')
  p.add_argument('--init', metavar='CHECKPOINT', default=None,
                 help='start from these weights on the data\'s classes: a vvt run or converted folder, a file of '
                      '`vvt export`, or a Hugging Face model folder')
  args, spec, overrides = common.parse(p, argv)
  if runs_on(spec, overrides, args.workdir) == 'feature_sequences':
    _train_sequences(args, spec, overrides)
    return
  source, field, overrides = _start(args.init, spec, overrides, args.workdir)
  if source:
    run = _init_run(source, spec, overrides, args.workdir, field=field, what='--init' if args.init else None)
  else:
    run = common.run_spec(spec, overrides, args.workdir)
  from vvt.train import storage
  storage.check_workdir(args.workdir)  # a run directory it cannot write: one line before anything is said
  for line in start_lines(run):
    print(line)
  # a signal recorded since `vvt train` started (vvt.cli.main) is acted on by the trainer's first start-up check
  from vvt.train import trainer
  res = trainer.train_and_evaluate(run, args.workdir, allow_config_change=args.allow_config_change)
  for line in done_lines(run, res, args.workdir, run.eval.split, f'; workdir {res["workdir"]}'):
    print(line)


def runs_on(spec, overrides, workdir) -> str:
  """What the run of the command's config reads (its task's `runs_on` hook): 'clips', or 'feature_sequences'
  (`vvt.train.localization_run`); 'clips' for a config that does not load (the run's loading lists its problems)."""
  from vvt.tasks import registry
  try:
    base = common.run_config(spec, overrides, workdir, validate=False, files=(), init=False)
  except ConfigError:
    return 'clips'
  return registry.hooks_of(base).runs_on if 'task' in base else 'clips'


def _sequence_run(spec, overrides, workdir, **load_args):
  """The RunSpec of a run on feature sequences (no video files to check), its start problems refused."""
  from vvt.tasks import registry
  run = common.run_spec(spec, overrides, workdir, files=(), **load_args)
  problems = registry.hooks_named(run.task.name).start_problems(run) if load_args.get('purpose') != 'eval' else []
  if problems:
    raise ConfigError(*problems)
  return run


def _train_sequences(args, spec, overrides) -> None:
  """`vvt train` of a task on feature sequences: `vvt.train.localization_run` (resumes WORKDIR's checkpoints)."""
  if args.init:
    raise ConfigError(f'--init {args.init}: a run on feature sequences trains its head from scratch (its features '
                      'were made by the backbone already); drop --init')
  run = _sequence_run(spec, overrides, args.workdir)
  from vvt.data import AnnotationError
  from vvt.train import localization_run
  from vvt.train import storage
  storage.check_workdir(args.workdir)
  try:
    res = localization_run.train_and_evaluate(run, args.workdir, allow_config_change=args.allow_config_change)
  except AnnotationError as e:  # bad input: exit 2, as a bad sequence file
    raise ConfigError(f'task.localization.annotations: {e}') from None
  print(localization_run.done_line(res))


def _eval_sequences(args, spec, overrides) -> None:
  """`vvt eval` of a run on feature sequences: its checkpoint's head on the eval subset, the run's results files."""
  run = _sequence_run(spec, overrides, args.workdir, purpose='eval')
  from vvt.data import AnnotationError
  from vvt.train import localization_run
  try:
    res = localization_run.evaluate_checkpoint(run, args.workdir, step=args.step)
  except AnnotationError as e:
    raise ConfigError(f'task.localization.annotations: {e}') from None
  print(localization_run.done_line(res))


def done_lines(run, res: dict, workdir: str, split: str, where: str = '') -> list[str]:
  """What the end of a run or an evaluation (its results `res` on `split`) says: the task's main metric
  (`main_metric`), `where` after it, then the task's own lines (`result_lines`: a probe run's winner and the path
  of the table of every probe)."""
  from vvt.tasks import registry
  from vvt.train import ema
  from vvt.train import evaluate
  task = registry.task_of(run)
  key = task.main_metric
  prefix = evaluate.files_prefix(workdir, res['step'], ema.results_split(split, res.get('weights', 'params')), res)
  return [f'[done] step {res["step"]}: {key} = {res.get(key, float("nan")):.4f}{where}',
          *task.result_lines(res, prefix)]


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
  elif nc is None:  # a video-text model: no classifier head
    lines = []
  else:
    lines = [f'[train] classes of each head set by the config: {dict(nc)}']
  opt = run.optimizer
  if opt.ema_decay:
    lines.append(f'[train] EMA of the params on: decay {opt.ema_decay} (evaluation and export use the EMA params; '
                 '--raw_params the trained ones)')
  if opt.layer_decay not in (None, 1, 1.0):
    lines.append(f'[train] layer-wise lr decay on: {opt.layer_decay} per block (head at the full rate)')
  return lines


def _start(init, spec, overrides, workdir) -> tuple:
  """(the SOURCE the run starts from or None, the config field of the frozen backbone it is ('': SOURCE
  initialises the whole model), the overrides): --init SOURCE; for a task with a frozen backbone (its
  `backbone_field` hook: a probe run's task.probe.backbone) the field, which --init sets, where its weights are to
  be converted as --init converts them (a params folder without config.json is read by the trainer as it is; a
  path that is nothing is left to the config's validation, which names it with every other problem)."""
  from vvt.config import validation
  from vvt.tasks import registry
  try:
    base = common.run_config(spec, overrides, workdir, validate=False, files=(), init=False)
  except ConfigError:  # a config that does not load (an unknown field): the run's own loading lists every problem
    return init, '', overrides
  field = registry.hooks_of(base).backbone_field if 'task' in base else ''
  if not field:
    return init, '', overrides
  backbone = validation.field_value(base, field) or ''
  if init and backbone and os.path.abspath(init) != os.path.abspath(backbone):
    raise ConfigError(f'--init {init} and {field}={backbone} name two backbones of the {base.task.name} run: '
                      'give one')
  if init:
    return init, field, [*overrides, (field, init)]
  try:
    kind = init_options.source_kind(backbone, field, bare_ok=True) if backbone else None
  except ValueError:
    kind = None
  return (backbone if kind not in (None, init_options.PARAMS_FOLDER) else None), field, overrides


def _init_run(source, spec, overrides, workdir, field: str = '', what: str | None = '--init'):
  """The RunSpec of `vvt train --init SOURCE` (or of a run on the frozen backbone SOURCE of its task's config
  `field`): CONFIG run on SOURCE's weights (vvt.cli.finetune), once the config and SOURCE are valid (nothing is
  written before). `what`: the option or field that named SOURCE (None: `field`)."""
  from vvt.cli import finetune
  what, problems, base = what or field, [], None
  try:
    base = common.run_config(spec, overrides, workdir, init=False, adapt=finetune.data_classes)
  except ConfigError as e:
    problems += e.problems
  try:
    finetune.kind_of(source, what)
  except ConfigError as e:
    problems += e.problems
  if problems:
    raise ConfigError(*problems)
  start = finetune.prepare(source, base, workdir, what=what)
  lines = []
  finish = (lambda c: lines.append(_backbone_line(c, start, field))) if field else (
      lambda c: lines.append(finetune.head_line(c, start)))
  run = common.run_spec(spec, overrides, workdir, adapt=lambda c: finetune.adapt(c, start), finish=finish)
  print(*lines, sep='\n')
  return run


def _backbone_line(config, start, field: str) -> str:
  """Sets the run's frozen backbone (its config `field`) to the weights `start` converted (its model and
  preprocessing the run's; no init_from) and says so in one line."""
  *parents, name = field.split('.')
  section = config
  for part in parents:
    section = section[part]
  section[name], config.init_from = start.weights, None
  return (f'[init] frozen backbone: {start.source} ({start.kind}), weights {start.weights}; '
          f'{config.num_classes} classes for the probes')


def _eval(argv):
  p = common.Parser('vvt eval', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='run directory with checkpoints/')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--split', default=None, help='dataset split (default: config.eval.split)')
  p.add_argument('--raw_params', action='store_true',
                 help='evaluate the trained params even where the checkpoint has EMA ones (config.eval.raw_params)')
  args, spec, overrides = common.parse(p, argv)
  if runs_on(spec, overrides, args.workdir) == 'feature_sequences':
    _eval_sequences(args, spec, overrides)
    return
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
  for line in done_lines(run, res, args.workdir, args.split or run.eval.split):
    print(line)


def train_main(argv) -> int:
  return common.run('vvt train', _train, argv)


def eval_main(argv) -> int:
  return common.run('vvt eval', _eval, argv)
