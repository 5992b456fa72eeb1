"""`train_and_evaluate(spec, workdir)`: training with exact resume, in named steps.

  run = setup(spec, workdir)                      devices, mesh, device and dataset checks, workdir
  check_resume_config(run, allow_config_change)   refuse config changes that alter a resumed run
  program = make_program(run)                     `vvt.train.program` for the training set's size:
                                                  model, optimiser, schedule, state shardings
                                                  (mesh rules), jitted steps
  state, data_position = restore_or_init(run, program)
                                                  train-state checkpoint, params-only checkpoint,
                                                  `init_from`, or a fresh init
  train_loop(run, program, writers, state, ...)   steps, with hooks: NaN check, train metrics,
                                                  checkpoints, periodic evaluation, profile and
                                                  performance scalars (vvt.train.profile)
  final_evaluation(run, program, writers, ...)    multi-view eval, results, training_curves.png

Checkpoints are verified against their checksums when loaded: resuming (and `vvt eval` without
`--step`) falls back to the newest intact step with a warning, and a resumed training run moves the
damaged steps it skipped to WORKDIR/damaged_checkpoints/. The first SIGINT or SIGTERM during
training saves a checkpoint at the step reached and raises `Interrupted` (exit 128 + the signal:
130, 143); a second one exits at once (see `StopSignals`).

`spec` is the run's RunSpec (`vvt.config.run_spec`: the config resolved once; `run.spec` here): every step
reads its own spec of it, and the config's JSON (`spec.config`) is what WORKDIR/config.json
(`vvt.config.run_file`), the checkpoints' meta and the resume check hold.
`evaluate_checkpoint(spec, workdir, step, split)` is `vvt eval`: an evaluation-only program (the
model, its abstract params on this mesh's shardings, the jitted eval step). Checkpoints are saved
asynchronously (training goes on while they are written) and restore onto any mesh: the abstract state
carries this run's shardings. The workdir may be a local path or a URL (`gs://`).
"""
import dataclasses
import math
from typing import Any, Callable, Optional

import jax
import orbax.checkpoint as ocp

from vvt.config import resume
from vvt.config import run_file
from vvt.config import run_spec
from vvt.data import missing_files
from vvt.tasks import registry as task_registry
from vvt.train import checkpoints
from vvt.train import clip_resize
from vvt.train import ema as ema_lib
from vvt.train import evaluate as evaluate_lib
from vvt.train import flops as flops_lib
from vvt.train import mesh as mesh_lib
from vvt.train import metrics as metrics_lib
from vvt.train import optimizers
from vvt.train import peers
from vvt.train import profile as profile_lib
from vvt.train import state as state_lib
from vvt.train import storage
from vvt.train.program import Program
from vvt.train.program import build_program
from vvt.train.signals import Interrupted
from vvt.train.signals import StopSignals
from vvt.train.signals import signal_name


class NonFiniteLossError(FloatingPointError):
  pass


@dataclasses.dataclass(frozen=True)
class Run:
  """Where a run happens: its specs, devices, workdir, checkpoints and log (silent off chief)."""
  spec: run_spec.RunSpec
  workdir: str
  mesh: jax.sharding.Mesh
  mngr: ocp.CheckpointManager
  log: Callable
  is_chief: bool

  @property
  def replicated(self) -> jax.sharding.NamedSharding:
    return mesh_lib.replicated(self.mesh)

  @property
  def tokenize(self) -> Callable:
    """The texts' tokenizer of the run (`vvt.train.texts.tokenizer`: used by a task that reads texts)."""
    from vvt.train import texts
    return texts.tokenizer(self.spec.data, self.spec.model, self.workdir, self.spec.init_from)


@dataclasses.dataclass
class LoopState:
  """The training loop's bookkeeping (the model's state is the TrainState)."""
  step: int
  data_position: int
  last_saved: Optional[int]
  metrics: Any = None   # clu metrics merged since the last train log
  pending: Any = None   # (step, status): checked one step late to keep dispatch asynchronous


# ----------------------------------------------------------------------------- setup


def make_mesh(spec: run_spec.RunSpec) -> jax.sharding.Mesh:
  """Initialises jax.distributed if asked, builds the mesh and checks the run's batches against it."""
  mesh_lib.maybe_initialize_distributed(spec.distributed)
  run_spec.check_devices(spec, len(mesh_lib.mesh_devices(spec.mesh)), jax.process_count())
  return mesh_lib.make_mesh(spec.mesh)


