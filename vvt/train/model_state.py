"""The model of a run and its (abstract) state: one build for train, eval, memory, predict.

  module = build_model(run.model)                   # vvt.models.build of the run's ModelSpec
  clip = ClipShape.of(run)                          # the input clip of a RunSpec (vvt.config.run_spec)
  init = init_fn(module, clip, tx)                  # rng -> TrainState (params, opt state, rng)
  abstract_state(module, clip, tx, sharding)        # TrainState of jax.ShapeDtypeStruct
  abstract_params(module, clip, sharding)           # params of jax.ShapeDtypeStruct
  state_shardings(module, clip, tx, mesh, run.mesh) # TrainState of NamedSharding (the MeshSpec's rules)
  param_shardings(module, clip, mesh, run.mesh)     # params of NamedSharding

Shapes come from `jax.eval_shape` (nothing is allocated). The dummy input is one clip of the run's shared
fields, float32 `(1, clip.num_frames, H, W, 3)`, (H, W) = clip.image_size.
A `sharding` (one Sharding for every leaf, e.g. `mesh.replicated(mesh)`, or a pytree of them such
as `state_shardings(...)`) is attached to the leaves; without one the leaves carry none (enough to
count bytes, or to restore on one device).
"""
import dataclasses
import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from vvt.train import sharding as sharding_lib
from vvt.train import state as state_lib


def build_model(model, backend: str | None = None):
  """The flax module of `model` (a run's ModelSpec), built for `backend` (the platform it is compiled for; None:
  jax's default backend): `attention_impl='auto'` chooses for it."""
  import vvt.models
  return vvt.models.build(model, backend=backend)


@dataclasses.dataclass(frozen=True)
class ClipShape:
  """The model's input clip: `num_frames` RGB frames of `image_size` = (H, W) pixels (the run's shared fields)."""
  num_frames: int
  image_size: tuple[int, int]

  @classmethod
  def of(cls, run) -> 'ClipShape':
    """The clip of a RunSpec (or anything with `num_frames` and `image_size`, e.g. a ModelSpec)."""
    return cls(num_frames=run.num_frames, image_size=run.image_size)


def dummy_input(clip: ClipShape, batch_size: int = 1) -> jax.Array:
  """Zeros of one batch of clips: float32 (batch_size, T, H, W, 3)."""
  return jnp.zeros((batch_size, clip.num_frames, *clip.image_size, 3), jnp.float32)


def init_params(module, clip: ClipShape, rng: jax.Array) -> Any:
  """Fresh params; `rng` is split (params, dropout, train) exactly as `init_fn` splits it."""
  r_params, r_drop, _ = jax.random.split(rng, 3)
  variables = module.init({'params': r_params, 'dropout': r_drop}, dummy_input(clip), train=False)
  return variables['params']


def init_fn(module, clip: ClipShape, tx, ema: bool = False) -> Callable[[jax.Array], state_lib.TrainState]:
  """`init(rng) -> TrainState` at step 0: params of `init_params`, `tx.init`, the third split as rng; with
  `ema`, an EMA of the params starting at them (`vvt.train.ema`)."""
  def init(rng):
    _, _, r_train = jax.random.split(rng, 3)
    return state_lib.create(init_params(module, clip, rng), tx, r_train, ema=ema)
  return init


def with_sharding(shapes, sharding=None):
  """jax.ShapeDtypeStruct leaves of `shapes`, each with `sharding` (one, or a pytree like `shapes`)."""
  if sharding is None or isinstance(sharding, jax.sharding.Sharding):
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), shapes)
  return jax.tree.map(lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), shapes, sharding)


def abstract_state(module, clip: ClipShape, tx, sharding=None, ema: bool = False) -> state_lib.TrainState:
  """The TrainState of `init_fn` (with `ema`) as shapes (with `sharding`): what a checkpoint restores into."""
  shapes = jax.eval_shape(init_fn(module, clip, tx, ema=ema), jax.random.PRNGKey(0))
  return with_sharding(shapes, sharding)


def abstract_params(module, clip: ClipShape, sharding=None) -> Any:
  """The params of `init_params` as shapes (with `sharding`): what evaluation restores into."""
  shapes = jax.eval_shape(functools.partial(init_params, module, clip), jax.random.PRNGKey(0))
  return with_sharding(shapes, sharding)


def state_shardings(module, clip: ClipShape, tx, mesh, mesh_spec, ema: bool = False) -> state_lib.TrainState:
  """NamedShardings of the TrainState (with `ema`) on `mesh`: params by the rules of `mesh_spec` (a MeshSpec,
  `vvt.config.sharding`), opt state and EMA params following."""
  return sharding_lib.state_shardings(abstract_state(module, clip, tx, ema=ema), mesh, mesh_spec)


def param_shardings(module, clip: ClipShape, mesh, mesh_spec) -> Any:
  """NamedShardings of the params on `mesh` by the rules of `mesh_spec` (a MeshSpec)."""
  return sharding_lib.param_shardings(abstract_params(module, clip), mesh, mesh_spec)
