"""Training and evaluation of a localisation run (`task.name='localization'`) on feature sequences: `vvt train`
of a task whose `runs_on` hook is 'feature_sequences'.

    fit(run, train, test, ...) -> (params, results, aggregator)    trained (resumed from WORKDIR/checkpoints)
    evaluate(task, spec, module, params, test, ...) -> (results, aggregator)

The run around it (its files, results, `vvt eval`) is `vvt.train.localization_run`.

`run` is the run's RunSpec: its task (`vvt.tasks.localization`, options `run.task.localization`), `batch_size`,
`num_epochs` / `num_train_steps`, `optimizer`, `schedule` (`vvt.train.optimizers`, as every run's), `checkpoint`,
`mesh` and `seed`; `train` / `test` the `SequenceSet`s (`vvt.data.open_sequences`). Training batches come from
`vvt.data.sequence_train_batches` (this process's share of the videos, random crops to `max_seq_len`, order a
function of seed and epoch: batch s is the same whether the run started at 0 or resumed at s) and are split over
the run's mesh (`vvt.train.mesh.global_batch`, the params replicated). The training state is checkpointed as every
run's (`vvt.train.checkpoints`: every `checkpoint.every_steps` and at the end, with the data position); the first
SIGINT / SIGTERM saves it at the step reached and stops (`vvt.train.signals`). The evaluation runs each test video
whole, padded to one length (a multiple of the pyramid's coarsest stride), and scores the detections with the
task's aggregator (mAP at the protocol's tIoU thresholds); with several processes each runs its share of the
videos and the scores are gathered, so every process's aggregator holds them all.
"""
import dataclasses
import math
import time
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vvt import progress as progress_lib
from vvt.tasks import registry as task_registry
from vvt.train import checkpoints
from vvt.train import mesh as mesh_lib
from vvt.train import optimizers
from vvt.train import state as state_lib
from vvt.train.signals import Interrupted
from vvt.train.signals import StopSignals
from vvt.train.signals import signal_name

HEAD_FILE = 'localization_head.safetensors'


@dataclasses.dataclass(frozen=True)
class Setup:
  """What a localisation run trains: the task (classes and ground-truth rows of its data), its options `spec`,
  the head `module`, the optimiser `tx`, the steps per epoch and in all."""
  task: Any
  spec: Any
  module: Any
  tx: Any
  epoch: int
  total: int
  truth: int


def train_step(task, module, tx):
  """jitted (state, batch) -> (state, {'loss', 'cls_loss', 'reg_loss'}) (sums over the batch); the step's key is
  fold_in(state.rng, state.step)."""
  def loss_fn(params, batch, rng):
    inputs, targets, labels = task.prepare(batch, batch['inputs'], rng)
    outputs = task.outputs(module, params, inputs, train=True, rng=rng)
    parts = task.train_metrics(outputs, labels)
    return jnp.sum(task.loss(outputs, targets)), {k: jnp.sum(v) for k, v in parts.items()}

  @jax.jit
  def step(state, batch):
    rng = jax.random.fold_in(state.rng, state.step)
    (loss, parts), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch, rng)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    state = state.replace(step=state.step + 1, params=optax.apply_updates(state.params, updates),
                          opt_state=opt_state)
    return state, dict(parts, loss=loss)
  return step


def eval_length(spec, test) -> int:
  """The padded length of the evaluation (`spec`: the LocalizationSpec): the longest test sequence (at least
  `max_seq_len`), rounded up to a multiple of 2^(levels - 1)."""
  unit = 2 ** (spec.levels - 1)
  longest = max([spec.max_seq_len, *test.lengths])
  return int(math.ceil(longest / unit) * unit)


def evaluate(task, spec, module, params, test, batch_size: int, truth: int, class_names=None):
  """(results, aggregator) of `params` (host arrays, every process's alike) on every video of `test` (see the
  module docstring); `truth`: the most ground-truth segments of a video. With several processes each scores its
  share of the videos (`vvt.data.sequence_eval_batches`, `batch_size` a batch) and every process's aggregator
  adds the scores of all of them (`_gathered`): the results are those of one process, on every process."""
  from vvt.data import sequence_eval_batches
  length = eval_length(spec, test)
  agg = task.aggregator(len(test))
  agg.sequences, agg.class_names = test, list(class_names or agg.class_names)
  scores = jax.jit(lambda p, x, s: task.scores(module.apply({'params': p}, x, s, train=False)))

  def scored(batch) -> dict:
    out = jax.device_get(scores(params, batch['inputs'], batch['steps']))
    return {'video_index': batch['video_index'], 'mask': batch['mask'], 'probs': np.asarray(out['probs']),
            'offsets': np.asarray(out['offsets'])}

  t0 = time.time()
  index, count = jax.process_index(), jax.process_count()
  rows = [scored(b) for b in sequence_eval_batches(test, batch_size, length, truth, process_index=index,
                                                   process_count=count)]
  if count > 1:
    empty = None if rows else _masked(scored(next(sequence_eval_batches(test, batch_size, length, truth))))
    rows = _gathered(rows, empty)
  for row in rows:
    agg.add(row['video_index'], row['mask'], row['probs'], row['offsets'], length)
  result = agg.result()
  result.update(eval_seconds=time.time() - t0, task=task.name, main_metric=task.main_metric,
                eval_processes=count)
  return result, agg


