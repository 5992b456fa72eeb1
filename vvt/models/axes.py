"""Logical axis names of the models, and the rules that map them to mesh axes (MaxText / big_vision style).

The models name what an axis holds, never a mesh axis:
  batch     examples; also a grouped attention's G axis (B x groups, batch-major)
  heads     attention heads (the H of (G, L, H, d_h) and of the q/k/v/out kernels)
  head_dim  the d_h channels of one head
  embed     the model width D
  mlp       the MLP's hidden units
`DEFAULT_RULES` maps each to the mesh axes ('data', 'fsdp', 'model') that shard it (MaxText's `logical_axis_rules`);
a run may map them otherwise (`mesh.logical_rules`, vvt.config.sharding). The rules a model is traced under are a
context, as flax's `nn.logical_axis_rules`:

  with axes.axis_rules(rules):    # ((logical name, mesh axes), ...); None: DEFAULT_RULES
    ...                           # traced_axes / mesh_axes / mesh_spec read `rules` (outside any: DEFAULT_RULES)

so no module carries them; vvt's train and eval steps enter it inside the traced function. The trainer's data
axes (`BATCH_AXES`) and tensor-parallel parameter specs (`PARAM_AXES` through `mesh_spec`) derive from the same
rules. This module imports no JAX at load.
"""
from __future__ import annotations

import contextlib
import contextvars
import math

BATCH, HEADS, HEAD_DIM, EMBED, MLP = 'batch', 'heads', 'head_dim', 'embed', 'mlp'
LOGICAL_AXES = (BATCH, HEADS, HEAD_DIM, EMBED, MLP)

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

# The logical axes of the attention's operands (G, L, H, d_h) that the kernels shard when traced under a mesh (G
# is batch-major): with PARAM_AXES, the arrays in which no mesh axis may shard two dimensions.
OPERAND_AXES = (BATCH, HEADS, HEAD_DIM)

_ACTIVE_RULES = contextvars.ContextVar('vvt_axis_rules', default=DEFAULT_RULES)


def as_mesh_axes(value) -> tuple[str, ...]:
  """A rule's mesh axes as a tuple: None -> (), 'model' -> ('model',), a list -> a tuple."""
  if value is None:
    return ()
  return (value,) if isinstance(value, str) else tuple(value)


def with_defaults(rules) -> tuple:
  """Every logical axis with its mesh axes: those `rules` ((name, mesh axes) pairs; None: none) names as given,
  the others as DEFAULT_RULES, in DEFAULT_RULES' order."""
  given = {name: as_mesh_axes(value) for name, value in rules or ()}
  return tuple((name, given.get(name, axes)) for name, axes in DEFAULT_RULES)


@contextlib.contextmanager
def axis_rules(rules):
  """Within: `rules` (completed by `with_defaults`; None: DEFAULT_RULES) are the active rules."""
  token = _ACTIVE_RULES.set(with_defaults(rules))
  try:
    yield
  finally:
    _ACTIVE_RULES.reset(token)


def active_rules() -> tuple:
  """The rules of the innermost `axis_rules` context; DEFAULT_RULES outside any."""
  return _ACTIVE_RULES.get()


def mesh_axes(logical: str, rules=None) -> tuple[str, ...]:
  """The mesh axes that shard logical axis `logical` under `rules` (None: the active rules; KeyError for a name
  the rules lack)."""
  return tuple(dict(active_rules() if rules is None else rules)[logical])


def mesh_spec(logical_axes, rules=None) -> tuple:
  """A PartitionSpec's entries for one name per dimension: None (unsharded), a mesh axis, or a tuple of them
  (`rules` None: the active rules)."""
  def entry(name):
    axes = mesh_axes(name, rules)
    return None if not axes else axes[0] if len(axes) == 1 else axes
  return tuple(entry(name) for name in logical_axes)


BATCH_AXES = mesh_axes(BATCH, DEFAULT_RULES)  # the default mesh axes of a batch (and of a group axis G, batch-major)


def batch_axes(rules=None) -> tuple[str, ...]:
  """The mesh axes that shard a batch (logical `batch`) under `rules` (None: the active rules; by default
  BATCH_AXES)."""
  return mesh_axes(BATCH, rules)


def traced_axes(logical: str, size: int, rules=None) -> tuple[str, ...]:
  """The mesh axes of `logical` under `rules` (None: the active rules, `axis_rules`), those of > 1 device, that
  shard an axis of `size` under the mesh the caller is traced with (`jax.sharding.use_abstract_mesh`, as vvt's
  steps do); () without a mesh or when they do not divide `size`."""
  import jax
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return ()
  wanted = mesh_axes(logical, rules)
  axes = tuple(a for a in mesh.axis_names if a in wanted and mesh.shape[a] > 1)
  return axes if axes and size % math.prod(mesh.shape[a] for a in axes) == 0 else ()
