"""The training state: step, params, optimiser state and the base rng."""
from typing import Any

import flax
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class TrainState:
  step: jax.Array          # int32 scalar: number of optimiser updates applied
  params: Any
  opt_state: Any
  rng: jax.Array           # raw uint32[2] key; per-step keys are fold_in(rng, step)


def create(params, tx, rng) -> TrainState:
  return TrainState(step=jnp.zeros((), jnp.int32), params=params,
                    opt_state=tx.init(params), rng=rng)


def num_params(params) -> int:
  return int(sum(x.size for x in jax.tree.leaves(params)))
