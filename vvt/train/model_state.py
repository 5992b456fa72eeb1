"""The model of a run config and its (abstract) state: one build for train, eval, memory, predict.

  module = build_model(config)                         # vvt.models.build(config.model)
  init = init_fn(module, config, tx)                   # rng -> TrainState (params, opt state, rng)
  abstract_state(module, config, tx, sharding)         # TrainState of jax.ShapeDtypeStruct
  abstract_params(module, config, sharding)            # params of jax.ShapeDtypeStruct
  state_shardings(module, config, tx, mesh)            # TrainState of NamedSharding (config.mesh rules)
  param_shardings(module, config, mesh)                # params of NamedSharding

Shapes come from `jax.eval_shape` (nothing is allocated). The dummy input is one clip of the run's
shared fields, float32 `(1, config.num_frames, config.image_size, config.image_size, 3)`: where a `config`
is only read for that clip (`dummy_input`, `init_params`, `init_fn`, `abstract_state`, `abstract_params`),
its `ClipShape` does as well.
A `sharding` (one Sharding for every leaf, e.g. `mesh.replicated(mesh)`, or a pytree of them such
as `state_shardings(...)`) is attached to the leaves; without one the leaves carry none (enough to
count bytes, or to restore on one device).
"""
import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from vvt.train import ema as ema_lib
from vvt.train import sharding as sharding_lib
from vvt.train import state as state_lib


def build_model(config, backend: str | None = None):
  """The flax module of run config `config` (checked by `vvt.models.resolve`), built for `backend` (the
  platform it is compiled for; None: jax's default backend): `attention_impl='auto'` chooses for it."""
  import vvt.models  # pylint: disable=g-import-not-at-top
  return vvt.models.build(config.model, backend=backend)


@dataclasses.dataclass(frozen=True)
class ClipShape:
  """The model's input clip: `num_frames` RGB frames of `image_size`^2 pixels (the run's shared fields)."""
  num_frames: int
  image_size: int

  @classmethod
  def of(cls, config) -> 'ClipShape':
    return cls(num_frames=int(config.num_frames), image_size=int(config.image_size))


def dummy_input(config, batch_size: int = 1) -> jax.Array:
  """Zeros of one batch of clips: float32 (batch_size, T, H, W, 3) from the shared fields."""
  t, s = int(config.num_frames), int(config.image_size)
  return jnp.zeros((batch_size, t, s, s, 3), jnp.float32)


def init_params(module, config, rng: jax.Array) -> Any:
  """Fresh params; `rng` is split (params, dropout, train) exactly as `init_fn` splits it."""
  r_params, r_drop, _ = jax.random.split(rng, 3)
  variables = module.init({'params': r_params, 'dropout': r_drop}, dummy_input(config),
                          train=False)
  return variables['params']


def init_fn(module, config, tx, ema: bool = False) -> Callable[[jax.Array], state_lib.TrainState]:
  """`init(rng) -> TrainState` at step 0: params of `init_params`, `tx.init`, the third split as rng; with
  `ema`, an EMA of the params starting at them (`vvt.train.ema`)."""
  def init(rng):
    _, _, r_train = jax.random.split(rng, 3)
    return state_lib.create(init_params(module, config, rng), tx, r_train, ema=ema)
  return init


def with_sharding(shapes, sharding=None):
  """jax.ShapeDtypeStruct leaves of `shapes`, each with `sharding` (one, or a pytree like `shapes`)."""
  if sharding is None or isinstance(sharding, jax.sharding.Sharding):
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), shapes)
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), shapes, sharding)


def abstract_state(module, config, tx, sharding=None, ema: bool = False) -> state_lib.TrainState:
  """The TrainState of `init_fn` (with `ema`) as shapes (with `sharding`): what a checkpoint restores into."""
  shapes = jax.eval_shape(init_fn(module, config, tx, ema=ema), jax.random.PRNGKey(0))
  return with_sharding(shapes, sharding)


def abstract_params(module, config, sharding=None) -> Any:
  """The params of `init_params` as shapes (with `sharding`): what evaluation restores into."""
  shapes = jax.eval_shape(functools.partial(init_params, module, config), jax.random.PRNGKey(0))
  return with_sharding(shapes, sharding)


def state_shardings(module, config, tx, mesh) -> state_lib.TrainState:
  """NamedShardings of the TrainState on `mesh`: params by `config.mesh` rules, opt state and the EMA of
  `config.optimizer.ema_decay` following."""
  ema = ema_lib.enabled(config.optimizer) if 'optimizer' in config else False
  return sharding_lib.state_shardings(abstract_state(module, config, tx, ema=ema), mesh, config.get('mesh'))


def param_shardings(module, config, mesh) -> Any:
  """NamedShardings of the params on `mesh` by the `config.mesh` rules."""
  return sharding_lib.param_shardings(abstract_params(module, config), mesh, config.get('mesh'))