def _masked(row: dict) -> dict:
  """A scored batch with every row masked out (mask 0, video_index -1): the padding of a process's share."""
  return dict(row, mask=np.zeros_like(row['mask']), video_index=np.full_like(row['video_index'], -1))


def _gathered(rows: list, empty: Optional[dict]) -> list:
  """Every process's scored batches (`rows`: this process's, {'video_index' (B,), 'mask' (B,), 'probs',
  'offsets'}), in process order: each process's padded to the most batches of any (with `empty`, or its last
  batch masked out) and gathered over the processes (`process_allgather`)."""
  from jax.experimental import multihost_utils
  most = int(np.max(multihost_utils.process_allgather(np.int64(len(rows)))))
  pad = empty if empty is not None else _masked(rows[-1])
  rows = rows + [pad] * (most - len(rows))
  stacked = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
  every = multihost_utils.process_allgather(stacked)  # {key: (processes, most, B, ...)}
  count = len(every['mask'])
  return [{k: np.asarray(v[q, j]) for k, v in every.items()} for q in range(count) for j in range(most)]


def _steps(run, num_videos: int) -> tuple[int, int]:
  epoch = max(1, math.ceil(num_videos / run.batch_size))
  total = run.num_train_steps if run.num_train_steps > 0 else max(1, math.ceil(run.num_epochs * epoch))
  return epoch, int(total)


def prepare(run, train, test, class_names=None) -> Setup:
  """The Setup of the run `run` on the SequenceSets `train` and `test` (`class_names`: the annotations' labels)."""
  truth = max([1, *(len(l) for l in train.labels + test.labels)])
  task = dataclasses.replace(task_registry.task_of(run), truth_segments=truth)
  if class_names:  # the annotations' label list
    task = dataclasses.replace(task, num_classes=len(class_names))
  epoch, total = _steps(run, len(train))
  tx = optimizers.make_optimizer(run.optimizer, optimizers.make_schedule(run.schedule, total, epoch))
  return Setup(task=task, spec=run.task.localization, module=task.build_model(), tx=tx, epoch=epoch, total=total,
               truth=truth)


def init_state(run, setup: Setup, feature_dim: int, abstract: bool = False) -> state_lib.TrainState:
  """The step-0 TrainState of the head (params from PRNGKey(seed); the steps' keys fold into the same key), made
  by one jitted program; `abstract`: its shapes only (`jax.eval_shape`, nothing computed)."""
  length = setup.spec.max_seq_len

  def create(rng):
    params = setup.module.init(rng, jnp.zeros((1, length, feature_dim)), jnp.ones((1, length), bool))
    return state_lib.create(params['params'], setup.tx, rng)
  rng = jax.random.PRNGKey(run.seed)
  return jax.eval_shape(create, rng) if abstract else jax.jit(create)(rng)


def restore_or_init(run, setup: Setup, feature_dim: int, workdir: Optional[str], mesh, log: Callable):
  """(state on `mesh`, replicated; data position): the newest intact training state of WORKDIR/checkpoints
  (`checkpoints.restore_state`, damaged steps skipped with a warning), else a fresh one."""
  replicated = mesh_lib.replicated(mesh)
  if workdir is None or not checkpoints.all_steps(workdir):
    state = init_state(run, setup, feature_dim)
    return jax.device_put(state, jax.tree.map(lambda _: replicated, state)), 0
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=replicated),
                          init_state(run, setup, feature_dim, abstract=True))
  step, (state, meta), _ = checkpoints.load_with_fallback(
      workdir, lambda s: checkpoints.restore_state(workdir, abstract, s, verify=False), log=log)
  position = int(meta['data_position'])
  log(f'[train] resumed from {checkpoints.checkpoint_dir(workdir)}/{step} (step {int(state.step)}, data '
      f'position {position})')
  return state, position


