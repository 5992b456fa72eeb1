"""Perception Encoder video's frame-level encoder: the transformer over one vector per frame that turns a frame
model's outputs into the video embedding (transformers 5.23 `PeVideoEncoder` after its `vision_model`, and
`PeVideoModel.video_head`; `transformers/models/pe_video/modeling_pe_video.py`).

    module = PeTemporalEncoder(spec)                           # spec: a PeTemporalSpec
    pooled = module.apply(variables, frame_features)           # (B, T, F) -> (B, D): the class token's output
    tokens = module.apply(variables, frame_features, method='tokens')  # (B, T + 1, D): every position's output
    embedding = PeVideoHead(E).apply(head_vars, pooled)               # (B, E): the video-text space

  frame_features  (B, T, F) the frame model's outputs (timm's PE core ViT: its attention-pooled, projected
                  frame vector, F = its num_classes), one per frame
  normalise       f / max(|f|, 1e-12) (torch's F.normalize), then `proj` (F -> D, no bias), `data_proj` (D -> D)
  class token     `class_embedding` (1, 1, D) first: T + 1 positions
  resnet block    x + conv(silu(gn(conv(silu(gn(x)))))) over time: GroupNorm of one group (over all channels and
                  positions, eps 1e-5), a Conv1d of width 3 ('same' padding, bias)
  layers          pre-RMSNorm blocks: attention with RMSNorm on each head's queries and keys, 1-D RoPE of the
                  position (0 = the class token), grouped key-value heads; a SwiGLU MLP
  output          RMSNorm, `output` (D -> D, no bias); the class token's row is the pooled output

No padding frames: every clip has its T frames (transformers' `padding_mask_videos` None).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from vvt.models import kernels
from vvt.models.pe_video_config import PeTemporalSpec  # noqa: F401  (the spec of this module's encoder)

NORMALIZE_EPS = 1e-12  # torch.nn.functional.normalize
GROUP_NORM_EPS = 1e-5  # torch.nn.GroupNorm's default
HEAD_NORM_EPS = 1e-6  # PeVideoContrastiveHead's LayerNorm
ACTIVATIONS = {'silu': nn.silu, 'gelu': lambda x: nn.gelu(x, approximate=False)}



def rope_tables(length: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
  """(cos, sin), each float32 (length, head_dim / 2): angle p * theta^(-2i / head_dim) of position p, pair i."""
  inv_freq = (1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim)))
  angles = np.arange(length, dtype=np.float32)[:, None] * inv_freq.astype(np.float32)[None, :]
  return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate_pairs(x, cos, sin):
  """x (B, L, H, d_h) -> x with each channel pair (2i, 2i + 1) of position p rotated by angle (p, i):
  (x_2i cos - x_2i+1 sin, x_2i sin + x_2i+1 cos). cos, sin (L, d_h / 2)."""
  b, l, h, d = x.shape
  pairs = x.reshape(b, l, h, d // 2, 2)
  c, s = cos[None, :, None, :], sin[None, :, None, :]
  first = pairs[..., 0] * c - pairs[..., 1] * s
  second = pairs[..., 0] * s + pairs[..., 1] * c
  return jnp.stack([first, second], axis=-1).reshape(x.shape)


class RMSNorm(nn.Module):
  """x (..., D) -> weight * x / sqrt(mean(x^2) + eps), in float32 (`weight` initialised to 1)."""
  epsilon: float = 1e-5

  @nn.compact
  def __call__(self, x):
    weight = self.param('weight', nn.initializers.ones, (x.shape[-1],), jnp.float32)
    x = x.astype(jnp.float32)
    return weight * (x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.epsilon))


class ConvBlock1d(nn.Module):
  """x (B, L, D) -> conv(silu(groupnorm(x))): GroupNorm of one group over (L, D), then a width-3 Conv1d."""

  @nn.compact
  def __call__(self, x):
    d = x.shape[-1]
    mean = jnp.mean(x, axis=(1, 2), keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=(1, 2), keepdims=True)
    y = (x - mean) / jnp.sqrt(var + GROUP_NORM_EPS)
    y = y * self.param('norm_scale', nn.initializers.ones, (d,)) + self.param('norm_bias', nn.initializers.zeros, (d,))
    return nn.Conv(d, kernel_size=(3,), padding='SAME', name='conv')(nn.silu(y))


class PeTemporalAttention(nn.Module):
  """x (B, L, D) -> self-attention (B, L, D): q and k RMS-normalised per head, then rotated (`rotate_pairs`)."""
  spec: PeTemporalSpec

  @nn.compact
  def __call__(self, x, cos, sin):
    s = self.spec
    b, l, _ = x.shape
    dense = lambda n, name: nn.Dense(n * s.head_dim, use_bias=s.attention_bias, name=name)
    q = dense(s.num_heads, 'q_proj')(x).reshape(b, l, s.num_heads, s.head_dim)
    k = dense(s.num_kv_heads, 'k_proj')(x).reshape(b, l, s.num_kv_heads, s.head_dim)
    v = dense(s.num_kv_heads, 'v_proj')(x).reshape(b, l, s.num_kv_heads, s.head_dim)
    q = rotate_pairs(RMSNorm(s.rms_norm_eps, name='q_norm')(q), cos, sin)
    k = rotate_pairs(RMSNorm(s.rms_norm_eps, name='k_norm')(k), cos, sin)
    groups = s.num_heads // s.num_kv_heads
    k, v = jnp.repeat(k, groups, axis=2), jnp.repeat(v, groups, axis=2)
    y = kernels.einsum_attention(q, k, v)  # (B, L, H, d_h), scaled by d_h^-0.5
    return nn.Dense(x.shape[-1], use_bias=s.attention_bias, name='o_proj')(y.reshape(b, l, -1))


class PeTemporalLayer(nn.Module):
  """One pre-RMSNorm block (B, L, D) -> (B, L, D): attention, then the SwiGLU MLP down(act(gate(x)) * up(x))."""
  spec: PeTemporalSpec

  @nn.compact
  def __call__(self, x, cos, sin):
    s = self.spec
    x = x + PeTemporalAttention(s, name='self_attn')(RMSNorm(s.rms_norm_eps, name='input_layernorm')(x), cos, sin)
    y = RMSNorm(s.rms_norm_eps, name='post_attention_layernorm')(x)
    gate = nn.Dense(s.intermediate_size, use_bias=False, name='gate_proj')(y)
    up = nn.Dense(s.intermediate_size, use_bias=False, name='up_proj')(y)
    return x + nn.Dense(x.shape[-1], use_bias=False, name='down_proj')(ACTIVATIONS[s.hidden_act](gate) * up)


class PeTemporalEncoder(nn.Module):
  """(B, T, F) frame features -> (B, D) pooled (`__call__`) or (B, T + 1, D) tokens (`tokens`): module docstring."""
  spec: PeTemporalSpec

  @nn.compact
  def tokens(self, frame_features):
    s = self.spec
    f = frame_features.astype(jnp.float32)
    f = f / jnp.maximum(jnp.linalg.norm(f, axis=-1, keepdims=True), NORMALIZE_EPS)
    x = nn.Dense(s.hidden_size, use_bias=True, name='data_proj')(
        nn.Dense(s.hidden_size, use_bias=False, name='proj')(f))
    cls = self.param('class_embedding', nn.initializers.normal(s.hidden_size ** -0.5 * 0.02), (1, 1, s.hidden_size))
    x = jnp.concatenate([jnp.broadcast_to(cls, (x.shape[0], 1, s.hidden_size)), x], axis=1)
    x = x + ConvBlock1d(name='block2')(ConvBlock1d(name='block1')(x))
    cos, sin = (jnp.asarray(a) for a in rope_tables(x.shape[1], s.head_dim, s.rope_theta))
    for i in range(s.num_layers):
      x = PeTemporalLayer(s, name=f'layer_{i}')(x, cos, sin)
    return nn.Dense(s.hidden_size, use_bias=False, name='output')(RMSNorm(s.rms_norm_eps, name='norm')(x))

  def __call__(self, frame_features):
    return self.tokens(frame_features)[:, 0]


class PeVideoHead(nn.Module):
  """The contrastive head of either tower: x (B, D) -> proj(LayerNorm(x)) (B, E), LayerNorm eps 1e-6, no bias."""
  embed_dim: int

  @nn.compact
  def __call__(self, x):
    x = nn.LayerNorm(epsilon=HEAD_NORM_EPS, name='layer_norm')(x.astype(jnp.float32))
    return nn.Dense(self.embed_dim, use_bias=False, name='proj')(x)
