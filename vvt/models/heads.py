"""Classification heads: linear (one or several, e.g. Epic-Kitchens verb + noun) and X-ViT's temporal-attention head."""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vvt.models.blocks import Encoder


class ClassifierHead(nn.Module):
  """Optional pre-logits (Dense + tanh), dropout, then Dense to logits (zero-initialised, as in scenic).

  num_classes: int -> logits (B, C) from `output_projection`; dict head -> n -> {head: (B, n)} from
  `output_projection_<head>`; None -> no head, the input (B, D) returned as it is. Optional hidden layer (X-ViT's
  mlp_head: LN -> Dense -> GELU -> Dense).
  """
  num_classes: Any
  representation_size: int | None = None
  dropout_rate: float = 0.0
  mlp_dim: int | None = None
  layer_norm_eps: float | None = None
  gelu_approximate: bool = False
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, train: bool = False):
    if self.num_classes is None:  # a video-text model's video tower: the representation is its output
      return x
    if self.layer_norm_eps is not None:
      x = nn.LayerNorm(epsilon=self.layer_norm_eps, dtype=self.dtype, param_dtype=self.param_dtype, name='head_norm')(x)
    if self.representation_size is not None:
      x = jnp.tanh(nn.Dense(self.representation_size, dtype=self.dtype, param_dtype=self.param_dtype,
                            name='pre_logits')(x))
    if self.mlp_dim is not None:
      x = nn.gelu(nn.Dense(self.mlp_dim, dtype=self.dtype, param_dtype=self.param_dtype,
                             name='head_hidden')(x), approximate=self.gelu_approximate)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
    dense = lambda n, name: nn.Dense(n, kernel_init=nn.initializers.zeros, dtype=self.dtype,
                                     param_dtype=self.param_dtype, name=name)
    if isinstance(self.num_classes, int):
      return dense(self.num_classes, 'output_projection')(x).astype(jnp.float32)
    return {head: dense(n, f'output_projection_{head}')(x).astype(jnp.float32)
            for head, n in dict(self.num_classes).items()}


class TemporalAttentionHead(nn.Module):
  """X-ViT's temporal-attention (TA) aggregation (sec. 3): a class token attends the T per-frame class tokens
  (B, T, D) through `num_layers` transformer layers (no temporal position embedding); its output feeds the
  classifier."""
  num_layers: int
  block: dict
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  remat: Any = False
  scan: bool = False

  @nn.compact
  def __call__(self, frames, train: bool = False):
    b, t, d = frames.shape
    cls = self.param('cls', nn.initializers.zeros, (1, 1, d), self.param_dtype)
    cls = jnp.broadcast_to(cls, (b, 1, d)).astype(frames.dtype)
    _, cls, _ = Encoder(self.num_layers, self.block, remat=self.remat, scan=self.scan, name='layers')(
        frames[:, None], cls, train)
    return cls[:, 0]