@dataclasses.dataclass
class Loop:
  """Where the training loop is: the checkpoint manager (None: no checkpoints), the signals, the last save."""
  mngr: Any
  workdir: Optional[str]
  config: Optional[dict]
  stop: Optional[StopSignals] = None
  last_saved: Optional[int] = None

  def save(self, state, step: int) -> None:
    if self.mngr is not None and self.last_saved != step:
      checkpoints.save_state(self.mngr, state, data_position=step, config=self.config)
      self.last_saved = step

  def stop_now(self, state, step: int) -> None:
    """Interrupted (after saving the state at `step`) if a first SIGINT / SIGTERM came."""
    if self.stop is None or self.stop.signum is None:
      return
    self.save(state, step)
    where = (f'checkpoint saved at step {step} in {checkpoints.checkpoint_dir(self.workdir)}; the same '
             'command resumes the run') if self.mngr is not None else 'no checkpoint (no workdir)'
    raise Interrupted(f'interrupted ({signal_name(self.stop.signum)}): {where}', self.stop.signum)


def _batches(run, setup: Setup, train, position: int):
  from vvt.data import sequence_train_batches
  local = run.batch_size // jax.process_count()
  return sequence_train_batches(train, local, setup.spec.max_seq_len, setup.truth, seed=run.seed,
                                start_step=position, process_index=jax.process_index(),
                                process_count=jax.process_count(), trunc_thresh=setup.spec.trunc_thresh,
                                crop_ratio=setup.spec.crop_ratio)


def train_loop(run, setup: Setup, state, position: int, train, mesh, loop: Loop, log: Callable,
               stop_after_step: int = -1):
  """Trains from data position `position` up to `setup.total` steps -> (state, last metrics or None, seconds);
  a checkpoint every `checkpoint.every_steps` and at the end (`loop`)."""
  step, first = train_step(setup.task, setup.module, setup.tx), int(jax.device_get(state.step))
  batches, metrics = _batches(run, setup, train, position), None
  bar = progress_lib.bar(setup.total, 'train', 'step', disable=not log, leave=False, initial=first)
  loop.last_saved = first if position else None
  t0, every = time.time(), run.checkpoint.every_steps
  for n in range(first, setup.total):
    state, metrics = step(state, mesh_lib.global_batch(next(batches), mesh, run.batch_size))
    bar.update(1)
    if log and ((n + 1) % setup.epoch == 0 or n + 1 == setup.total) and (n + 1) // setup.epoch % 10 == 0:
      log(f'[train] step {n + 1}/{setup.total}: loss {float(metrics["loss"]) / run.batch_size:.4f}')
    if (every > 0 and (n + 1) % every == 0) or n + 1 == setup.total:
      loop.save(state, n + 1)
    loop.stop_now(state, n + 1)
    if 0 < stop_after_step <= n + 1:
      loop.save(state, n + 1)
      break
  bar.close()
  return state, metrics, time.time() - t0


def fit(run, train, test, log: Callable = print, class_names=None, workdir: Optional[str] = None,
        stop: Optional[StopSignals] = None, stop_after_step: int = -1):
  """Trains the run's ActionFormer head on `train` (checkpointed in `workdir`, resumed from it), evaluates it on
  `test` -> (params, results, aggregator); (params, None, None) when stopped at `stop_after_step`."""
  from vvt.train import trainer
  setup, mesh = prepare(run, train, test, class_names), trainer.make_mesh(run)
  state, position = restore_or_init(run, setup, train.feature_dim, workdir, mesh, log)
  if log:
    log(f'[train] mesh {mesh_lib.axis_sizes(mesh)}: batches of {run.batch_size} split over '
        f'{mesh_lib.batch_spec(mesh)[0]}, the head replicated')
  mngr = checkpoints.manager(workdir, keep=run.checkpoint.keep) if workdir else None
  loop = Loop(mngr=mngr, workdir=workdir, config=run.config_values, stop=stop)
  if stop is not None:
    stop.check()
    stop.deferred, stop.starting = True, False
  try:
    state, metrics, seconds = train_loop(run, setup, state, position, train, mesh, loop, log, stop_after_step)
  finally:
    if mngr is not None:
      mngr.wait_until_finished()
      mngr.close()
  if stop is not None:
    stop.deferred = False
  steps, params = int(jax.device_get(state.step)), jax.device_get(state.params)  # replicated: every process's
  if steps < setup.total:
    return params, None, None
  result, agg = evaluate(setup.task, setup.spec, setup.module, params, test, run.batch_size, setup.truth,
                         class_names)
  result.update(train_seconds=seconds, steps=steps, steps_per_epoch=setup.epoch)
  if metrics is not None:
    result['loss'] = float(np.asarray(metrics['loss'])) / run.batch_size
  return params, result, agg