def require_files(data, fields=('train_files', 'eval_files')) -> None:
  """A missing dataset path fails before anything compiles, naming the path."""
  missing = missing_files(data, fields)
  if missing:
    raise FileNotFoundError(missing[0])


def setup(spec: run_spec.RunSpec, workdir: str, log: Callable = print) -> Run:
  """Devices and mesh, device and dataset checks, the workdir and its checkpoint manager."""
  mesh = make_mesh(spec)
  require_files(spec.data)
  is_chief = jax.process_index() == 0
  workdir = checkpoints.abspath(workdir)
  storage.check_workdir(workdir)  # a read-only, unwritable or misplaced workdir: one line, before compiling
  mngr = checkpoints.manager(workdir, keep=spec.checkpoint.keep, async_save=True)
  return Run(spec=spec, workdir=workdir, mesh=mesh, mngr=mngr,
             log=log if is_chief else (lambda *a, **k: None), is_chief=is_chief)


def log_short_videos(data, fields, log: Callable) -> None:
  """One line per split whose videos are shorter than a clip: how many, and what dataset.short_video_policy does
  with them (`vvt.data.short_videos_line`; lengths from manifests or container headers, nothing decoded)."""
  from vvt.data import short_videos_line
  for field in fields:
    line = short_videos_line(data, field)
    if line:
      log(line)


def latest_kind(run: Run) -> Optional[str]:
  """The kind of the newest intact checkpoint ('train_state' | 'params'), None if there is none."""
  try:
    _, meta, _ = checkpoints.load_with_fallback(
        run.workdir, lambda s: checkpoints.read_meta(run.workdir, s), log=lambda *a: None)
  except (checkpoints.CheckpointNotFoundError, checkpoints.CheckpointDamagedError):
    return None  # restore_or_init reports a workdir whose checkpoints are all damaged
  return meta.get('kind')


def check_resume_config(run: Run, allow_config_change: bool = False) -> list:
  """Before resuming a training state: the changes from WORKDIR/config.json (see vvt.config.resume)."""
  if latest_kind(run) != 'train_state':
    return []
  return resume.check_resume(run_file.load_saved(run.workdir), run.spec.config_values,
                             allow_config_change=allow_config_change, log=run.log)


def make_program(run: Run) -> Program:
  """The training program of `run.spec` on the run's mesh, for the training set's size (its traced steps checked
  against the run's length first: `profile_lib.check_window`)."""
  from vvt.data import num_videos
  videos = num_videos(run.spec.data, 'train')
  profile_lib.check_window(run.spec, videos)
  return build_program(run.spec, run.mesh, num_train_videos=videos)


# ----------------------------------------------------------------------------- state


def _resume(run: Run, state, meta: dict, step: int) -> tuple[state_lib.TrainState, int]:
  data_position = int(meta['data_position'])
  at = int(jax.device_get(state.step))
  run.log(f'[train] resumed from {checkpoints.checkpoint_dir(run.workdir)}/{step} '
          f'(step {at}, data position {data_position})')
  if getattr(state, 'ema_params', None) is not None and not meta.get('ema'):
    run.log(f'[train] checkpoint step {step} has no EMA params: the EMA starts from its params')
  if run.is_chief:  # records the interrupted run logged after its last checkpoint
    metrics_lib.truncate_jsonl(run.workdir, at)
  return state, data_position


def _init_from(run: Run, params, init=None, keep: tuple = (), carried: tuple = (), advice=None):
  """`init` (default: the run's `init_from`: image-ViT or `vvt export` weights) applied to fresh `params`, but for
  the params under the names `keep` (the task's own, left fresh but those of `carried` the checkpoint has whole, of
  the model's shapes: `vvt.convert.carried_params`, one line each, ending with the task's `advice`
  (`Task.carried_advice`) where a shape differs); the report is saved."""
  from vvt.convert import carried_params
  from vvt.convert import image_init
  init = init or run.spec.init_from
  kept = {k: v for k, v in params.items() if k in keep}
  loaded_own, lines = carried_params.load(kept, carried, init.checkpoint, init.format, advice)
  for line in lines:
    run.log(f'[train] init_from {line}')
  kept.update(loaded_own)
  loaded, report = image_init.initialise({k: v for k, v in params.items() if k not in keep}, init, run.spec.model)
  path = checkpoints.join(run.workdir, 'init_from_report.txt')
  if run.is_chief:
    checkpoints.write_text(path, str(report))
  run.log(f'[train] init_from {init.checkpoint}: {len(report.loaded)} loaded, '
          f'{len(report.transformed)} transformed, {len(report.initialised)} freshly initialised, '
          f'{len(report.unused)} unused in the file; every parameter: {path}')
  return dict(loaded, **kept)


