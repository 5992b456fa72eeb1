"""The training state: step, params, optimiser state, the base rng and the EMA of the params (or None)."""
from typing import Any

import flax
import jax
import jax.numpy as jnp

from vvt.train import ema as ema_lib


@flax.struct.dataclass
class TrainState:
  step: jax.Array          # int32 scalar: number of optimiser updates applied
  params: Any
  opt_state: Any
  rng: jax.Array           # raw uint32[2] key; per-step keys are fold_in(rng, step)
  ema_params: Any = None   # EMA of the params (`vvt.train.ema`), None when optimizer.ema_decay is off


def create(params, tx, rng, ema: bool = False) -> TrainState:
  """A state at step 0 of `params`: fresh optimiser state; with `ema`, an EMA starting at the params."""
  return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                    opt_state=tx.init(params), rng=rng, ema_params=ema_lib.init(params) if ema else None)


def num_params(params) -> int:
  return int(sum(x.size for x in jax.tree.leaves(params)))
