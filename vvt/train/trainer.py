"""`train_and_evaluate(config, workdir)`: training with exact resume, in named steps.

  run = setup(config, workdir)                    devices, mesh, config and dataset checks, workdir
  check_resume_config(run, allow_config_change)   refuse config changes that alter a resumed run
  program = make_program(run, num_train_videos)   model, optimiser, schedule, state shardings
                                                  (config.mesh rules), jitted steps
  state, data_position = restore_or_init(run, program)
                                                  train-state checkpoint, params-only checkpoint,
                                                  `init_from`, or a fresh init
  train_loop(run, program, writers, state, ...)   steps, with hooks: NaN check, train metrics,
                                                  checkpoints, periodic evaluation
  final_evaluation(run, program, writers, ...)    multi-view eval, results, training_curves.png

`evaluate_checkpoint(config, workdir, step, split)` is `vvt eval`. The model, its abstract state
and its shardings come from `model_state`, WORKDIR/config.json from `run_config`. Checkpoints are
saved asynchronously (training goes on while they are written) and restore onto any mesh: the
abstract state carries this run's shardings. The workdir may be a local path or a URL (`gs://`).
"""
import dataclasses
import math
from typing import Any, Callable, Optional

import jax
import orbax.checkpoint as ocp

from vvt.data import patterns as data_patterns
from vvt.train import checkpoints
from vvt.train import evaluate as evaluate_lib
from vvt.train import mesh as mesh_lib
from vvt.train import metrics as metrics_lib
from vvt.train import model_state
from vvt.train import optimizers
from vvt.train import run_config
from vvt.train import state as state_lib
from vvt.train import steps as steps_lib
from vvt.train import validation


class NonFiniteLossError(FloatingPointError):
  pass


@dataclasses.dataclass(frozen=True)
class Run:
  """Where a run happens: its config, devices, workdir, checkpoints and log (silent off chief)."""
  config: Any
  workdir: str
  mesh: jax.sharding.Mesh
  mngr: ocp.CheckpointManager
  log: Callable
  is_chief: bool

  @property
  def replicated(self) -> jax.sharding.NamedSharding:
    return mesh_lib.replicated(self.mesh)


@dataclasses.dataclass(frozen=True)
class Program:
  """What a run computes: the model, optimiser, schedule, step counts, shardings and jitted steps."""
  module: Any
  tx: Any
  schedule: Callable
  num_train_videos: int
  steps_per_epoch: int
  total_steps: int
  shardings: Any        # TrainState of NamedSharding (vvt.train.sharding rules)
  train_step: Callable  # (state, batch) -> (state, metrics, status)
  eval_step: Callable   # (params, batch) -> (scores, passthrough)


@dataclasses.dataclass
class LoopState:
  """The training loop's bookkeeping (the model's state is the TrainState)."""
  step: int
  data_position: int
  last_saved: Optional[int]
  metrics: Any = None   # clu metrics merged since the last train log
  pending: Any = None   # (step, status): checked one step late to keep dispatch asynchronous


# ----------------------------------------------------------------------------- setup


def make_mesh(config) -> jax.sharding.Mesh:
  """Initialises jax.distributed if asked, builds the mesh and validates `config` against it."""
  mesh_lib.maybe_initialize_distributed(config.distributed)
  validation.validate(config, len(mesh_lib.mesh_devices(config.mesh)), jax.process_count())
  return mesh_lib.make_mesh(config.mesh)


def require_files(dataset_cfg, fields=('train_files', 'eval_files')) -> None:
  """A missing dataset path fails before anything compiles, naming the path."""
  missing = data_patterns.missing_files(dataset_cfg, fields)
  if missing:
    raise FileNotFoundError(missing[0])


def setup(config, workdir: str, log: Callable = print) -> Run:
  """Devices and mesh, config and dataset checks, the workdir and its checkpoint manager."""
  mesh = make_mesh(config)
  require_files(config.dataset)
  is_chief = jax.process_index() == 0
  workdir = checkpoints.abspath(workdir)
  checkpoints.makedirs(workdir)
  mngr = checkpoints.manager(workdir, keep=config.checkpoint.keep, async_save=True)
  return Run(config=config, workdir=workdir, mesh=mesh, mngr=mngr,
             log=log if is_chief else (lambda *a, **k: None), is_chief=is_chief)