def _load_backbone(run: Run, program: Program, params):
  """`params` with the backbone (all but the task's own params and the backbone's classifier head) read from
  the run's task's `backbone`: a `vvt export` file (as `init_from` reads one: `vvt train` writes the weights of
  any other source as one), or a vvt run or converted folder."""
  task = program.task
  if task.backbone.endswith('.safetensors'):
    from vvt.convert import init_options
    init = init_options.validate(dict(checkpoint=task.backbone, format=init_options.VIDEO_FORMAT))
    gathered = jax.jit(lambda p: p, out_shardings=run.replicated)(params)
    loaded = _init_from(run, gathered, init, keep=task.own_params)
    run.log(f'[train] frozen backbone from {task.backbone}')
    return jax.device_put(loaded, program.param_shardings)

  def load(step):
    stored = checkpoints.abstract_params_from_checkpoint(task.backbone, step)
    if not hasattr(stored, 'keys'):
      raise checkpoints.CheckpointDamagedError(
          f'{checkpoints.checkpoint_dir(task.backbone)}/{step}/params: its metadata holds no parameters')
    wanted = {k: v for k, v in program.abstract_params().items() if k not in task.own_params and k != 'head'}
    # what else the checkpoint holds (the head, a pretraining run's decoder) is read as stored, then left out
    abstract = {**{k: v for k, v in stored.items() if k not in wanted}, **wanted}
    return {k: v for k, v in checkpoints.load_params(task.backbone, step, abstract_params=abstract)[0].items()
            if k in wanted}

  try:
    step, loaded, _ = checkpoints.load_with_fallback(task.backbone, load, log=run.log)
  except (checkpoints.CheckpointDamagedError, checkpoints.CheckpointNotFoundError) as e:
    raise type(e)(f'{_backbone_field(run)} {task.backbone}: {e}') from None
  run.log(f'[train] frozen backbone from {task.backbone} step {step}')
  return dict(params, **loaded)


def _backbone_field(run: Run) -> str:
  """The config field that named the run's frozen backbone (its task's `backbone_field` hook)."""
  return task_registry.hooks_named(run.spec.task.name).backbone_field or 'backbone'


def load_latest(run: Run, abstract) -> tuple[Optional[int], Optional[dict], Any]:
  """(step, meta, state or params) of the newest intact checkpoint, or (None, None, None).

  Damaged steps are skipped with a warning and moved to WORKDIR/damaged_checkpoints/ (kept; a new
  save of the same step then succeeds). All damaged: CheckpointDamagedError listing them.
  """
  if not checkpoints.all_steps(run.workdir):
    return None, None, None

  def load(step):
    meta = checkpoints.read_meta(run.workdir, step)
    if meta['kind'] == 'train_state':
      return meta, checkpoints.restore_state(run.workdir, abstract, step, verify=False)[0]
    return meta, checkpoints.load_params(run.workdir, step, abstract.params, verify=False)[0]

  step, (meta, loaded), skipped = checkpoints.load_with_fallback(run.workdir, load, log=run.log)
  if skipped and run.is_chief:
    for s in skipped:
      run.log(f'[train] damaged step {s} moved to {checkpoints.quarantine(run.workdir, s)}')
    run.mngr.reload()
  return step, meta, loaded


