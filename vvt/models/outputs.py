"""Named outputs of a model: what a caller reads besides the logits, asked for by name (no method intercepted).

    logits = module.apply(variables, video)                                      # as always: nothing else kept
    out = module.apply(variables, video, outputs=('pooled', 'block3', 'encoded-1'))   # {name: array}

  'logits'       (B, C), or {head: (B, n)} for a multi-head model
  'pooled'       (B, D): the representation the classifier head reads (the normalised class token, the pooled
                 tokens, the attentive pooler's output, X-ViT's temporal-attention output)
  'encoded'      (B, n_t, N, D): the tokens of the model's last encoder after its final LayerNorm (what an attentive
                 pooler reads; a per-frame class token at n = 0, a global one left out)
  'block<i>'     the tokens after block i, before any norm; i counts the layers of the model's encoders in order
                 (ViViT Model 2 and VideoPrism: the spatial encoder's, then the temporal encoder's) from 0, or from
                 the last with a negative i ('block-1')
  'encoded<i>'   block i's tokens through the final LayerNorm of its encoder (V-JEPA 2's features of a layer;
                 'encoded-1' is 'encoded')
Tokens are (B, n_t, N, D) on the model's token grid; ViViT Model 2's temporal encoder's are (B, 1, n_t, D). Only the
blocks asked for are kept (a scanned encoder returns them as scan outputs).

The masked encoder (VideoMAE, V-JEPA) is the same call with `kept` (B, K), the grid indices of the tokens it runs on:

    out = module.apply(variables, video, outputs=('encoded',), kept=kept)    # encoder on the kept tokens only

its tokens are then (B, 1, K, D) for joint attention, (B, n_t, K / n_t, D) for a factorised scheme's tube mask
(vvt/models/masking.py).

Features of a list of layers (`features`; a probe's `task.probe.layers`, `vvt features --layers`): each layer's
'encoded<i>' tokens, averaged ('mean') or concatenated along D ('concat'); no layers: the model's own, 'pooled'
and 'encoded'. This module imports no JAX at import time (the config checks read `num_layers` and `check_layers`).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Optional

NAMES = ('logits', 'pooled', 'encoded')
COMBINE = ('mean', 'concat')
_LAYER = re.compile(r'^(block|encoded)(-?\d+)$')


def num_layers(model) -> int:
  """The blocks of the model's encoders (a ModelSpec or a model config): ViViT Model 2's and VideoPrism's spatial
  and temporal encoders together."""
  from vvt.models import schemes
  scheme = schemes.get(model.attention)
  two = scheme.two_encoders or scheme.temporal_over_positions
  return int(model.num_layers) + (int(model.temporal_layers) if two else 0)


def check_layers(field: str, layers, count: Optional[int]) -> list[str]:
  """The problems of a list of layers `layers` of a model of `count` blocks (None: not known, the indices' type
  only), one line each naming `field`."""
  if isinstance(layers, (str, bytes)) or not isinstance(layers, (tuple, list)):
    return [f'{field} must be a tuple of layer indices, got {layers!r}']
  out = []
  for k, i in enumerate(layers):
    if isinstance(i, bool) or not isinstance(i, int):
      out.append(f'{field}[{k}] must be a layer index (an int), got {i!r}')
    elif count is not None and not -count <= i < count:
      out.append(f'{field}[{k}] must be a layer of the model\'s {count} (0 ... {count - 1}, or -{count} ... -1), '
                 f'got {i}')
  return out


@dataclasses.dataclass(frozen=True)
class Request:
  """The outputs asked of a call: their names, and the blocks (0 ... L - 1) whose tokens they need."""
  names: tuple
  blocks: tuple


def request(outputs, count: int) -> Optional[Request]:
  """The Request of `outputs` (a name or names; None: the logits only) of a model of `count` blocks. ValueError
  for an unknown name or a block the model does not have."""
  if outputs is None:
    return None
  names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
  blocks = {i for i in (block_of(n, count) for n in names) if i is not None}
  return Request(names, tuple(sorted(blocks)))


def block_of(name: str, count: int) -> Optional[int]:
  """The block (0 ... count - 1) of output `name`, None for a name of NAMES."""
  if name in NAMES:
    return None
  m = _LAYER.match(str(name))
  if not m:
    raise ValueError(f'outputs: {name!r} is not an output of the model ({", ".join(NAMES)}, block<i>, encoded<i>)')
  i = int(m.group(2))
  if not -count <= i < count:
    raise ValueError(f'outputs: {name!r}: the model has {count} layers (0 ... {count - 1}, or -{count} ... -1)')
  return i % count


def kept(req: Optional[Request], first: int, count: int) -> tuple:
  """The blocks of `req` in an encoder whose layers are first ... first + count - 1, numbered in it."""
  return () if req is None else tuple(i - first for i in req.blocks if first <= i < first + count)


def select(req: Request, count: int, values: dict, blocks: dict, norm_of: Callable) -> dict:
  """{name: array} of the names of `req`: `values` ('logits', 'pooled', 'encoded'), `blocks` {block: tokens},
  `norm_of(block)` the final LayerNorm of the block's encoder."""
  out = {}
  for name in req.names:
    i = block_of(name, count)
    if i is None:
      out[name] = values[name]
    else:
      out[name] = blocks[i] if name.startswith('block') else norm_of(i)(blocks[i])
  return out


def layer_names(layers) -> tuple:
  """The outputs that give the features of `layers` (() : the model's own 'pooled' and 'encoded')."""
  return ('pooled', 'encoded') if not layers else tuple(f'encoded{int(i)}' for i in layers)


def combine(tokens: list, how: str):
  """One (B, ..., D) array of the layers' tokens (each (B, ..., D)): their mean, or concatenated to D * k."""
  import jax.numpy as jnp
  if how not in COMBINE:
    raise ValueError(f'the layers are combined by one of {", ".join(COMBINE)}, got {how!r}')
  shapes = {tuple(t.shape) for t in tokens}
  if len(shapes) > 1:
    raise ValueError(f'the layers asked for have tokens of different shapes {sorted(shapes)} (ViViT Model 2\'s '
                     'spatial and temporal encoders): take the layers of one encoder')
  return jnp.mean(jnp.stack(tokens), axis=0) if how == 'mean' else jnp.concatenate(tokens, axis=-1)


def features(out: dict, layers, how: str = 'mean') -> tuple[Any, Any]:
  """(pooled (B, D'), tokens (B, n_t, N, D')) from the outputs `out` of `layer_names(layers)`: no layers, the
  model's 'pooled' and 'encoded' (D' = D); else the layers' tokens combined (`combine`; D' = D, or D * k
  concatenated) and their mean over the tokens."""
  if not layers:
    return out['pooled'], out['encoded']
  tokens = combine([out[n] for n in layer_names(layers)], how)
  return tokens.mean(axis=tuple(range(1, tokens.ndim - 1))), tokens
