"""The V-JEPA / V-JEPA 2 predictor: a narrow transformer that predicts the encoder's features of target tokens from
the context tokens' features and the targets' positions (Bardes et al. 2024, sec. 3; Assran et al. 2025, sec. 2;
transformers `VJEPA2Predictor`, facebookresearch/jepa `src/models/predictor.py`).

  context (B, K_c, D) features at positions ctx (B, K_c), targets at positions tgt (B, K_t)
  -> Dense(D -> D_p) of the context, beside one learned mask token per target (the token of mask set `index`)
  -> `depth` pre-LN blocks over the K_c + K_t tokens, each token's queries and keys rotated by its (t, h, w)
     (V-JEPA 2's 3D RoPE, `vvt/models/rope.py`, gathered at the token's position in `grid`)
  -> LayerNorm, the target tokens only, Dense(D_p -> D): (B, K_t, D)

Attention has no mask and positions enter only through the rotation, so the order of the tokens does not change
the result: transformers sorts them by position before the blocks and back after, which this module does not need.
V-JEPA (the first) adds a sin-cos position table instead of RoPE; vvt implements the V-JEPA 2 predictor.

Params (`Predictor`): `embed` (D, D_p), `mask_tokens` (num_mask_tokens, D_p), `block_i/{joint_norm,
joint_attention/{query, key, value, out}, mlp_norm, mlp/Dense_0, mlp/Dense_1}` (the encoder blocks' names),
`norm`, `projection` (D_p, D).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vvt.models import blocks
from vvt.models import kernels
from vvt.models import rope


@dataclasses.dataclass(frozen=True)
class PredictorSpec:
  """The predictor's shape: width `hidden_size` (D_p), `depth` blocks of `num_heads` heads, MLPs `mlp_dim` wide,
  `num_mask_tokens` mask tokens (one per mask set), LayerNorm eps, exact or tanh GELU, q/k/v biases."""
  hidden_size: int = 384
  depth: int = 12
  num_heads: int = 12
  mlp_dim: int = 1536
  num_mask_tokens: int = 10
  layer_norm_eps: float = 1e-6
  gelu_approximate: bool = False
  qkv_bias: bool = True


def rotate_at(x, positions, grid):
  """x (B, M, H, d_h) queries or keys of tokens at `positions` (B, M) of the flattened `grid` (t, h, w) -> x
  rotated by each token's (t, h, w) (`rope.rotate` of kept tokens)."""
  return rope.rotate(x[:, None], grid, positions=positions[:, None])[:, 0]


class PositionalAttention(nn.Module):
  """Self-attention over a set of tokens (B, M, D) at `positions` (B, M), q and k rotated by their positions."""
  num_heads: int
  qkv_bias: bool = True
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, positions, grid):
    d = x.shape[-1]
    dense = functools.partial(nn.DenseGeneral, features=(self.num_heads, d // self.num_heads), axis=-1,
                              use_bias=self.qkv_bias, dtype=self.dtype)
    q, k, v = (dense(name=name)(x) for name in ('query', 'key', 'value'))  # (B, M, H, d_h)
    q, k = rotate_at(q, positions, grid), rotate_at(k, positions, grid)
    y = kernels.dot_product_attention(q, k, v)
    return nn.DenseGeneral(features=d, axis=(-2, -1), dtype=self.dtype, name='out')(y)


class PredictorBlock(nn.Module):
  """Pre-LN block: x + Attention(LN(x)), then x + MLP(LN(x))."""
  spec: PredictorSpec
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, positions, grid):
    s = self.spec
    norm = lambda name: nn.LayerNorm(epsilon=s.layer_norm_eps, dtype=self.dtype, name=name)
    x = x + PositionalAttention(s.num_heads, s.qkv_bias, self.dtype, name='joint_attention')(
        norm('joint_norm')(x), positions, grid)
    mlp = blocks.Mlp(s.mlp_dim, gelu_approximate=s.gelu_approximate, dtype=self.dtype, name='mlp')
    return x + mlp(norm('mlp_norm')(x), False)


class Predictor(nn.Module):
  """context (B, K_c, D), context_positions (B, K_c), target_positions (B, K_t) -> predicted features (B, K_t, D)
  of the targets (the module docstring); `index` picks the mask token (the mask set's), `grid` (t, h, w) is the
  token grid the positions index (time-major)."""
  spec: PredictorSpec
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, context, context_positions, target_positions, *, grid, index: int = 0):
    s = self.spec
    out_width = context.shape[-1]
    x = nn.Dense(s.hidden_size, dtype=self.dtype, name='embed')(context)
    tokens = self.param('mask_tokens', nn.initializers.zeros, (s.num_mask_tokens, s.hidden_size))
    b, k_t = target_positions.shape
    targets = jnp.broadcast_to(tokens[index % s.num_mask_tokens].astype(x.dtype), (b, k_t, s.hidden_size))
    x = jnp.concatenate([x, targets], axis=1)
    positions = jnp.concatenate([context_positions, target_positions], axis=1)
    for i in range(s.depth):
      x = PredictorBlock(s, self.dtype, name=f'block_{i}')(x, positions, grid)
    x = nn.LayerNorm(epsilon=s.layer_norm_eps, dtype=self.dtype, name='norm')(x[:, context.shape[1]:])
    return nn.Dense(out_width, dtype=self.dtype, name='projection')(x)