def check_resume_config(run: Run, allow_config_change: bool = False) -> list:
  """Before resuming a training state: the changes from WORKDIR/config.json (see run_config)."""
  _, kind = checkpoints.latest(run.mngr)
  if kind != 'train_state':
    return []
  return run_config.check_resume(run_config.load_saved(run.workdir), run.config,
                                 allow_config_change=allow_config_change, log=run.log)


def steps_per_epoch_and_total(config, num_train_videos: int) -> tuple[int, int]:
  spe = max(1, math.ceil(num_train_videos / config.batch_size))
  if config.num_train_steps > 0:
    return spe, int(config.num_train_steps)
  return spe, max(1, int(math.ceil(config.num_epochs * spe)))


def make_program(run: Run, num_train_videos: int) -> Program:
  """The model, optimiser and schedule of `run.config`, and its jitted train / eval steps."""
  config = run.config
  spe, total = steps_per_epoch_and_total(config, num_train_videos)
  schedule = optimizers.make_schedule(config.schedule, total, spe)
  tx = optimizers.make_optimizer(config.optimizer, schedule)
  module = model_state.build_model(config)
  shardings = model_state.state_shardings(module, config, tx, run.mesh)  # rule errors: here
  return Program(
      module=module, tx=tx, schedule=schedule, num_train_videos=num_train_videos,
      steps_per_epoch=spe, total_steps=total, shardings=shardings,
      train_step=steps_lib.make_train_step(module, tx, schedule, config, run.mesh, shardings),
      eval_step=steps_lib.make_eval_step(module, config, run.mesh, shardings.params))


# ----------------------------------------------------------------------------- state


def _resume(run: Run, abstract, step: int) -> tuple[state_lib.TrainState, int]:
  state, meta = checkpoints.restore_state(run.workdir, abstract, step)
  data_position = int(meta['data_position'])
  at = int(jax.device_get(state.step))
  run.log(f'[train] resumed from {checkpoints.checkpoint_dir(run.workdir)}/{step} '
          f'(step {at}, data position {data_position})')
  if run.is_chief:  # records the interrupted run logged after its last checkpoint
    metrics_lib.truncate_jsonl(run.workdir, at)
  return state, data_position


def _init_from(run: Run, params):
  """`config.init_from` (image-ViT weights) applied to fresh `params`; the report is saved."""
  from vvt.convert import image_init  # pylint: disable=g-import-not-at-top
  params, report = image_init.initialise(params, run.config.init_from, run.config.model)
  run.log(f'[train] init_from report:\n{report}')
  if run.is_chief:
    checkpoints.write_text(checkpoints.join(run.workdir, 'init_from_report.txt'), str(report))
  return params


def restore_or_init(run: Run, program: Program) -> tuple[state_lib.TrainState, int]:
  """(state, data position): the latest training state of the workdir if there is one;
  else a fresh init (seed `config.seed`) whose params come from a params-only checkpoint
  (e.g. converted weights), from `config.init_from`, or stay fresh. Everything is restored or
  created directly on `program.shardings`, whatever mesh a checkpoint was written on."""
  abstract = model_state.abstract_state(program.module, run.config, program.tx, program.shardings)
  latest, kind = checkpoints.latest(run.mngr)
  if kind == 'train_state':
    return _resume(run, abstract, latest)
  init = model_state.init_fn(program.module, run.config, program.tx)
  state = jax.jit(init, out_shardings=program.shardings)(jax.random.PRNGKey(run.config.seed))
  if latest is not None:
    params, _ = checkpoints.load_params(run.workdir, latest, abstract.params)
    run.log(f'[train] initialised params from params-only checkpoint step {latest}')
  elif run.config.init_from is not None:
    # init_from reads the params on the host: gather them (every process gets all of them)
    params = _init_from(run, jax.jit(lambda p: p, out_shardings=run.replicated)(state.params))
    params = jax.device_put(params, program.shardings.params)
  else:
    return state, 0
  create = lambda p, r: state_lib.create(p, program.tx, r)  # pylint: disable=unnecessary-lambda-assignment
  return jax.jit(create, out_shardings=program.shardings)(params, state.rng), 0


