"""The two parameter layouts of the encoder layers, and the pure conversion between them.

An `Encoder` (vvt/models/blocks.py) holds its L layers either per layer (`model.scan_layers=False`, the layout of
every converted checkpoint):

    {'block_0': P_0, 'block_1': P_1, ..., 'block_{L-1}': P_{L-1}}

or stacked for `nn.scan` (`model.scan_layers=True`): one tree whose every leaf carries a leading layer axis,

    {'blocks': {'block': P}}     with P[...][l] = P_l[...], leaves (L, *shape)

Both compute the same function. `to_model_layout(params, model)` is what a loader calls on a restored or
converted tree before use: it finds the layout of every encoder in the tree and converts it to the one the model
config asks for (a no-op if it already has it). The conversion is pure, works on any nesting of dicts, tuples,
lists and named tuples (an optimizer state that mirrors the params converts the same way), and on abstract
leaves (`jax.ShapeDtypeStruct`, e.g. a restore target; a NamedSharding's spec gains or loses the unsharded layer
axis). Checkpoints are restored in the layout they were written in and converted to the model's
(`vvt.train.checkpoints`), so a run may switch `scan_layers` on resume, and any checkpoint evaluates either way.
"""
from __future__ import annotations

from collections.abc import Mapping
import re

import jax
import jax.numpy as jnp

STACKED_KEY, STACKED_BLOCK = 'blocks', 'block'
_BLOCK = re.compile(r'block_(\d+)$')


def _is_per_layer(node) -> bool:
  """A dict {'block_0': ..., 'block_{L-1}': ...} (all of 0..L-1, nothing else)."""
  if not isinstance(node, Mapping) or not node:
    return False
  matches = [_BLOCK.match(k) if isinstance(k, str) else None for k in node]
  return all(matches) and sorted(int(m.group(1)) for m in matches) == list(range(len(node)))


def _is_stacked(node) -> bool:
  """A dict {'blocks': {'block': tree of (L, ...) leaves}}."""
  return (isinstance(node, Mapping) and set(node) == {STACKED_KEY} and isinstance(node[STACKED_KEY], Mapping)
          and set(node[STACKED_KEY]) == {STACKED_BLOCK})


def _stack_leaves(*leaves):
  if isinstance(leaves[0], jax.ShapeDtypeStruct):  # a NamedSharding's spec gains an unsharded layer axis
    sharding = leaves[0].sharding
    if isinstance(sharding, jax.sharding.NamedSharding):
      sharding = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(None, *sharding.spec))
    return jax.ShapeDtypeStruct((len(leaves), *leaves[0].shape), leaves[0].dtype, sharding=sharding)
  return jnp.stack(leaves)


def _unstack_leaf(leaf, i):
  if isinstance(leaf, jax.ShapeDtypeStruct):  # ... and loses it
    sharding = leaf.sharding
    if isinstance(sharding, jax.sharding.NamedSharding):
      sharding = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(*sharding.spec[1:]))
    return jax.ShapeDtypeStruct(leaf.shape[1:], leaf.dtype, sharding=sharding)
  return leaf[i]


def _num_layers(stacked_block) -> int:
  sizes = {leaf.shape[0] for leaf in jax.tree.leaves(stacked_block)}
  if len(sizes) != 1:
    raise ValueError(f'stacked encoder layers: leaves disagree on the layer axis, sizes {sorted(sizes)}')
  return sizes.pop()


def _map_structure(tree, on_dict):
  """Rebuilds dicts (as plain dicts), tuples, lists and named tuples; `on_dict` may replace a dict first."""
  if isinstance(tree, Mapping):
    replaced = on_dict(tree)
    if replaced is not None:
      return replaced
    return {k: _map_structure(v, on_dict) for k, v in tree.items()}
  if isinstance(tree, tuple) and hasattr(tree, '_fields'):  # named tuple (optax states)
    return type(tree)(*(_map_structure(v, on_dict) for v in tree))
  if isinstance(tree, (tuple, list)):
    return type(tree)(_map_structure(v, on_dict) for v in tree)
  return tree


def to_stacked(tree):
  """Every per-layer encoder `{'block_i': P_i}` in `tree` -> `{'blocks': {'block': stack(P_i)}}` (scan layout)."""
  def on_dict(node):
    if not _is_per_layer(node):
      return None
    layers = [_map_structure(node[f'block_{i}'], on_dict) for i in range(len(node))]
    try:
      stacked = jax.tree.map(_stack_leaves, *layers)
    except ValueError as e:
      raise ValueError(f'encoder layers block_0..block_{len(node) - 1} differ in structure: {e}') from None
    return {STACKED_KEY: {STACKED_BLOCK: stacked}}
  return _map_structure(tree, on_dict)


def to_per_layer(tree):
  """Every stacked encoder `{'blocks': {'block': P}}` in `tree` -> `{'block_i': P[i]}` (the unscanned layout)."""
  def on_dict(node):
    if not _is_stacked(node):
      return None
    block = _map_structure(node[STACKED_KEY][STACKED_BLOCK], on_dict)
    n = _num_layers(block)
    return {f'block_{i}': jax.tree.map(lambda leaf, i=i: _unstack_leaf(leaf, i), block) for i in range(n)}
  return _map_structure(tree, on_dict)


def under_stacked_layers(path) -> bool:
  """True for a leaf of a stacked encoder (a key path through `blocks/block`): its first axis is the layer
  axis, the rest one layer's shape (what per-parameter rules such as the weight-decay mask must look at)."""
  keys = [str(getattr(k, 'key', getattr(k, 'name', k))) for k in path]
  return any(a == STACKED_KEY and b == STACKED_BLOCK for a, b in zip(keys, keys[1:], strict=False))


def layout_of(tree) -> str | None:
  """'stacked', 'per_layer', 'mixed', or None (no encoder layers found) for a params tree."""
  found = set()

  def on_dict(node):
    if _is_stacked(node):
      found.add('stacked')
    elif _is_per_layer(node):
      found.add('per_layer')
    return None

  _map_structure(tree, on_dict)
  return None if not found else found.pop() if len(found) == 1 else 'mixed'


def to_model_layout(tree, model):
  """`tree` (params, or any state mirroring them) in the layout `model` (a model config or its `ModelSpec`)
  builds: stacked for `scan_layers=True`, per layer otherwise. Pure; a tree already in that layout comes back
  equal."""
  return to_stacked(tree) if model.scan_layers else to_per_layer(tree)
