"""Optimisers and learning-rate schedules built from a run's `OptimizerSpec` / `ScheduleSpec` (`config.optimizer` /
`config.schedule`, vvt.config.run_spec).

* `sgd` (momentum, optional Nesterov, L2 weight decay added to the gradient as
  in PyTorch's SGD used by TimeSformer / X-ViT) and `adamw` (decoupled decay);
* schedules `cosine` (linear warmup then cosine to `end_lr`), `step`
  (multiply by `decay_factor` at each of `decay_epochs`, TimeSformer's recipe)
  and `constant`, all with an optional linear warmup from 0;
* a weight-decay mask: no decay for parameters with `ndim <= 1` (norm scales,
  biases) or whose name contains `embedding` or `cls` (positional tables, class
  tokens);
* clipping by global norm;
* layer-wise learning-rate decay (`optimizer.layer_decay` < 1, BEiT / VideoMAE): the update of each
  parameter scaled by its layer's decay^(L + 1 - i) (`vvt.train.layer_decay`, the last transformation).

Gradient accumulation is done inside the train step (`steps.py`): the global
batch is split into `optimizer.accumulation_steps` micro-batches whose
gradients are averaged before one optimiser update, so the step count, the
schedule and the data position keep the same meaning with or without it.
"""
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax

from vvt.config import validation
from vvt.config.run_spec import OptimizerSpec
from vvt.config.run_spec import ScheduleSpec
from vvt.config.schema import OPTIMIZERS
from vvt.config.schema import SCHEDULES
from vvt.models import layout
from vvt.train import layer_decay as layer_decay_lib

NO_DECAY_NAME_PARTS = ('embedding', 'cls')


def _leaf_name(path) -> str:
  last = path[-1] if path else ''
  return str(getattr(last, 'key', getattr(last, 'name', last)))


def weight_decay_mask(params) -> Any:
  """True where weight decay applies: ndim > 1 and not an embedding / class token. The ndim is one layer's
  in stacked (`model.scan_layers`) encoders: their (L, D) norm scales and biases are not decayed either."""

  def decay(path, x):
    name = _leaf_name(path).lower()
    if jnp.ndim(x) - layout.under_stacked_layers(path) <= 1:
      return False
    return not any(part in name for part in NO_DECAY_NAME_PARTS)

  return jax.tree_util.tree_map_with_path(decay, params)


def warmup_steps(schedule: ScheduleSpec, steps_per_epoch: int) -> int:
  if schedule.warmup_steps >= 0:
    return schedule.warmup_steps
  return int(round(schedule.warmup_epochs * steps_per_epoch))


def step_boundaries(schedule: ScheduleSpec, steps_per_epoch: int) -> list[int]:
  return [int(round(e * steps_per_epoch)) for e in schedule.decay_epochs]


def decays_past_end(schedule: ScheduleSpec, total_steps: int, steps_per_epoch: int) -> str:
  """'' unless a step schedule's decays fall at or after the last of `total_steps` (they never happen: a recipe
  shortened by `num_train_steps`); then the line that says so (`vvt.config.validation.decay_past_end`)."""
  if schedule.name != 'step':
    return ''
  return validation.decay_past_end(schedule.decay_epochs, step_boundaries(schedule, steps_per_epoch), total_steps,
                                   steps_per_epoch)


def make_schedule(spec: ScheduleSpec, total_steps: int, steps_per_epoch: int) -> Callable[[Any], Any]:
  """Learning rate as a function of the (optimiser) step, jit-friendly."""
  name = spec.name
  base = spec.base_lr
  end = spec.end_lr
  warm = warmup_steps(spec, steps_per_epoch)
  if name not in SCHEDULES:
    raise ValueError(f'schedule.name: unknown schedule {name!r}; expected one of {SCHEDULES}')
  if warm < 0 or (total_steps > 0 and warm >= total_steps and name == 'cosine'):
    raise ValueError(f'schedule: warmup of {warm} steps does not fit in '
                     f'{total_steps} training steps')
  bounds = step_boundaries(spec, steps_per_epoch)
  if name == 'step' and sorted(bounds) != bounds:
    raise ValueError(f'schedule.decay_epochs must be increasing, got {spec.decay_epochs}')
  factor = spec.decay_factor

  def main(step):
    if name == 'constant':
      return jnp.full_like(step, base, dtype=jnp.float32)
    if name == 'step':
      count = sum((step >= b).astype(jnp.float32) for b in bounds) if bounds \
          else jnp.zeros_like(step, dtype=jnp.float32)
      return base * jnp.power(factor, count)
    span = max(total_steps - warm, 1)
    progress = jnp.clip((step - warm) / span, 0.0, 1.0)
    return end + (base - end) * 0.5 * (1.0 + jnp.cos(math.pi * progress))

  def schedule(step):
    step = jnp.asarray(step, jnp.float32)
    lr = main(step)
    if warm > 0:
      lr = jnp.where(step < warm, base * step / warm, lr)
    return lr

  return schedule


def make_optimizer(spec: OptimizerSpec, schedule) -> optax.GradientTransformation:
  """The optax chain of `spec` over the learning rate `schedule` (step -> lr)."""
  wd = spec.weight_decay
  chain = []
  if spec.grad_clip_norm > 0:
    chain.append(optax.clip_by_global_norm(spec.grad_clip_norm))
  if spec.name == 'sgd':
    if wd > 0:
      chain.append(optax.add_decayed_weights(wd, mask=weight_decay_mask))
    chain.append(optax.sgd(schedule, momentum=spec.momentum or None, nesterov=spec.nesterov))
  elif spec.name == 'adamw':
    chain.append(optax.adamw(schedule, b1=spec.b1, b2=spec.b2, eps=spec.eps, weight_decay=wd,
                             mask=weight_decay_mask))
  else:
    raise ValueError(f'optimizer.name: unknown optimiser {spec.name!r}; expected one of {OPTIMIZERS}')
  if spec.layer_decay < 1.0:
    chain.append(layer_decay_lib.scale_by_layer_decay(spec.layer_decay))
  return optax.chain(*chain)
