"""The attentive pooler: learned query tokens attend over all the tokens of a video (model.classifier='attentive').

    tokens (B, L, D) -> [depth self-attention blocks over the L tokens] -> Q queries attend over them -> (B, D)

One module for the two published forms, chosen by `cross_attention` (the fields are `model.attentive_pooler`):
  'block'  V-JEPA 2's attentive probe (transformers' `VJEPA2AttentivePooler`, the V-JEPA evals' AttentivePooler):
           `depth` pre-LN self-attention blocks over the tokens (V-JEPA 2's num_pooler_layers), then one
           cross-attention block: q from the query tokens (not normalised), k and v from the LayerNorm of the
           tokens, no output projection (so num_heads * head_dim = D), the query tokens as the residual, then a
           pre-LN MLP block.
  'plain'  VideoPrism's attention pooling head (transformers' `VideoPrismMultiheadAttentionPoolingHead`): q, k, v
           projections to num_heads x head_dim (head_dim may differ from D / num_heads: VideoPrism uses
           intermediate_size / num_heads), an output projection back to D, then a LayerNorm; no residual, no MLP.
           `per_dim_scale`: the queries are scaled per channel of a head by 1.442695041 * softplus(s) / sqrt(d_h),
           s a learned (d_h,) vector initialised to 0 (so the scale starts at 1 / sqrt(d_h)).
The Q query outputs are averaged (Q = 1 in both papers). Every attention is the one primitive
(`kernels.dot_product_attention`); the self-attention blocks are the encoders' own `EncoderBlock`.

Parameters (under `pooler`): query_tokens (1, Q, D); layers/block_i (depth blocks); cross_attention/{query, key,
value} (D, H, d_h) [+ out (H, d_h, D) for 'plain']; per_dim_scale (d_h,); 'block': cross_norm, mlp_norm, mlp;
'plain': output_norm.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from vvt.models import kernels
from vvt.models import norms
from vvt.models.blocks import Encoder
from vvt.models.blocks import Mlp

R_SOFTPLUS_0 = 1.442695041  # 1 / softplus(0) = 1 / ln 2: VideoPrism's per-dimension scale is 1 at s = 0


class CrossAttention(nn.Module):
  """Queries (B, Q, D) attend over tokens (B, L, D): q/k/v projections (D -> H x d_h), the one attention
  primitive, and an output projection (H x d_h -> D) when `out_projection`, else the heads concatenated."""
  num_heads: int
  head_dim: int
  out_projection: bool
  per_dim_scale: bool = False
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  impl: str = 'einsum'
  backend: str | None = None
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, queries, tokens, train: bool = False):
    dense = lambda name: nn.DenseGeneral((self.num_heads, self.head_dim), dtype=self.dtype,
                                         param_dtype=self.param_dtype, kernel_init=nn.initializers.xavier_uniform(),
                                         name=name)
    q, k, v = dense('query')(queries), dense('key')(tokens), dense('value')(tokens)  # (B, L, H, d_h)
    if self.per_dim_scale:
      s = self.param('per_dim_scale', nn.initializers.zeros, (self.head_dim,), self.param_dtype)
      q = q * (R_SOFTPLUS_0 * jax.nn.softplus(s.astype(jnp.float32))).astype(q.dtype)
    rng = self.make_rng('dropout') if train and self.dropout_rate > 0 else None
    y = kernels.dot_product_attention(q, k, v, dropout_rate=self.dropout_rate, dropout_rng=rng,
                                      deterministic=not train, impl=self.impl, backend=self.backend)
    if self.out_projection:
      return nn.DenseGeneral(queries.shape[-1], axis=(-2, -1), dtype=self.dtype, param_dtype=self.param_dtype,
                             kernel_init=nn.initializers.xavier_uniform(), name='out')(y)
    return y.reshape(*y.shape[:2], self.num_heads * self.head_dim)


class AttentivePooler(nn.Module):
  """tokens (B, L, D) -> (B, D): see the module docstring. `block`: the EncoderBlock fields of the self-attention
  blocks and the numerics (layer_norm_eps, gelu_approximate, dtypes, attention_impl, layer_norm_scale_offset)."""
  num_queries: int
  num_heads: int
  head_dim: int
  depth: int
  mlp_dim: int
  cross_attention: str  # 'block' | 'plain'
  per_dim_scale: bool
  block: dict
  remat: Any = False  # the self-attention blocks' remat policy and layout, as the model's encoders
  scan: bool = False

  @nn.compact
  def __call__(self, tokens, train: bool = False):
    b, length, d = tokens.shape
    f = self.block
    norm = lambda name: norms.layer_norm(f['layer_norm_eps'], f['dtype'], f['param_dtype'], name,
                                         f.get('layer_norm_scale_offset', 0.0))
    x = tokens
    if self.depth:
      block = dict(f, grid=(1, 1, length), stages=('joint',), projected=(False,))
      x, _, _ = Encoder(self.depth, block, remat=self.remat, scan=self.scan, name='layers')(x[:, None], None, train)
      x = x[:, 0]
    init = nn.initializers.normal(stddev=0.02)
    queries = self.param('query_tokens', init, (1, self.num_queries, d), f['param_dtype']).astype(x.dtype)
    queries = jnp.broadcast_to(queries, (b, self.num_queries, d))
    attend = CrossAttention(self.num_heads, self.head_dim, out_projection=self.cross_attention == 'plain',
                            per_dim_scale=self.per_dim_scale, dtype=f['dtype'], param_dtype=f['param_dtype'],
                            impl=f['attention_impl'], backend=f['backend'],
                            dropout_rate=f['attention_dropout_rate'], name='cross_attention')
    if self.cross_attention == 'plain':
      y = norm('output_norm')(attend(queries, x, train))
    else:
      y = queries + attend(queries, norm('cross_norm')(x), train)
      mlp = Mlp(self.mlp_dim, f['dropout_rate'], f['gelu_approximate'], f['dtype'], f['param_dtype'], name='mlp')
      y = y + mlp(norm('mlp_norm')(y), train)
    return jnp.mean(y, axis=1) if self.num_queries > 1 else y[:, 0]

