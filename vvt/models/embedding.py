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
  """ViViT eq. 8 tokeniser: non-overlapping t x h x w tubelets linearly projected to D (kernel (t,h,w,C,D)).

  With `kept` (B, K) (token indices into the flattened n_t x N grid, vvt/models/masking.py) only those tubelets
  are gathered and projected, (B, K, D): a masked encoder pays for its kept tokens only (the same kernel: the
  convolution of one tubelet is its dot product with the kernel, which XLA compiles as a matmul)."""
  hidden_size: int
  tubelet: tuple[int, int, int]
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, video, kept=None):
    conv = nn.Conv(self.hidden_size, kernel_size=self.tubelet, strides=self.tubelet, padding='VALID',
                   dtype=self.dtype, param_dtype=self.param_dtype, name='conv')
    if kept is not None:
      b, k = kept.shape
      picked = jnp.take_along_axis(tubelets(video, self.tubelet), kept.astype(jnp.int32)[:, :, None], axis=1)
      return conv(picked.reshape(b * k, *self.tubelet, video.shape[-1]).astype(self.dtype)).reshape(b, k, -1)
    x = conv(video.astype(self.dtype))
    b, t, h, w, d = x.shape
    return x.reshape(b, t, h * w, d)  # (B, n_t, n_h * n_w, D)


def tubelets(video, tubelet):
  """Pixels (B, T, H, W, C) -> tubelets (B, n_t * N, t * h * w * C): tokens in (t, h, w) order (the flattened
  token grid), each tubelet's values (t, h, w, C) row-major."""
  b, tt, hh, ww, c = video.shape
  t, h, w = tubelet
  x = video.reshape(b, tt // t, t, hh // h, h, ww // w, w, c).transpose(0, 1, 3, 5, 2, 4, 6, 7)
  return x.reshape(b, (tt // t) * (hh // h) * (ww // w), t * h * w * c)


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


def cubic_weights(in_size: int, out_size: int, scale: float | None = None, a: float = -0.75) -> np.ndarray:
  """(out_size, in_size) float64 weights of a 1D cubic resize, torch's `interpolate(mode='bicubic',
  align_corners=False)` along one axis (Keys' kernel with A = -0.75; taps past the border clamped to it): output i
  reads source position (i + 0.5) * s - 0.5, s = in / out, or 1 / scale where torch is given a scale_factor. Not
  `jax.image.resize`'s cubic (A = -0.5, other border handling). Equal sizes (no scale) give the identity."""
  ratio = in_size / out_size if scale is None else 1.0 / scale
  src = ratio * (np.arange(out_size) + 0.5) - 0.5
  base = np.floor(src)
  t = src - base
  near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # |x| <= 1
  far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # 1 < |x| < 2
  taps = np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], axis=-1)  # offsets -1, 0, 1, 2 from floor(src)
  w = np.zeros((out_size, in_size), np.float64)
  idx = np.clip(base.astype(np.int64)[:, None] + np.arange(-1, 3)[None], 0, in_size - 1)
  for k in range(4):
    np.add.at(w, (np.arange(out_size), idx[:, k]), taps[:, k])
  return w


def nearest_weights(in_size: int, out_size: int) -> np.ndarray:
  """(out_size, in_size) 0/1 weights of torch's `interpolate(mode='nearest')` along one axis: output i reads row
  floor(i * in / out) (torch's float32 arithmetic, clamped to in - 1)."""
  if in_size == out_size:
    rows = np.arange(out_size)
  elif out_size == 2 * in_size:
    rows = np.arange(out_size) // 2
  else:
    scale = np.float32(in_size) / np.float32(out_size)
    rows = np.minimum(np.floor(np.arange(out_size, dtype=np.float32) * scale).astype(np.int64), in_size - 1)
  w = np.zeros((out_size, in_size), np.float64)
  w[np.arange(out_size), rows] = 1.0
  return w


RESIZE_KERNELS = {'antialiased_bilinear': resize_weights, 'bicubic': cubic_weights, 'nearest': nearest_weights}


def resize_table(table, grid, kernel: str = 'antialiased_bilinear'):
  """A learned position table (t0, h0, w0, D) (or any (..., D) with one size per leading axis) resized to `grid`:
  the 1D weights of `kernel` (RESIZE_KERNELS) along each axis whose size changes; an axis of unchanged size is left
  as it is. A jax array is resized in its dtype at full matmul precision (at run time: VideoPrism's tables); a
  numpy array in float64 and returned as float32 (once, when weights are converted or loaded)."""
  weights = RESIZE_KERNELS[kernel]
  is_numpy = isinstance(table, np.ndarray)
  if is_numpy:
    table = table.astype(np.float64)
  for axis, size in enumerate(grid):
    if table.shape[axis] != size:
      if is_numpy:
        table = np.moveaxis(np.tensordot(weights(table.shape[axis], size).astype(np.float64), table,
                                         axes=((1,), (axis,))), 0, axis)
      else:
        w = jnp.asarray(weights(table.shape[axis], size), table.dtype)
        table = jnp.moveaxis(jnp.tensordot(w, table, axes=((1,), (axis,)), precision='highest'), 0, axis)
  return table.astype(np.float32) if is_numpy else table
