"""What a run computes, built once for every command that compiles a step.

  program = build_program(run, mesh, num_train_videos=n)   # vvt train, vvt memory, benchmarks
  program = build_program(run, mesh)                       # vvt eval, predict, attention: no optimiser
  program.eval_step(params, batch) -> (scores, passthrough)
  program.training.step(state, batch) -> (state, metrics, status)
  program.abstract_params(), program.abstract_state(), program.init_state(rng)

`run` is the run's RunSpec (`vvt.config.run_spec`: the config resolved once). From it: the task
(`vvt.tasks.registry.task_of(run)`, `run.task.name`) and the model it trains (`task.build_model(run.model,
backend=platform)`: the backbone and the task's head), the input clip (`model_state.ClipShape`), the logical axis
rules of `run.mesh` (what the batch, heads and MLP units are sharded over: the batch's sharding, the tensor-parallel
specs, and the rules the steps are traced under, whenever jax traces them), the shardings of its rules on `mesh`,
the steps' settings (`steps.TrainSettings` / `steps.EvalSettings`) and, for training, the optimiser and its
schedule over `steps_per_epoch = ceil(num_train_videos / batch_size)` (also with `dataset.repeated_augmentation` =
N: an epoch is as many clips as videos, num_train_videos / N of them distinct, as DeiT counts) and
`total_steps` (`num_train_steps` when set, else `num_epochs` epochs); with `optimizer.ema_decay` > 0 the
state keeps an EMA of the params (`vvt.train.ema`). The jitted steps compile on their first call (or
`.lower(...).compile()`).
"""
import dataclasses
import math
from typing import Any, Callable, Optional

import jax

from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import optimizers
from vvt.train import sharding as sharding_lib
from vvt.train import state as state_lib
from vvt.train import steps as steps_lib


@dataclasses.dataclass(frozen=True)
class Training:
  """What training adds to a program: the optimiser, its schedule and step counts, the train step."""
  tx: Any                  # optax.GradientTransformation of run.optimizer
  schedule: Callable       # step -> learning rate (run.schedule)
  num_train_videos: int
  steps_per_epoch: int
  total_steps: int
  shardings: Any           # TrainState of NamedSharding (run.mesh rules)
  step: Callable           # jitted (state, batch) -> (state, metrics, status)
  ema_decay: float = 0.0   # optimizer.ema_decay: > 0, the state keeps an EMA of the params (vvt.train.ema)
  state_shapes: Any = None  # TrainState of jax.ShapeDtypeStruct (no sharding): the init traced once, here

  @property
  def ema(self) -> bool:
    return self.ema_decay > 0


@dataclasses.dataclass(frozen=True)
class Program:
  """The model of a run on a mesh, its shardings and jitted steps (`training` None: evaluation only)."""
  module: Any
  mesh: jax.sharding.Mesh
  clip: model_state.ClipShape
  param_shardings: Any      # params of NamedSharding (run.mesh rules)
  eval_settings: steps_lib.EvalSettings
  eval_step: Callable       # jitted (params, batch) -> (scores, passthrough)
  logical_rules: tuple      # run.mesh.logical_rules, complete: ((logical name, mesh axes), ...)
  training: Optional[Training] = None

  @property
  def task(self):
    """The run's task (`vvt.tasks`): what a batch carries, the outputs, loss, scores and aggregator."""
    return self.eval_settings.task

  @property
  def batch_sharding(self) -> jax.sharding.NamedSharding:
    """The steps' batch sharding: the batch dimension over the axes of logical `batch` (`logical_rules`)."""
    return mesh_lib.batch_sharding(self.mesh, self.logical_rules)

  def _training(self) -> Training:
    if self.training is None:
      raise ValueError('an evaluation program has no optimiser: build it with num_train_videos')
    return self.training

  def abstract_params(self) -> Any:
    """The params as jax.ShapeDtypeStructs on `param_shardings`: what a checkpoint's params restore into."""
    return model_state.abstract_params(self.module, self.clip, self.param_shardings)

  def abstract_state(self) -> state_lib.TrainState:
    """The TrainState as jax.ShapeDtypeStructs on the training shardings: what a training state restores into."""
    training = self._training()
    if training.state_shapes is not None:
      return model_state.with_sharding(training.state_shapes, training.shardings)
    return model_state.abstract_state(self.module, self.clip, training.tx, training.shardings, ema=training.ema)

  def init_state(self, rng: jax.Array) -> state_lib.TrainState:
    """A fresh TrainState at step 0 (`model_state.init_fn`), created on the training shardings."""
    training = self._training()
    init = model_state.init_fn(self.module, self.clip, training.tx, ema=training.ema)
    return jax.jit(init, out_shardings=training.shardings)(rng)

  def state_of(self, params, rng: jax.Array) -> state_lib.TrainState:
    """A TrainState at step 0 of `params` (fresh optimiser state, an EMA starting at them), on the training
    shardings."""
    training = self._training()
    def create(p, r):
      return state_lib.create(p, training.tx, r, ema=training.ema)
    return jax.jit(create, out_shardings=training.shardings)(params, rng)