def log_start(run: Run, program: Program, state) -> None:
  config = run.config
  run.log(f'[train] {state_lib.num_params(state.params) / 1e6:.2f}M params, '
          f'{program.num_train_videos} training videos, {program.steps_per_epoch} steps/epoch, '
          f'{program.total_steps} steps, global batch {config.batch_size} on '
          f'{run.mesh.devices.size} device(s) / {jax.process_count()} process(es), mesh '
          f'{mesh_lib.axis_sizes(run.mesh)}; workdir {run.workdir}')


# ----------------------------------------------------------------------------- loop hooks


def check_finite(step: int, status, workdir: str) -> None:
  """Stops the run if the loss or the parameters after update `step` are NaN / inf."""
  status = jax.device_get(status)
  loss, pnorm = float(status['loss']), float(status['param_norm'])
  if math.isfinite(loss) and math.isfinite(pnorm):
    return
  steps = checkpoints.all_steps(workdir)
  last = (f'the last good checkpoint is step {steps[-1]} in '
          f'{checkpoints.checkpoint_dir(workdir)}' if steps else
          'no checkpoint was written before it')
  what = (f'training loss is {loss}' if not math.isfinite(loss) else
          f'parameters became non-finite (global norm {pnorm})')
  raise NonFiniteLossError(
      f'{what} at step {step} (the update from step {step - 1}); stopping '
      f'without saving: {last}')


def _check_pending(run: Run, loop: LoopState) -> None:
  if loop.pending is not None:
    check_finite(*loop.pending, run.workdir)


def _due(step: int, every: int) -> bool:
  return every > 0 and step % every == 0


def train_one_step(run: Run, program: Program, state, batch, loop: LoopState):
  """Dispatches one update; checks the previous one's loss meanwhile. Returns the new state."""
  gbatch = mesh_lib.global_batch(batch, run.mesh, run.config.batch_size)
  state, metrics, status = program.train_step(state, gbatch)
  loop.step += 1
  loop.data_position += 1
  _check_pending(run, loop)
  loop.pending = (loop.step, status)
  loop.metrics = metrics if loop.metrics is None else loop.metrics.merge(metrics)
  return state


def log_train_metrics(run: Run, program: Program, loop: LoopState, train_writer,
                      progress: metrics_lib.Progress) -> None:
  """Writes the metrics merged since the last log (+ throughput, epoch, skipped records)."""
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top
  _check_pending(run, loop)
  scalars = {k: float(v) for k, v in jax.device_get(loop.metrics.compute()).items()}
  scalars.update(progress.rates(loop.step))
  scalars['epoch'] = loop.step / program.steps_per_epoch
  if run.config.dataset.on_error == 'skip':  # bad records dropped so far, by reason (this process)
    scalars.update({f'data_skipped_{k}': float(v) for k, v in pipeline.error_counts().items()})
  train_writer.write_scalars(loop.step, scalars)
  progress.report(loop.step, scalars)
  loop.metrics = None


def save_checkpoint(run: Run, state, loop: LoopState) -> None:
  """Saves the training state after checking it is finite (a NaN never overwrites a good one).

  Asynchronous: the arrays are copied off the devices, then written while training goes on
  (each host writes its own shards); the step directory appears when the write has committed.
  """
  _check_pending(run, loop)
  checkpoints.save_state(run.mngr, state, data_position=loop.data_position, config=run.config,
                         wait=False)
  loop.last_saved = loop.step


def run_eval(run: Run, program: Program, params, step: int, eval_writer) -> dict:
  """Multi-view evaluation on `eval.split`; the chief writes the results and eval scalars."""
  split = run.config.eval.split
  res, agg = evaluate_lib.evaluate(program.eval_step, params, run.config, run.mesh,
                                   split=split, log=run.log)
  if run.is_chief:
    path = evaluate_lib.write_results(run.workdir, step, split, res, agg)
    eval_writer.write_scalars(step, {k: v for k, v in res.items() if isinstance(v, (int, float))})
    eval_writer.flush()
    run.log(f'[eval] results: {path}')
  return res


# ----------------------------------------------------------------------------- loop


