"""Exponential moving average of the parameters (`optimizer.ema_decay`), as the VideoMAE / VideoMAE V2 /
InternVideo fine-tuning recipes keep it (timm's ModelEma): after every optimiser update t,

    ema_t = decay * ema_{t-1} + (1 - decay) * params_t,      ema_0 = params_0

(leaf by leaf, float32, the same shapes as the params, stacked `(L, ...)` leaves of `model.scan_layers` included).
The EMA lives in the train state (`TrainState.ema_params`, None when `ema_decay` is 0 or None), sharded like the
params (the same NamedSharding rules), is checkpointed beside them (`checkpoints/<step>/ema/`) and resumes
exactly. A run resumed from a checkpoint without EMA params (written before, or with the EMA off) starts its EMA
from the restored params.

Which weights an evaluation or an export reads (`weights` in the results):
  'ema'     the EMA params of a checkpoint that has them (the default)
  'raw'     the trained params of a checkpoint that also has EMA ones (`eval.raw_params`, `--raw_params`)
  'params'  the params of a checkpoint without EMA params (the only weights it has)
Results of 'raw' weights are written under the split name `<split>_raw` (`results_split`), so that they never
overwrite the EMA results of the same step; the final evaluation of a training run with an EMA evaluates both.
"""
from typing import Any, Optional

import jax
import jax.numpy as jnp


def decay_of(optimizer_cfg) -> float:
  """`optimizer.ema_decay` as a float (None and a missing field: 0, off)."""
  value = optimizer_cfg.get('ema_decay', 0.0) if hasattr(optimizer_cfg, 'get') else None
  return float(value or 0.0)


def enabled(optimizer_cfg) -> bool:
  """Whether the run keeps an EMA of its params (`optimizer.ema_decay` > 0)."""
  return decay_of(optimizer_cfg) > 0.0


def init(params) -> Any:
  """ema_0: a copy of the params (its own buffers, so that a donated state never holds one buffer twice)."""
  return jax.tree.map(jnp.copy, params)


def update(ema_params, params, decay) -> Any:
  """ema_t = decay * ema_{t-1} + (1 - decay) * params_t, leaf by leaf in the EMA's dtype."""
  def step(e, p):
    d = jnp.asarray(decay, e.dtype)
    return d * e + (1 - d) * p.astype(e.dtype)
  return jax.tree.map(step, ema_params, params)


def choose(params, ema_params: Optional[Any], raw: bool = False) -> tuple[Any, str]:
  """(weights to evaluate, which: 'ema' | 'raw' | 'params'): the EMA params unless `raw` or there are none."""
  if ema_params is None:
    return params, 'params'
  return (params, 'raw') if raw else (ema_params, 'ema')


def results_split(split: str, weights: str) -> str:
  """The split name evaluation results are written under: `<split>_raw` for 'raw' weights, else `split`."""
  return f'{split}_raw' if weights == 'raw' else split
