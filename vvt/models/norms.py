"""The LayerNorm of every vvt model, and VideoPrism's variant whose stored scale is an offset from 1.

`model.layer_norm_scale_offset` c: every LayerNorm of the model computes (x - mean) / sqrt(var + eps) * (c + scale)
+ bias. c = 0 (the default) is flax's own `nn.LayerNorm`, unchanged; VideoPrism (praxis' LayerNorm, transformers'
`VideoPrismLayerNorm`: `weight + 1`) stores scales as deviations from 1, initialised at 0, so c = 1 keeps its
weights as they are (a converted file round-trips bit for bit) and weight decay pulls the scales towards 1, as in
its training.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp


class OffsetLayerNorm(nn.Module):
  """LayerNorm over the last axis with the multiplier offset + scale (`scale` initialised to 0)."""
  epsilon: float = 1e-6
  offset: float = 1.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    d = x.shape[-1]
    scale = self.param('scale', nn.initializers.zeros, (d,), self.param_dtype)
    bias = self.param('bias', nn.initializers.zeros, (d,), self.param_dtype)
    y = x.astype(jnp.float32)
    mean = jnp.mean(y, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(y - mean), axis=-1, keepdims=True)
    y = (y - mean) * jnp.reciprocal(jnp.sqrt(var + self.epsilon))
    y = y * (self.offset + scale.astype(jnp.float32)) + bias.astype(jnp.float32)
    return y.astype(self.dtype)


def layer_norm(epsilon: float, dtype, param_dtype, name: str, scale_offset: float = 0.0) -> nn.Module:
  """The model's LayerNorm `name`: flax's nn.LayerNorm for scale_offset 0, else OffsetLayerNorm."""
  if scale_offset == 0.0:
    return nn.LayerNorm(epsilon=epsilon, dtype=dtype, param_dtype=param_dtype, name=name)
  return OffsetLayerNorm(epsilon=epsilon, offset=float(scale_offset), dtype=dtype, param_dtype=param_dtype, name=name)
