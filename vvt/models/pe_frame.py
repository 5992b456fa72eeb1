"""Perception Encoder's frame model: timm's PE core ViT (timm 1.0.31 `timm/models/eva.py`, `Eva` built by
`vit_pe_core_*`; in transformers a `TimmWrapperForImageClassification`), one image in, one vector out.

    module = PeFrameModel(spec)                                # spec: a PeFrameSpec
    features = module.apply(variables, images)                 # (N, H, W, 3) -> (N, C), C = spec.num_classes

  patch embed   a (p, p) stride-p convolution without bias (eva.py: `bias=not use_pre_transformer_norm`), tokens
                in row-major (h, w) order; the class token first where spec.class_token; `pos_embed` (1, L, D)
                added to every token (L = N_p + 1 with the class token)
  norm_pre      LayerNorm before the blocks (PE's `use_pre_transformer_norm`)
  blocks        x + [g1 *] proj(attn(norm1(x))), x + [g2 *] fc2(gelu(fc1(norm2(x)))): one fused `qkv` (D -> 3D,
                with bias), the patch tokens' q and k rotated by 2-D RoPE (`axial_rope_tables`; the class token
                unrotated), scale d_h^-0.5; g1, g2 the layer scale where spec.layer_scale (`init_values`)
  norm          LayerNorm after the blocks
  attn_pool     timm's `AttentionPoolLatent`: one learned `latent` query (`q`) over every token (`kv`, spec.pool_heads
                heads), `proj`, then x + mlp(norm(x)); its one row
  head          `head` (D -> C, with bias): the frame's vector (transformers' `logits`)

All LayerNorms have eps spec.norm_eps (PE's 1e-5); GELU is the exact one.
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vvt.models import kernels
from vvt.models.pe_temporal import rotate_pairs
from vvt.models.pe_video_config import PeFrameSpec  # noqa: F401  (the spec of this module's model)


def axial_rope_tables(spec: PeFrameSpec) -> tuple[np.ndarray, np.ndarray]:
  """(cos, sin), each float32 (L, d_h / 2) for the L tokens (class token first: angle 0): timm's `RotaryEmbeddingCat`
  (in_pixels=False). Pair i < d_h / 4 turns by x * b_i, pair d_h / 4 + i by y * b_i ('xy'; 'ij' the other way), b_i =
  temperature^(-i / (d_h / 4)), x = (w + offset) / W' * ref_w and y = (h + offset) / H' * ref_h of patch (h, w)."""
  bands_n = spec.embed_dim // spec.num_heads // 4
  bands = (1.0 / (spec.rope_temperature ** (np.arange(bands_n, dtype=np.float32) / np.float32(bands_n)))).astype(
      np.float32)
  (gh, gw), ref = spec.grid, spec.ref_grid
  ys = np.arange(gh, dtype=np.float32) + np.float32(spec.rope_offset)
  xs = np.arange(gw, dtype=np.float32) + np.float32(spec.rope_offset)
  if ref is not None:
    ys, xs = ys / np.float32(gh) * np.float32(ref[0]), xs / np.float32(gw) * np.float32(ref[1])
  y, x = np.meshgrid(ys, xs, indexing='ij')
  first, second = (x, y) if spec.rope_xy else (y, x)
  angles = np.concatenate([first.reshape(-1, 1) * bands, second.reshape(-1, 1) * bands], axis=1).astype(np.float32)
  cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
  if spec.class_token:
    cos, sin = np.concatenate([np.ones_like(cos[:1]), cos]), np.concatenate([np.zeros_like(sin[:1]), sin])
  return cos, sin


class PeMlp(nn.Module):
  """x (..., D) -> fc2(gelu(fc1(x))) (..., D), both with bias (timm's `Mlp`)."""
  hidden: int

  @nn.compact
  def __call__(self, x):
    y = nn.gelu(nn.Dense(self.hidden, name='fc1')(x), approximate=False)
    return nn.Dense(x.shape[-1], name='fc2')(y)


class PeFrameAttention(nn.Module):
  """x (N, L, D) -> self-attention (N, L, D): fused `qkv`, q and k rotated by (cos, sin) (L, d_h / 2), `proj`."""
  num_heads: int

  @nn.compact
  def __call__(self, x, cos, sin):
    n, l, d = x.shape
    qkv = nn.Dense(3 * d, name='qkv')(x).reshape(n, l, 3, self.num_heads, d // self.num_heads)
    q, k, v = rotate_pairs(qkv[:, :, 0], cos, sin), rotate_pairs(qkv[:, :, 1], cos, sin), qkv[:, :, 2]
    return nn.Dense(d, name='proj')(kernels.einsum_attention(q, k, v).reshape(n, l, d))


class PeFrameBlock(nn.Module):
  """One pre-LayerNorm block (N, L, D) -> (N, L, D) (timm's `EvaBlock` with `AttentionRope`)."""
  spec: PeFrameSpec

  @nn.compact
  def __call__(self, x, cos, sin):
    s = self.spec
    y = PeFrameAttention(s.num_heads, name='attn')(nn.LayerNorm(s.norm_eps, name='norm1')(x), cos, sin)
    if s.layer_scale:
      y = y * self.param('gamma_1', nn.initializers.ones, (s.embed_dim,))
    x = x + y
    y = PeMlp(s.mlp_dim, name='mlp')(nn.LayerNorm(s.norm_eps, name='norm2')(x))
    if s.layer_scale:
      y = y * self.param('gamma_2', nn.initializers.ones, (s.embed_dim,))
    return x + y


class PeAttentionPool(nn.Module):
  """x (N, L, D) -> (N, D): one learned query attending over the L tokens, then x + mlp(norm(x)) (timm's
  `AttentionPoolLatent`, latent_len 1, pool 'token')."""
  num_heads: int
  mlp_dim: int
  norm_eps: float

  @nn.compact
  def __call__(self, x):
    n, l, d = x.shape
    h = self.num_heads
    latent = self.param('latent', nn.initializers.normal(d ** -0.5), (1, 1, d))
    q = nn.Dense(d, name='q')(jnp.broadcast_to(latent, (n, 1, d))).reshape(n, 1, h, d // h)
    kv = nn.Dense(2 * d, name='kv')(x).reshape(n, l, 2, h, d // h)
    y = nn.Dense(d, name='proj')(kernels.einsum_attention(q, kv[:, :, 0], kv[:, :, 1]).reshape(n, 1, d))
    y = y + PeMlp(self.mlp_dim, name='mlp')(nn.LayerNorm(self.norm_eps, name='norm')(y))
    return y[:, 0]


class PeFrameModel(nn.Module):
  """Images (N, H, W, 3) -> (N, C) frame vectors: see the module docstring."""
  spec: PeFrameSpec

  @nn.compact
  def __call__(self, images):
    s = self.spec
    p = s.patch_size
    x = nn.Conv(s.embed_dim, (p, p), strides=(p, p), padding='VALID', use_bias=False, name='patch_embed')(
        images.astype(jnp.float32))
    x = x.reshape(x.shape[0], -1, s.embed_dim)
    if s.class_token:
      cls = self.param('cls_token', nn.initializers.normal(0.02), (1, 1, s.embed_dim))
      x = jnp.concatenate([jnp.broadcast_to(cls, (x.shape[0], 1, s.embed_dim)), x], axis=1)
    x = x + self.param('pos_embed', nn.initializers.normal(0.02), (1, x.shape[1], s.embed_dim))
    x = nn.LayerNorm(s.norm_eps, name='norm_pre')(x)
    cos, sin = (jnp.asarray(a) for a in axial_rope_tables(s))
    for i in range(s.depth):
      x = PeFrameBlock(s, name=f'block_{i}')(x, cos, sin)
    x = nn.LayerNorm(s.norm_eps, name='norm')(x)
    x = PeAttentionPool(s.pool_heads, s.pool_mlp_dim, s.norm_eps, name='attn_pool')(x)
    return nn.Dense(s.num_classes, name='head')(x)
