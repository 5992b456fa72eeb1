"""Tokenisation and positional embeddings (ViViT sec. 3.2, TimeSformer sec. 3, X-ViT sec. 3).

Uniform frame sampling is the tubelet embedding with t = 1: one 3D convolution with kernel = stride =
(t, h, w) maps a video (B, T, H, W, C) to tokens (B, T/t, (H/h) * (W/w), D) in (t, h, w) row-major order.
"""
from __future__ import annotations

import math
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
    rope        nothing here: V-JEPA 2's 3D RoPE rotates queries and keys inside attention (vvt/models/rope.py).
    none        nothing.
  `table_grid` (joint, no class token): the (t, h, w) token grid the learned table was trained at, when it is not
  the grid of x (`grid`): the table keeps its trained shape and is resized to `grid` at run time by `resize_table`
  (antialiased bilinear, as VideoPrism / transformers' `interpolate_pos_encoding`). None: the table has x's grid.
  """
  kind: str
  init_std: float = 0.02
  time_rows: int | None = None
  param_dtype: Any = jnp.float32
  table_grid: tuple[int, int, int] | None = None
  grid: tuple[int, int, int] | None = None  # the (t, h, w) grid of x's tokens, needed with table_grid

  @nn.compact
  def __call__(self, x, cls):
    b, t, n, d = x.shape
    extra = 0 if cls is None else 1
    init = nn.initializers.normal(stddev=self.init_std)
    resized = self.kind == 'joint' and self.table_grid is not None and tuple(self.table_grid) != tuple(self.grid)
    if resized:
      if cls is not None or math.prod(self.grid) != t * n:
        raise ValueError(f'a resized position table needs tokens of the grid {self.grid} and no class token')
      table = self.param('pos_embedding', init, (1, math.prod(self.table_grid), d), self.param_dtype)
      table = resize_table(table.reshape(*self.table_grid, d), self.grid).astype(x.dtype)
      x = x + table.reshape(1, t, n, d)
    elif self.kind in ('joint', 'sinusoidal'):
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
    elif self.kind not in ('none', 'rope'):
      raise ValueError(f'unknown positional embedding {self.kind!r}')
    return x, cls


def resize_weights(in_size: int, out_size: int) -> np.ndarray:
  """(out_size, in_size) float32 weights of a 1D antialiased linear resize, torch's
  `interpolate(mode='bilinear', antialias=True, align_corners=False)` along one axis: output i is centred at
  (i + 0.5) * in / out; the triangle filter is widened by in / out when shrinking; weights normalised per row."""
  scale = in_size / out_size
  support = scale if scale >= 1.0 else 1.0
  inv = 1.0 / scale if scale >= 1.0 else 1.0
  w = np.zeros((out_size, in_size), np.float64)
  for i in range(out_size):
    center = scale * (i + 0.5)
    lo = max(int(center - support + 0.5), 0)
    hi = min(int(center + support + 0.5), in_size)
    for j in range(lo, hi):
      w[i, j] = max(0.0, 1.0 - abs((j - center + 0.5) * inv))
    total = w[i].sum()
    if total:
      w[i] /= total
  return w.astype(np.float32)


def resize_table(table, grid):
  """A learned position table (t0, h0, w0, D) resized to grid (t, h, w): `resize_weights` along each axis whose
  size changes, in the table's dtype at full matmul precision (an axis of unchanged size is left as it is)."""
  for axis, size in enumerate(grid):
    if table.shape[axis] != size:
      w = jnp.asarray(resize_weights(table.shape[axis], size), table.dtype)
      table = jnp.moveaxis(jnp.tensordot(w, table, axes=((1,), (axis,)), precision='highest'), 0, axis)
  return table
