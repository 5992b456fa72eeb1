"""Tokenisation and positional embeddings (ViViT sec. 3.2, TimeSformer sec. 3, X-ViT sec. 3).

Uniform frame sampling is the tubelet embedding with t = 1: one 3D convolution with kernel = stride =
(t, h, w) maps a video (B, T, H, W, C) to tokens (B, T/t, (H/h) * (W/w), D) in (t, h, w) row-major order.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np


class TubeletEmbedding(nn.Module):
  """ViViT eq. 8 tokeniser: non-overlapping t x h x w tubelets linearly projected to D (kernel (t,h,w,C,D))."""
  hidden_size: int
  tubelet: tuple[int, int, int]
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, video):
    x = nn.Conv(self.hidden_size, kernel_size=self.tubelet, strides=self.tubelet, padding='VALID',
                dtype=self.dtype, param_dtype=self.param_dtype, name='conv')(video.astype(self.dtype))
    b, t, h, w, d = x.shape
    return x.reshape(b, t, h * w, d)  # (B, n_t, n_h * n_w, D)


def sinusoidal_table(length: int, dim: int) -> np.ndarray:
  """Fixed 1D sine-cosine table (Vaswani et al.) of shape (1, length, dim)."""
  pos = np.arange(length)[:, None]
  freq = np.exp(-np.log(10000.0) * np.arange(0, dim, 2) / dim)
  table = np.zeros((length, dim), np.float32)
  table[:, 0::2] = np.sin(pos * freq)
  table[:, 1::2] = np.cos(pos * freq)[:, :dim // 2]
  return table[None]


class PositionalEmbedding(nn.Module):
  """Adds positional information to tokens x (B, T, N, D) and an optional global class token (B, 1, D).

  kind:
    joint       one learned table over all tokens (ViViT eq. 1): (1, [1 +] T*N, D), row 0 for a global cls.
    separable   learned space (1, [1 +] N, D) + time (1, R, D) tables (TimeSformer, X-ViT); the global cls gets
                space row 0 and no time embedding; tokens of a frame (a per-frame cls included) get time row
                t mod R. R = time_rows (a divisor of T; None: R = T). R < T is the official X-ViT's: its backbone's
                temp_embed always has 8 rows and is added to frames in groups of 8, so at T = 16 frame t gets row
                t mod 8 (slowfast/models/transformers/vit.py VisionTransformer.forward_features); no
                interpolation.
    spatial     the space table only (TimeSformer space-only).
    sinusoidal  fixed sine-cosine table over the flattened token index (cls = row 0).
    none        nothing.
  """
  kind: str
  init_std: float = 0.02
  time_rows: int | None = None
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, cls):
    b, t, n, d = x.shape
    extra = 0 if cls is None else 1
    init = nn.initializers.normal(stddev=self.init_std)
    if self.kind in ('joint', 'sinusoidal'):
      rows = extra + t * n
      if self.kind == 'joint':
        table = self.param('pos_embedding', init, (1, rows, d), self.param_dtype)
      else:
        table = jnp.asarray(sinusoidal_table(rows, d))
      table = table.astype(x.dtype)
      x = x + table[:, extra:].reshape(1, t, n, d)
      if cls is not None:
        cls = cls + table[:, :1]
    elif self.kind in ('separable', 'spatial'):
      space = self.param('pos_embedding', init, (1, extra + n, d), self.param_dtype).astype(x.dtype)
      x = x + space[:, None, extra:]
      if cls is not None:
        cls = cls + space[:, :1]
      if self.kind == 'separable':
        rows = self.time_rows or t
        if t % rows:
          raise ValueError(f'time embedding of {rows} rows does not divide the {t} temporal indices')
        time = self.param('time_embedding', nn.initializers.zeros, (1, rows, d), self.param_dtype).astype(x.dtype)
        x = x + jnp.tile(time, (1, t // rows, 1))[:, :, None]  # temporal index t gets row t mod rows
    elif self.kind != 'none':
      raise ValueError(f'unknown positional embedding {self.kind!r}')
    return x, cls
