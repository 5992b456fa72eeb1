"""Logical axis names of the models, and the rules that map them to mesh axes (MaxText / big_vision style).

The models name what an axis holds, never a mesh axis:
  batch     examples; also a grouped attention's G axis (B x groups, batch-major)
  heads     attention heads (the H of (G, L, H, d_h) and of the q/k/v/out kernels)
  head_dim  the d_h channels of one head
  embed     the model width D
  mlp       the MLP's hidden units
`DEFAULT_RULES` maps each to the mesh axes ('data', 'fsdp', 'model') that shard it, in one place: the models read
it when traced under a mesh (`traced_axes`), and the trainer's data axes (`BATCH_AXES`) and tensor-parallel
parameter specs (`PARAM_AXES` through `mesh_spec`) derive from it. This module imports no JAX at load.
"""
from __future__ import annotations

import math

BATCH, HEADS, HEAD_DIM, EMBED, MLP = 'batch', 'heads', 'head_dim', 'embed', 'mlp'

# logical axis -> the mesh axes that shard it (an empty tuple: never sharded).
DEFAULT_RULES = (
    (BATCH, ('data', 'fsdp')),
    (HEADS, ('model',)),
    (MLP, ('model',)),
    (HEAD_DIM, ()),
    (EMBED, ()),
)

# The logical axes of the parameters that tensor parallelism splits (path regex -> one name per dimension):
# q/k/v kernels (D, H, d_h) and the output kernel (H, d_h, D) over heads; the MLP's first kernel (D, M) over
# its units, the second (M, D) over its inputs.
PARAM_AXES = (
    (r'(query|key|value)/kernel$', (EMBED, HEADS, HEAD_DIM)),
    (r'(query|key|value)/bias$', (HEADS, HEAD_DIM)),
    (r'attention/out/kernel$', (HEADS, HEAD_DIM, EMBED)),
    (r'mlp/Dense_0/kernel$', (EMBED, MLP)),
    (r'mlp/Dense_0/bias$', (MLP,)),
    (r'mlp/Dense_1/kernel$', (MLP, EMBED)),
)


def mesh_axes(logical: str, rules=DEFAULT_RULES) -> tuple[str, ...]:
  """The mesh axes that shard logical axis `logical` under `rules` (KeyError for a name the rules lack)."""
  return dict(rules)[logical]


def mesh_spec(logical_axes, rules=DEFAULT_RULES) -> tuple:
  """A PartitionSpec's entries for one name per dimension: None (unsharded), a mesh axis, or a tuple of them."""
  def entry(name):
    axes = mesh_axes(name, rules)
    return None if not axes else axes[0] if len(axes) == 1 else axes
  return tuple(entry(name) for name in logical_axes)


BATCH_AXES = mesh_axes(BATCH)  # the mesh axes a batch (and a group axis G, batch-major) is sharded over


def traced_axes(logical: str, size: int, rules=DEFAULT_RULES) -> tuple[str, ...]:
  """The mesh axes of `logical` (those of > 1 device) that shard an axis of `size` under the mesh the caller is
  traced with (`jax.sharding.use_abstract_mesh`, as vvt's steps do); () without a mesh or when they do not
  divide `size`."""
  import jax  # pylint: disable=g-import-not-at-top
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return ()
  wanted = mesh_axes(logical, rules)
  axes = tuple(a for a in mesh.axis_names if a in wanted and mesh.shape[a] > 1)
  return axes if axes and size % math.prod(mesh.shape[a] for a in axes) == 0 else ()
