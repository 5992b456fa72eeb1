"""ModernBERT (Warner et al., 2024), the text tower of Perception Encoder video (transformers 5.23
`ModernBertModel`, `transformers/models/modernbert/modeling_modernbert.py`), as a Flax module.

    module = ModernBertEncoder(spec)                                   # spec: a ModernBertSpec
    hidden = module.apply(variables, input_ids, attention_mask)        # (B, L) ids, (B, L) 0/1 -> (B, L, D)

  embeddings  `tok_embeddings` (V, D), then LayerNorm (`embeddings_norm`; bias only where spec.norm_bias)
  layers      x + attn(attn_norm(x)) (layer 0 has no attn_norm), then x + mlp(mlp_norm(x)); attention from one
              fused `Wqkv` (D -> 3D: [q | k | v], head h the features [h d_h, (h + 1) d_h) of each), RoPE by
              rotating halves (channel j with j + d_h / 2) with the layer's theta, scale d_h^-0.5, `Wo`;
              a 'sliding' layer's queries see only keys within spec.sliding_window positions (|q - k| <= w),
              a global layer's see all; padding keys (attention_mask 0) are never seen
  mlp         Wi (D -> 2 I) split into [input | gate], Wo(act(input) * gate) (GeGLU with act GELU)
  output      `final_norm` of every position
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vvt.models import kernels
from vvt.models.pe_video_config import ModernBertSpec  # noqa: F401  (the spec of this module's encoder)

ACTIVATIONS = {'gelu': lambda x: nn.gelu(x, approximate=False), 'silu': nn.silu,
               'gelu_pytorch_tanh': lambda x: nn.gelu(x, approximate=True)}



def rope_tables(length: int, head_dim: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
  """(cos, sin), each float32 (length, head_dim): angle p * theta^(-2i / d_h) at channels i and i + d_h / 2."""
  inv_freq = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim))
  angles = np.arange(length, dtype=np.float32)[:, None] * inv_freq.astype(np.float32)[None, :]
  angles = np.concatenate([angles, angles], axis=1)
  return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def rotate_halves(x, cos, sin):
  """x (B, L, H, d_h) -> x cos + [-x_second_half, x_first_half] sin; cos, sin (L, d_h)."""
  half = x.shape[-1] // 2
  rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
  return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def attention_mask_of(attention_mask, length: int, window: int | None):
  """The keys each query sees, bool (B | 1, 1, L, L): not padding, and within `window` positions (None: all)."""
  keys = jnp.ones((1, 1, 1, length), bool) if attention_mask is None else (attention_mask != 0)[:, None, None, :]
  if window is None:
    return keys
  pos = np.arange(length)
  near = np.abs(pos[:, None] - pos[None, :]) <= window
  return keys & jnp.asarray(near)[None, None]


class ModernBertLayer(nn.Module):
  """One layer (B, L, D) -> (B, L, D): module docstring. `first`: no attn_norm (layer 0)."""
  spec: ModernBertSpec
  first: bool = False

  @nn.compact
  def __call__(self, x, cos, sin, mask):
    s = self.spec
    b, l, d = x.shape
    h = s.num_heads
    norm = lambda name: nn.LayerNorm(epsilon=s.norm_eps, use_bias=s.norm_bias, name=name)
    y = x if self.first else norm('attn_norm')(x)
    qkv = nn.Dense(3 * d, use_bias=s.attention_bias, name='Wqkv')(y).reshape(b, l, 3, h, d // h)
    q, k, v = rotate_halves(qkv[:, :, 0], cos, sin), rotate_halves(qkv[:, :, 1], cos, sin), qkv[:, :, 2]
    y = kernels.einsum_attention(q, k, v, mask=mask).reshape(b, l, d)
    x = x + nn.Dense(d, use_bias=s.attention_bias, name='attn_Wo')(y)
    hidden, gate = jnp.split(nn.Dense(2 * s.intermediate_size, use_bias=s.mlp_bias, name='Wi')(norm('mlp_norm')(x)),
                             2, axis=-1)
    return x + nn.Dense(d, use_bias=s.mlp_bias, name='mlp_Wo')(ACTIVATIONS[s.hidden_activation](hidden) * gate)


class ModernBertEncoder(nn.Module):
  """input_ids (B, L) int, attention_mask (B, L) 0/1 or None -> (B, L, D) float32 final-normed hidden states."""
  spec: ModernBertSpec

  @nn.compact
  def __call__(self, input_ids, attention_mask=None):
    s = self.spec
    length = input_ids.shape[1]
    head_dim = s.hidden_size // s.num_heads
    x = nn.Embed(s.vocab_size, s.hidden_size, name='tok_embeddings')(input_ids)
    x = nn.LayerNorm(epsilon=s.norm_eps, use_bias=s.norm_bias, name='embeddings_norm')(x)
    for i, sliding in enumerate(s.sliding):
      theta = s.local_theta if sliding else s.global_theta
      cos, sin = (jnp.asarray(a) for a in rope_tables(length, head_dim, theta))
      mask = attention_mask_of(attention_mask, length, s.sliding_window if sliding else None)
      x = ModernBertLayer(s, first=i == 0, name=f'layer_{i}')(x, cos, sin, mask)
    return nn.LayerNorm(epsilon=s.norm_eps, use_bias=s.norm_bias, name='final_norm')(x)