def train_loop(run: Run, program: Program, writers, state, data_position: int,
               stop_after_step: int = -1):
  """Trains up to `program.total_steps` -> (state, step, stopped early).

  The data iterator starts at `data_position`; the last state is checkpointed (if it was not).
  """
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top
  config, total = run.config, program.total_steps
  it = pipeline.make_train_iterator(
      config.dataset, global_batch_size=config.batch_size, seed=config.seed,
      start_step=data_position, process_index=jax.process_index(),
      process_count=jax.process_count())
  first = int(jax.device_get(state.step))
  loop = LoopState(step=first, data_position=data_position,
                   last_saved=first if data_position else None)
  progress = metrics_lib.Progress(total, first, config.batch_size, enabled=run.is_chief)
  while loop.step < total:
    state = train_one_step(run, program, state, next(it), loop)
    if loop.step == first + 1:
      _check_pending(run, loop)  # waits for compilation
      progress.start(loop.step)
    if _due(loop.step, config.log_every_steps) or loop.step == total:
      log_train_metrics(run, program, loop, writers[0], progress)
    if _due(loop.step, config.checkpoint.every_steps) or loop.step == total:
      save_checkpoint(run, state, loop)
    if 0 < stop_after_step <= loop.step:
      return state, loop.step, True
    if _due(loop.step, config.eval.every_steps) and loop.step != total:
      run_eval(run, program, state.params, loop.step, writers[1])
  _check_pending(run, loop)
  if loop.last_saved != loop.step:
    save_checkpoint(run, state, loop)
  return state, loop.step, False


def final_evaluation(run: Run, program: Program, writers, state, step: int) -> dict:
  """Evaluates the final params, draws training_curves.png, closes the checkpoints."""
  writers[0].flush()
  results = run_eval(run, program, state.params, step, writers[1])
  if run.is_chief:
    png = metrics_lib.plot_curves(run.workdir)
    if png:
      run.log(f'[train] training curves: {png}')
  run.mngr.close()
  return {**results, 'step': step, 'workdir': run.workdir}


def train_and_evaluate(config, workdir: str, *, log: Callable = print,
                       stop_after_step: int = -1, allow_config_change: bool = False) -> dict:
  """Trains `config` in `workdir` (resuming from its latest checkpoint), then evaluates.

  Returns the final multi-view evaluation metrics (plus `step`, `workdir`).
  Resuming with a config that differs from WORKDIR/config.json in a field that changes what
  the run learns raises defaults.ConfigError unless `allow_config_change`.
  `stop_after_step` (testing aid) stops the loop early without the final eval.
  """
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top
  run = setup(config, workdir, log)
  try:
    check_resume_config(run, allow_config_change)
    program = make_program(run, pipeline.num_videos(config.dataset, 'train'))
    state, data_position = restore_or_init(run, program)
    if run.is_chief:
      run_config.write(run.workdir, config)
    log_start(run, program, state)
    writers = metrics_lib.make_writers(run.workdir, run.is_chief)
    state, step, stopped = train_loop(run, program, writers, state, data_position, stop_after_step)
    if stopped:
      return {'step': step, 'workdir': run.workdir, 'stopped_early': True}
    return final_evaluation(run, program, writers, state, step)
  finally:
    run.mngr.wait_until_finished()  # an asynchronous save in flight (also on an error) completes


# ----------------------------------------------------------------------------- vvt eval


def evaluate_checkpoint(config, workdir: str, step: Optional[int] = None,
                        split: Optional[str] = None, log: Callable = print) -> dict:
  """`vvt eval`: multi-view evaluation of a full or params-only checkpoint."""
  mesh = make_mesh(config)
  split = split or config.eval.split
  workdir = checkpoints.abspath(workdir)
  step = checkpoints.resolve_step(workdir, step)  # first: a wrong --step is the commonest mistake
  require_files(config.dataset, fields=('eval_files',))
  module = model_state.build_model(config)
  shardings = model_state.param_shardings(module, config, mesh)  # this mesh, not the training one
  abstract = model_state.abstract_params(module, config, shardings)
  params, step = checkpoints.load_params(workdir, step, abstract)
  log(f'[eval] checkpoint {checkpoints.checkpoint_dir(workdir)}/{step}')
  eval_step = steps_lib.make_eval_step(module, config, mesh, shardings)
  res, agg = evaluate_lib.evaluate(eval_step, params, config, mesh, split=split, log=log)
  if jax.process_index() == 0:
    path = evaluate_lib.write_results(workdir, step, split, res, agg)
    log(f'[eval] results: {path}')
  return {**res, 'step': step, 'workdir': workdir}