def restore_or_init(run: Run, program: Program) -> tuple[state_lib.TrainState, int]:
  """(state, data position): the latest training state of the workdir if there is one;
  else a fresh init (seed `spec.seed`) whose params come from a params-only checkpoint
  (e.g. converted weights), from `spec.init_from`, or stay fresh. Everything is restored or
  created directly on the program's training shardings, whatever mesh a checkpoint was written on."""
  latest, meta, loaded = load_latest(run, program.abstract_state())
  if latest is not None and meta['kind'] == 'train_state':
    return _resume(run, loaded, meta, latest)
  state = program.init_state(jax.random.PRNGKey(run.spec.seed))
  if latest is not None:
    params = loaded
    run.log(f'[train] initialised params from params-only checkpoint step {latest}')
  elif program.task.backbone:
    params = _load_backbone(run, program, state.params)
  elif run.spec.init_from is not None:
    # init_from reads the params on the host: gather them (every process gets all of them)
    params = _init_from(run, jax.jit(lambda p: p, out_shardings=run.replicated)(state.params),
                        keep=program.task.own_params, carried=program.task.carried_params,
                        advice=program.task.carried_advice)
    params = program.task.from_init(params)
    params = jax.device_put(params, program.param_shardings)
  else:
    return state, 0
  return program.state_of(params, state.rng), 0


def log_start(run: Run, program: Program, state) -> None:
  spec, training = run.spec, program.training
  run.log(f'[train] {state_lib.num_params(state.params) / 1e6:.2f}M params, '
          f'{training.num_train_videos} training videos, {training.steps_per_epoch} steps/epoch, '
          f'{training.total_steps} steps, global batch {spec.batch_size} on '
          f'{run.mesh.devices.size} device(s) / {jax.process_count()} process(es), mesh '
          f'{mesh_lib.axis_sizes(run.mesh)}; workdir {run.workdir}')
  late = optimizers.decays_past_end(spec.schedule, training.total_steps, training.steps_per_epoch)
  if late:
    run.log(f'[train] warning: {late}')


# ----------------------------------------------------------------------------- loop hooks


def check_finite(step: int, status, workdir: str, wait: Callable = lambda: None) -> None:
  """Stops the run if the loss or the parameters after update `step` are NaN / inf.

  `wait` ends the checkpoint writes still under way first (they are of checked, finite states),
  so that the message names the last good checkpoint on disk.
  """
  status = jax.device_get(status)
  loss, pnorm = float(status['loss']), float(status['param_norm'])
  if math.isfinite(loss) and math.isfinite(pnorm):
    return
  wait()
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
    check_finite(*loop.pending, run.workdir, wait=run.mngr.wait_until_finished)


def _due(step: int, every: int) -> bool:
  return every > 0 and step % every == 0


def train_one_step(run: Run, program: Program, state, batch, loop: LoopState):
  """Dispatches one update; checks the previous one's loss meanwhile. Returns the new state."""
  gbatch = mesh_lib.global_batch(batch, run.mesh, run.spec.batch_size, program.logical_rules)
  state, metrics, status = program.training.step(state, gbatch)
  loop.step += 1
  loop.data_position += 1
  _check_pending(run, loop)
  loop.pending = (loop.step, status)
  loop.metrics = metrics if loop.metrics is None else loop.metrics.merge(metrics)
  return state


def count_flops(run: Run, program: Program, state, batch) -> float:
  """FLOPs per device of the compiled train step (XLA's cost analysis, all its micro-batches: `train_step_flops`;
  the executable comes from jax's cache)."""
  gbatch = mesh_lib.global_batch(batch, run.mesh, run.spec.batch_size, program.logical_rules)
  return flops_lib.train_step_flops(flops_lib.step_flops(program.training.step, state, gbatch),
                                    run.spec.optimizer.accumulation_steps)


def log_train_metrics(run: Run, program: Program, loop: LoopState, train_writer,
                      progress: metrics_lib.Progress, data) -> None:
  """Writes the metrics merged since the last log (+ throughput, epoch, and the records the training iterator
  `data` skipped, which it counts itself)."""
  _check_pending(run, loop)
  scalars = {k: float(v) for k, v in jax.device_get(loop.metrics.compute()).items()}
  scalars.update(progress.rates(loop.step))
  scalars['epoch'] = loop.step / program.training.steps_per_epoch
  skipped_line = None
  if run.spec.data.on_error == 'skip':  # bad records dropped so far, by reason (this process)
    scalars.update({f'data_skipped_{k}': float(v) for k, v in data.skip_counts().items()})
    skipped_line = data.new_skips_line()  # the files and records newly skipped, once each
  train_writer.write_scalars(loop.step, scalars)
  progress.report(loop.step, scalars)
  if skipped_line:
    run.log(skipped_line)
  loop.metrics = None


