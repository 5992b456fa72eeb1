"""Layer-wise learning-rate decay (`optimizer.layer_decay`), as BEiT (Bao et al., 2022, fine-tuning) and the
VideoMAE / VideoMAE V2 / InternVideo fine-tuning recipes use it: the update of a parameter of layer i is
multiplied by

    s_i = decay^(L + 1 - i),   i = 0 .. L + 1,

L being the number of transformer blocks of the model's encoders:

    i = 0        the tubelet / patch embedding (`embedding`), the first encoder's class token (`cls`) and
                 position tables (`posembed`): the smallest scale, decay^(L + 1)
    i = 1 .. L   the blocks: `block_j` of an encoder is layer offset + j + 1 (block l of L, numbered from 1,
                 has decay^(L + 1 - l): the last block is already decayed once, as in BEiT's code)
    i = L + 1    the head (`head`, X-ViT's `temporal_head`), the last encoder's final norm (`encoder_norm`),
                 any other parameter (an `fc_norm`, ...): scale 1

The encoders count in the order the model runs them, `ENCODERS`. ViViT's factorised encoder (Model 2) has one
depth L = L_s + L_t, spatial then temporal: spatial `block_j` is layer j + 1, temporal `block_j` is
L_s + j + 1; the spatial encoder's final norm and the temporal encoder's class token and position table, which
sit between the two, are layer L_s (the last spatial block's scale).

Stacked layers (`model.scan_layers`, `{'blocks': {'block': P}}` with leaves (L_k, ...)): the scale is per slice
of the leading layer axis, an array (L_k, 1, ..., 1). The scale multiplies the whole update of the optimiser
(AdamW's step and its decoupled weight decay, or SGD's), which is what BEiT's per-group `lr_scale` does; the
weight-decay mask is not changed.
"""
from typing import Any

import jax
import numpy as np
import optax

from vvt.models import layout

ENCODERS = ('encoder', 'spatial_encoder', 'temporal_encoder')  # in the order the models run them
_INPUT_PARTS = ('cls', 'posembed')                             # an encoder's own inputs: its first layer's input


def _key(k) -> str:
  return str(getattr(k, 'key', getattr(k, 'name', k)))


def _depth(layers) -> int:
  """Number of blocks of an encoder's `layers` (per layer `block_j`, or stacked with a leading layer axis)."""
  if layout.STACKED_KEY in layers:
    return int(jax.tree.leaves(layers[layout.STACKED_KEY])[0].shape[0])
  return sum(1 for k in layers if str(k).startswith('block_'))


def encoder_depths(params) -> list[tuple[str, int]]:
  """(encoder name, number of blocks) of the encoders of `params`, in `ENCODERS` order."""
  return [(name, _depth(params[name]['layers'])) for name in ENCODERS
          if name in params and hasattr(params[name], 'get') and 'layers' in params[name]]


def num_layers(params) -> int:
  """L: the blocks of all the encoders of `params`."""
  return sum(depth for _, depth in encoder_depths(params))


def layer_ids(params) -> Any:
  """A tree like `params` of layer ids (see the module doc): an int per leaf, an int array (L_k,) per stacked
  leaf (the ids of its slices)."""
  depths = encoder_depths(params)
  total = sum(d for _, d in depths)
  offsets, at = {}, 0
  for name, depth in depths:
    offsets[name] = (at, depth, name == depths[-1][0])
    at += depth

  def layer_of(path, leaf):
    keys = [_key(k) for k in path]
    if keys[0] == 'embedding':
      return 0
    if keys[0] not in offsets or len(keys) < 2:
      return total + 1
    offset, depth, last = offsets[keys[0]]
    if keys[1] == 'layers' and layout.under_stacked_layers(path):
      return offset + 1 + np.arange(leaf.shape[0])
    if keys[1] == 'layers' and len(keys) > 2 and keys[2].startswith('block_'):
      return offset + 1 + int(keys[2][len('block_'):])
    if keys[1] in _INPUT_PARTS:
      return offset
    if keys[1] == 'encoder_norm' and not last:
      return offset + depth
    return total + 1

  return jax.tree_util.tree_map_with_path(layer_of, params)


def lr_scales(params, decay: float) -> Any:
  """A tree like `params` of the update scales decay^(L + 1 - i): a float per leaf, a float32 array
  (L_k, 1, ..., 1) per stacked leaf (broadcasting over one layer's shape)."""
  total = num_layers(params)

  def scale(ids, leaf):
    s = np.power(np.float64(decay), total + 1 - np.asarray(ids, np.float64))
    if np.ndim(ids) == 0:
      return float(s)
    return s.astype(np.float32).reshape((-1,) + (1,) * (len(leaf.shape) - 1))

  return jax.tree.map(scale, layer_ids(params), params)


def scale_by_layer_decay(decay: float) -> optax.GradientTransformation:
  """Multiplies each update by its layer's scale (`lr_scales`); stateless, the scales come from the updates'
  paths and shapes when the step is traced. Place it last in the chain (after the learning rate)."""

  def init(params):
    del params
    return optax.EmptyState()

  def update(updates, state, params=None):
    del params
    scales = lr_scales(updates, decay)
    return jax.tree.map(lambda u, s: u * np.asarray(s, u.dtype), updates, scales), state

  return optax.GradientTransformation(init, update)
