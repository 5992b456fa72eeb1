"""3D rotary position embedding (RoPE) of V-JEPA 2 (Assran et al., 2025): queries and keys rotated by the (t, h, w)
position of their token inside attention, no table (`model.positional_embedding='rope'`).

Each head's d_h channels are split into three equal parts of s = 2 * floor(floor(d_h / 3) / 2) channels, rotated
by the token's temporal index t, row h and column w in that order; the last d_h - 3 s channels are not rotated.
Within one part of s channels, for position p (t, h or w):

  omega_i = 10000^(-i / (s / 2)),  i = 0 .. s/2 - 1;   theta_j = p * omega_(j mod s/2),  j = 0 .. s - 1
  y_j = x_j cos(theta_j) + r_j sin(theta_j),   r_(2i) = -x_(2i+1),  r_(2i+1) = x_(2i)

that is, the channel pairs (2i, 2i+1) are rotated, but the angles are the s/2 frequencies tiled twice, not repeated
per pair: the released V-JEPA 2 code (`rotate_queries_or_keys`, a comment there calls it a bug kept for the
pretrained weights) and transformers' `VJEPA2RopeAttention` both compute this, and the weights were trained with it.
Positions are the token's own grid coordinates, so any clip length and frame size run without interpolation (the
released code passes the clip's own grid; transformers 5.23 derives h and w from the config's crop_size, which is
the same grid whenever the frames have the config's size).

This module imports no JAX at load: the tables are NumPy constants of the static grid.
"""
from __future__ import annotations

import functools

import numpy as np


def split(head_dim: int) -> int:
  """s: the channels of each of the t, h, w parts of a head (2 * floor(floor(d_h / 3) / 2))."""
  return 2 * ((head_dim // 3) // 2)


@functools.lru_cache(maxsize=64)
def tables(grid: tuple[int, int, int], head_dim: int) -> tuple[np.ndarray, np.ndarray]:
  """(cos, sin), each float32 (T * N, d_h) for the tokens of `grid` (n_t, n_h, n_w) in (t, h, w) row-major order;
  the channels that are not rotated have cos 1 and sin 0."""
  nt, nh, nw = grid
  s = split(head_dim)
  t, h, w = np.meshgrid(np.arange(nt), np.arange(nh), np.arange(nw), indexing='ij')
  cos = np.ones((nt * nh * nw, head_dim), np.float32)
  sin = np.zeros((nt * nh * nw, head_dim), np.float32)
  if s == 0:
    return cos, sin
  omega = np.arange(s // 2, dtype=np.float32) / np.float32(s / 2.0)
  omega = (np.float32(1.0) / np.float32(10000.0) ** omega).astype(np.float32)
  for part, pos in enumerate((t, h, w)):
    theta = pos.reshape(-1, 1).astype(np.float32) * omega[None, :]  # (M, s/2)
    theta = np.concatenate([theta, theta], axis=1)  # the frequencies tiled twice (see the module docstring)
    cos[:, part * s:(part + 1) * s] = np.cos(theta)
    sin[:, part * s:(part + 1) * s] = np.sin(theta)
  return cos, sin


def rotate(x, grid, xp=None, positions=None):
  """x (B, T, N, H, d_h) queries or keys of the tokens of `grid` (N = n_h * n_w) -> x rotated (same shape, dtype).

  xp: the array module (default jax.numpy; numpy for NumPy arrays, as the attention maps use it). positions
  (B, T, N) int: x holds only some tokens of `grid` (a masked encoder), at these indices of its flattened
  (t, h, w)."""
  if xp is None:
    import jax.numpy as xp
  b, t, n, h, d = x.shape
  if d % 2:
    raise ValueError(f'rope: head size {d} must be even')
  cos, sin = tables(tuple(int(g) for g in grid), d)
  if positions is not None:
    cos, sin = (xp.asarray(a)[positions][:, :, :, None] for a in (cos, sin))  # (B, T, N, 1, d_h)
  elif (t, n) != (grid[0], grid[1] * grid[2]):
    raise ValueError(f'rope: tokens (T, N) = {(t, n)} are not the grid {tuple(grid)}')
  else:
    cos = xp.asarray(cos.reshape(1, t, n, 1, d))
    sin = xp.asarray(sin.reshape(1, t, n, 1, d))
  pairs = x.reshape(b, t, n, h, d // 2, 2)
  rotated = xp.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)
  return (x * cos.astype(x.dtype) + rotated * sin.astype(x.dtype)).astype(x.dtype)