def save_checkpoint(run: Run, state, loop: LoopState) -> None:
  """Saves the training state after checking it is finite (a NaN never overwrites a good one).

  Asynchronous: the arrays are copied off the devices, then written while training goes on
  (each host writes its own shards); the step directory appears when the write has committed.
  """
  _check_pending(run, loop)
  checkpoints.save_state(run.mngr, state, data_position=loop.data_position, config=run.spec.config_values,
                         wait=False)
  loop.last_saved = loop.step


def run_eval(run: Run, program: Program, params, step: int, eval_writer, weights: str = 'params',
             extra: Optional[dict] = None) -> dict:
  """Multi-view evaluation on `eval.split`; the chief writes the results and eval scalars (with `extra`;
  no scalars without `eval_writer`). `weights` ('ema' | 'raw' | 'params', `vvt.train.ema`) names the params."""
  split = run.spec.eval.split
  if weights != 'params':
    run.log(f'[eval] {weights} params')
  res, agg = evaluate_lib.evaluate(program, params, run.spec.data, run.spec.eval, split=split, log=run.log,
                                   tokenize=run.tokenize)
  res.update(weights=weights, **(extra or {}))
  if run.is_chief:
    path = evaluate_lib.write_results(run.workdir, step, ema_lib.results_split(split, weights), res, agg)
    if eval_writer is not None:
      eval_writer.write_scalars(step, {k: v for k, v in res.items() if isinstance(v, (int, float))})
      eval_writer.flush()
    run.log(f'[eval] results: {path}')
  return res


# ----------------------------------------------------------------------------- loop


def _interruptible_eval(run: Run, program: Program, state, loop: LoopState, eval_writer,
                        stop: Optional[StopSignals]) -> None:
  """A periodic evaluation that a first signal ends at once (the state is saved, then exit)."""
  params, weights = ema_lib.choose(state.params, state.ema_params, run.spec.eval.raw_params)
  if stop is None or jax.process_count() > 1:
    run_eval(run, program, params, loop.step, eval_writer, weights)
    return
  stop.deferred = False
  try:
    run_eval(run, program, params, loop.step, eval_writer, weights)
  except Interrupted as e:
    stop.deferred = True
    raise save_and_stop(run, state, loop, e.signum) from None
  stop.deferred = True


def stop_requested(run: Run, stop: Optional[StopSignals], step: int) -> bool:
  """Whether a SIGINT / SIGTERM asks the loop to save and stop after `step`; with several
  processes they agree on it at the log steps (one small all-gather) so that all save together."""
  if stop is None:
    return False
  if jax.process_count() == 1:
    return stop.signum is not None
  if not _due(step, run.spec.log_every_steps):
    return False
  from jax.experimental import multihost_utils
  import numpy as np
  flags = multihost_utils.process_allgather(np.int32(stop.signum or 0))
  stop.signum = stop.signum or int(np.max(flags)) or None
  return stop.signum is not None


def save_and_stop(run: Run, state, loop: LoopState, signum: int):
  """Saves the state at the step reached (if not saved yet), waits for the write -> Interrupted."""
  _check_pending(run, loop)
  if loop.last_saved != loop.step:
    save_checkpoint(run, state, loop)
  run.mngr.wait_until_finished()
  return Interrupted(f'interrupted ({signal_name(signum)}): checkpoint saved at step {loop.step} '
                     f'in {checkpoints.checkpoint_dir(run.workdir)}; the same command resumes '
                     'the run', signum)