def steps_per_epoch(num_train_videos: int, batch_size: int) -> int:
  """Optimiser steps of one pass over `num_train_videos` in global batches of `batch_size` (at least 1)."""
  return max(1, math.ceil(num_train_videos / batch_size))


def total_steps(num_train_steps: int, num_epochs: float, epoch_steps: int) -> int:
  """`num_train_steps` when > 0, else `num_epochs` epochs of `epoch_steps` (at least 1)."""
  if num_train_steps > 0:
    return int(num_train_steps)
  return max(1, int(math.ceil(num_epochs * epoch_steps)))


def counts_epochs(num_train_steps: int, schedule) -> bool:
  """Whether a step count of the run depends on the size of an epoch: training for num_epochs (`total_steps`), a
  warmup in epochs (`optimizers.warmup_steps`) or step decays in epochs (`optimizers.step_boundaries`)."""
  warmup_in_epochs = schedule.warmup_steps < 0 and schedule.warmup_epochs != 0
  return num_train_steps <= 0 or warmup_in_epochs or bool(schedule.decay_epochs)


def build_training(run, module, clip: model_state.ClipShape, mesh, num_train_videos: int, task=None) -> Training:
  """The optimiser and schedule of RunSpec `run` for a training set of `num_train_videos`, and the train step
  (`task`: the run's, where built already)."""
  epoch_steps = steps_per_epoch(num_train_videos, run.batch_size)
  total = total_steps(run.num_train_steps, run.num_epochs, epoch_steps)
  schedule = optimizers.make_schedule(run.schedule, total, epoch_steps)
  settings = steps_lib.TrainSettings.of(run, task)
  tx = settings.task.optimizer(optimizers.make_optimizer, run.optimizer, schedule)  # a probe: the backbone frozen
  ema = settings.ema_decay > 0
  shapes = model_state.abstract_state(module, clip, tx, ema=ema)
  shardings = sharding_lib.state_shardings(shapes, mesh, run.mesh)  # rule errors: here
  step = steps_lib.jit_train_step(
      steps_lib.train_step_fn(module, tx, schedule, settings, mesh, shardings.params), mesh, shardings,
      settings.logical_rules)
  return Training(tx=tx, schedule=schedule, num_train_videos=int(num_train_videos), steps_per_epoch=epoch_steps,
                  total_steps=total, shardings=shardings, step=step, ema_decay=settings.ema_decay, state_shapes=shapes)


def build_program(run, mesh, *, num_train_videos: Optional[int] = None,
                  platform: Optional[str] = None) -> Program:
  """The program of `run` (a RunSpec, `vvt.config.run_spec`) on `mesh`.

  num_train_videos: the training set's size; given, the program trains (`training`: optimiser, schedule,
  state shardings, train step), else it only evaluates. platform: what the steps are compiled for
  ('tpu', 'gpu', 'cpu'; None: jax's default backend), which `model.attention_impl='auto'` chooses for.
  """
  eval_settings = steps_lib.EvalSettings.of(run)
  module = eval_settings.task.build_model(run.model, backend=platform)
  clip = model_state.ClipShape.of(run)
  training = None
  if num_train_videos is not None:
    training = build_training(run, module, clip, mesh, num_train_videos, eval_settings.task)
    param_shardings = training.shardings.params
  else:
    param_shardings = model_state.param_shardings(module, clip, mesh, run.mesh)  # rule errors: here
  eval_step = steps_lib.jit_eval_step(steps_lib.eval_step_fn(module, eval_settings), mesh, param_shardings,
                                      eval_settings.logical_rules)
  return Program(module=module, mesh=mesh, clip=clip, param_shardings=param_shardings,
                 eval_settings=eval_settings, eval_step=eval_step, logical_rules=eval_settings.logical_rules,
                 training=training)