def train_loop(run: Run, program: Program, writers, state, data_position: int,
               stop_after_step: int = -1, stop: Optional[StopSignals] = None):
  """Trains up to `program.training.total_steps` -> (state, step, stopped early).

  The data iterator starts at `data_position`; the last state is checkpointed (if it was not).
  With `stop`, a first SIGINT / SIGTERM saves the state at the step reached and raises Interrupted
  (during a periodic evaluation: at once, the state is that of the step before it).
  """
  from vvt.data import make_train_iterator
  spec, total = run.spec, program.training.total_steps
  it = data = make_train_iterator(
      spec.data, global_batch_size=spec.batch_size, seed=spec.seed,
      start_step=data_position, process_index=jax.process_index(),
      process_count=jax.process_count(), text=program.task.batch_text(run.tokenize))
  first = int(jax.device_get(state.step))
  loop = LoopState(step=first, data_position=data_position,
                   last_saved=first if data_position else None)
  perf = profile_lib.Performance.of(spec, run.workdir, run.is_chief, first, total, run.log)
  it = perf.timed(it)
  progress = metrics_lib.Progress(total, first, spec.batch_size, enabled=run.is_chief, extra=perf.scalars)
  if stop is not None:
    stop.deferred, stop.starting = True, False
  while loop.step < total:
    batch = next(it)
    perf.before_step(loop.step + 1)
    state = train_one_step(run, program, state, batch, loop)
    perf.after_step(loop.step, state)
    if loop.step == first + 1:
      _check_pending(run, loop)  # waits for compilation
      progress.start(loop.step)
      perf.start(loop.step, count_flops(run, program, state, batch))
    if _due(loop.step, spec.log_every_steps) or loop.step == total:
      log_train_metrics(run, program, loop, writers[0], progress, data)
    if _due(loop.step, spec.checkpoint.every_steps) or loop.step == total:
      save_checkpoint(run, state, loop)
    if stop_requested(run, stop, loop.step):
      raise save_and_stop(run, state, loop, stop.signum)
    if 0 < stop_after_step <= loop.step:
      perf.close()
      return state, loop.step, True
    if _due(loop.step, spec.eval.every_steps) and loop.step != total:
      _interruptible_eval(run, program, state, loop, writers[1], stop)
  if stop is not None:
    stop.deferred = False
  _check_pending(run, loop)
  if loop.last_saved != loop.step:
    save_checkpoint(run, state, loop)
  return state, loop.step, False


def final_eval(run: Run, program: Program, writers, state, step: int) -> dict:
  """The final params evaluated; with an EMA, the raw params first (results under `<split>_raw`), then the
  EMA params, whose results and eval scalars carry the raw ones' as `raw_<metric>`."""
  if state.ema_params is None:
    return run_eval(run, program, state.params, step, writers[1])
  raw = run_eval(run, program, state.params, step, None, 'raw')
  extra = {f'raw_{k}': v for k, v in raw.items() if k.startswith(('video_', 'clip_')) and isinstance(v, float)}
  return run_eval(run, program, state.ema_params, step, writers[1], 'ema', extra)


def final_evaluation(run: Run, program: Program, writers, state, step: int) -> dict:
  """Evaluates the final params, draws training_curves.png, closes the checkpoints."""
  writers[0].flush()
  results = final_eval(run, program, writers, state, step)
  if run.is_chief:
    png = metrics_lib.plot_curves(run.workdir)
    if png:
      run.log(f'[train] training curves: {png}')
  run.mngr.close()
  return {**results, 'step': step, 'workdir': run.workdir}


def train_and_evaluate(spec: run_spec.RunSpec, workdir: str, *, log: Callable = print,
                       stop_after_step: int = -1, allow_config_change: bool = False) -> dict:
  """Trains the run of `spec` (a RunSpec) in `workdir` (resuming from its latest checkpoint), then evaluates.

  Returns the final multi-view evaluation metrics (plus `step`, `workdir`).
  Resuming with a config that differs from WORKDIR/config.json in a field that changes what
  the run learns raises ConfigError (vvt.config.resume) unless `allow_config_change`.
  `stop_after_step` (testing aid) stops the loop early without the final eval.
  A first SIGINT / SIGTERM saves a checkpoint at the step reached and raises Interrupted; a
  second exits at once (StopSignals).
  """
  with StopSignals(log) as stop:
    return _train_and_evaluate(spec, workdir, log, stop_after_step, allow_config_change, stop)


def _train_and_evaluate(spec, workdir, log, stop_after_step, allow_config_change, stop):
  from vvt.data import start_skip_account
  stop.check()
  start_skip_account()  # what this run skips, not what an earlier run of the process did
  run = setup(spec, workdir, log)
  log_short_videos(spec.data, ('train_files', 'eval_files'), run.log)
  watch = peers.watch(spec.distributed.heartbeat_timeout_seconds, lambda: _last_checkpoint(run))
  failed = True
  try:
    stop.check()
    check_resume_config(run, allow_config_change)
    program = make_program(run)
    stop.check()
    state, data_position = restore_or_init(run, program)
    stop.check()
    if run.is_chief:
      run_file.write(run.workdir, spec.config)
    log_start(run, program, state)
    writers = metrics_lib.make_writers(run.workdir, run.is_chief)
    stop.check()
    state, step, stopped = train_loop(run, program, writers, state, data_position, stop_after_step,
                                      stop)
    if stopped:
      result = {'step': step, 'workdir': run.workdir, 'stopped_early': True}
    else:
      result = final_evaluation(run, program, writers, state, step)
    failed = False
    return result
  except Exception as e:
    if watch is not None:
      watch.settle()  # a collective failed because a process is gone? the watch names it and exits
    failure = storage_failure(run, e)
    if failure is None:
      raise
    raise failure from e
  finally:
    finish_writes(run, failed)
    if watch is not None:
      watch.stop()


def _last_checkpoint(run: Run) -> str:
  steps = checkpoints.steps_on_disk(run.workdir)  # no orbax manager: it would sync with the lost process
  where = checkpoints.checkpoint_dir(run.workdir)
  return (f'the last checkpoint is step {steps[-1]} in {where}: the same command on every host resumes the run'
          if steps else f'no checkpoint was written to {where} yet')


def finish_writes(run: Run, failed: bool) -> None:
  """Waits for an asynchronous save in flight (also on an error). After an error, a failure of that save
  is not raised: the first error is the one the run reports."""
  try:
    run.mngr.wait_until_finished()
  except Exception:
    if not failed:
      raise


def storage_failure(run: Run, error: Exception) -> Optional[storage.WriteError]:
  """The one line for a run stopped by its storage (no space left, read-only, ...): the checkpoint write in
  flight if it failed too (it names the step lost and the last intact one), else the file that failed."""
  if isinstance(error, storage.WriteError) or storage.storage_errno(error) is None:
    return None
  try:
    run.mngr.wait_until_finished()
  except storage.WriteError as e:
    return e
  except Exception:
    pass
  steps = checkpoints.all_steps(run.workdir)
  intact = (f'the last checkpoint, step {steps[-1]}, is intact' if steps else 'no checkpoint was written')
  e = storage.write_error(error, f'cannot write to the run directory {run.workdir}')
  return storage.WriteError(e.errno, f'{e}; {intact}')


# ----------------------------------------------------------------------------- vvt eval


def evaluate_checkpoint(spec: run_spec.RunSpec, workdir: str, step: Optional[int] = None,
                        split: Optional[str] = None, log: Callable = print) -> dict:
  """`vvt eval`: multi-view evaluation of a full or params-only checkpoint: its EMA params where it has them
  unless `eval.raw_params` (`vvt.train.ema`; results of the raw params of such a step under `<split>_raw`)."""
  mesh = make_mesh(spec)
  split = split or spec.eval.split
  workdir = checkpoints.abspath(workdir)
  explicit = step
  step = checkpoints.resolve_step(workdir, step)  # first: a wrong --step is the commonest mistake
  require_files(spec.data, fields=('eval_files',))
  log_short_videos(spec.data, ('eval_files',), log if jax.process_index() == 0 else (lambda *a: None))
  program = build_program(spec, mesh)  # shardings of this mesh, not the training one
  abstract = program.abstract_params()
  # --step N: that step or a one-line error naming the damaged file; latest: the newest intact
  raw = spec.eval.raw_params
  step, (params, weights), _ = checkpoints.load_with_fallback(  # tables resized where the clip differs
      workdir, lambda s: clip_resize.load_eval_params(workdir, s, abstract, spec.model, raw=raw, log=log),
      step=explicit, log=log)
  log(f'[eval] checkpoint {checkpoints.checkpoint_dir(workdir)}/{step}'
      + ('' if weights == 'params' else f' ({weights} params)'))
  from vvt.train import texts
  tokenize = texts.tokenizer(spec.data, spec.model, workdir, spec.init_from)
  res, agg = evaluate_lib.evaluate(program, params, spec.data, spec.eval, split=split, log=log, tokenize=tokenize)
  res['weights'] = weights
  if jax.process_index() == 0:
    path = evaluate_lib.write_results(workdir, step, ema_lib.results_split(split, weights), res, agg)
    log(f'[eval] results: {path}')
  return {**res, 'step': step, 'workdir': workdir}
