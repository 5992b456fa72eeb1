"""The space-time neighbourhoods of attention, as reshapings of tokens; X-ViT's temporal shift.

Every scheme of ViViT, TimeSformer and X-ViT is the same scaled dot-product attention applied to a different
grouping of the video tokens:

  tokens x: (B, T, N, ...) with N = n_h * n_w patch tokens per temporal index (row-major h, w)
  group(x, grouping, grid) -> (B * G, L, ...)   G groups of L tokens that attend to each other
  ungroup(y, grouping, grid, B, T, N) -> (B, T, N, ...)

Groupings (TimeSformer Fig. 2 / ViViT Figs. 1, 4, 5), one row of `GROUPINGS` each:
  joint   one group of all T*N tokens                        (ViViT Model 1, TimeSformer 'joint')
  space   one group per temporal index: N tokens             (TimeSformer 'space', X-ViT)
  time    one group per spatial position: T tokens           (TimeSformer / ViViT temporal attention)
  width   one group per (t, row): n_w tokens                 (TimeSformer axial)
  height  one group per (t, column): n_h tokens              (TimeSformer axial)
  local   one group per spatial quadrant: T x n_h/2 x n_w/2  (TimeSformer sparse local)
  global  one group per (t, h, w) parity: stride 2 in each   (TimeSformer sparse global)

A stage of a block (the `{stage}_attention` module) attends within one grouping, or splits its heads evenly
among several (`HEAD_SPLITS`: ViViT Model 4, `factorised_dot_product`: the first half of the heads in `space`,
the second in `time`, over the same projected Q, K, V).

A global class token (B, 1, D) joins every group of a grouping whose `class_token` is True (all but `time`) and
its outputs are averaged over the groups (TimeSformer: the class token is excluded from temporal attention,
replicated for each frame's spatial attention and averaged). A per-frame class token is simply part of the
frame's N tokens.

This module imports no JAX at load (the config and the scheme table read its tables): `group` / `ungroup` use
the arrays' own reshape / transpose (JAX or NumPy); `temporal_shift` imports jax.numpy when called.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable


@dataclasses.dataclass(frozen=True)
class Grouping:
  """One neighbourhood of tokens: how it splits the (T, N) token axes (`split(t, n, nh, nw)` -> (split shape,
  group axes, sequence axes), axes counted from 1 after the batch axis) and what it asks of the grid."""
  name: str
  split: Callable[[int, int, int, int], tuple]  # (t, n, nh, nw) -> (shape, group axes, sequence axes)
  class_token: bool = True  # a global class token joins every group
  patch_grid: bool = False  # needs N = n_h * n_w patch tokens (no per-frame class token)
  grid_multiple: tuple[int, int, int] = (1, 1, 1)  # (t, h, w) must be multiples of these


GROUPINGS = {g.name: g for g in (
    Grouping('joint', lambda t, n, nh, nw: ((t, n), (), (1, 2))),
    Grouping('space', lambda t, n, nh, nw: ((t, n), (1,), (2,))),
    Grouping('time', lambda t, n, nh, nw: ((t, n), (2,), (1,)), class_token=False),
    Grouping('width', lambda t, n, nh, nw: ((t, nh, nw), (1, 2), (3,)), patch_grid=True),
    Grouping('height', lambda t, n, nh, nw: ((t, nh, nw), (1, 3), (2,)), patch_grid=True),
    # (T, 2, n_h/2, 2, n_w/2): one group per quadrant.
    Grouping('local', lambda t, n, nh, nw: ((t, 2, nh // 2, 2, nw // 2), (2, 4), (1, 3, 5)), patch_grid=True,
             grid_multiple=(1, 2, 2)),
    # (T/2, 2, n_h/2, 2, n_w/2, 2): one group per parity, stride 2.
    Grouping('global', lambda t, n, nh, nw: ((t // 2, 2, nh // 2, 2, nw // 2, 2), (2, 4, 6), (1, 3, 5)),
             patch_grid=True, grid_multiple=(2, 2, 2)),
)}
STAGES = tuple(GROUPINGS)

# Stages whose heads are split evenly among several groupings, in head order.
HEAD_SPLITS = {'factorised_dot_product': ('space', 'time')}  # ViViT Model 4


def head_groupings(stage: str) -> tuple[str, ...]:
  """The groupings among which a stage splits its heads evenly (one grouping: all heads in it)."""
  if stage in HEAD_SPLITS:
    return HEAD_SPLITS[stage]
  if stage in GROUPINGS:
    return (stage,)
  raise ValueError(f'unknown attention stage {stage!r}; expected one of {STAGES + tuple(HEAD_SPLITS)}')


def head_slices(stage: str, num_heads: int) -> tuple[tuple[str, slice], ...]:
  """((grouping, heads), ...) of a stage: the heads [i h/k, (i+1) h/k) attend within its i-th grouping."""
  names = head_groupings(stage)
  per = num_heads // len(names)
  return tuple((name, slice(i * per, (i + 1) * per)) for i, name in enumerate(names))


def joins_class_token(grouping: str) -> bool:
  """Whether a global class token takes part in every group of `grouping`."""
  return GROUPINGS[grouping].class_token


@functools.lru_cache(maxsize=None)
def _layout(grouping: str, t: int, n: int, nh: int, nw: int):
  """How `grouping` splits the (T, N) token axes: (split shape, group axes, sequence axes)."""
  if grouping not in GROUPINGS:
    raise ValueError(f'unknown attention stage {grouping!r}; expected one of {STAGES}')
  spec = GROUPINGS[grouping]
  if spec.patch_grid and n != nh * nw:
    raise ValueError(f'attention stage {grouping!r} needs a pure patch grid, got {n} tokens for {nh}x{nw}')
  return spec.split(t, n, nh, nw)


def group(x, stage: str, grid):
  """(B, T, N, *F) -> (B * G, L, *F): the groups of tokens that attend to each other in grouping `stage`."""
  b, t, n = x.shape[:3]
  feat = x.shape[3:]
  split, gaxes, saxes = _layout(stage, t, n, grid[1], grid[2])
  x = x.reshape(b, *split, *feat)
  nf = len(feat)
  faxes = tuple(range(len(split) + 1, len(split) + 1 + nf))
  x = x.transpose(0, *gaxes, *saxes, *faxes)
  seq = math.prod(split[a - 1] for a in saxes)
  return x.reshape(-1, seq, *feat)


def ungroup(y, stage: str, grid, batch: int, t: int, n: int):
  """Inverse of `group`: (B * G, L, *F) -> (B, T, N, *F)."""
  feat = y.shape[2:]
  split, gaxes, saxes = _layout(stage, t, n, grid[1], grid[2])
  perm = (0, *gaxes, *saxes)
  y = y.reshape(batch, *(split[a - 1] for a in perm[1:]), *feat)
  inverse = [perm.index(i) for i in range(len(perm))]
  nf = len(feat)
  y = y.transpose(*inverse, *range(len(perm), len(perm) + nf))
  return y.reshape(batch, t, n, *feat)


def temporal_shift(x, *, window: int, shift_div: int, num_segments: int | None = None):
  """X-ViT eq. 9: channels of frame t taken from frames t +- i (i = 1..window), zeros at the clip ends.

  x: (B, T, N, C) with C the flat channel index (head * d_h + j). With fold = C // shift_div, for i = 1..window
  channels [(2i-2) fold, (2i-1) fold) come from frame t+i and [(2i-1) fold, 2i fold) from frame t-i; the rest
  stay at frame t. num_segments (a divisor of T; None = T): the frames are cut into T / num_segments
  consecutive segments, each shifted as a clip of its own: (B, T, ...) -> (B * T/num_segments, num_segments, ...).
  """
  import jax.numpy as jnp
  b, t = x.shape[:2]
  if num_segments is not None and num_segments != t:
    if t % num_segments:
      raise ValueError(f'temporal_shift: {t} temporal indices are not a multiple of num_segments={num_segments}')
    y = temporal_shift(x.reshape(b * (t // num_segments), num_segments, *x.shape[2:]), window=window,
                       shift_div=shift_div)
    return y.reshape(x.shape)
  c = x.shape[-1]
  fold = c // shift_div
  parts = []
  for i in range(1, window + 1):
    nxt = x[..., (2 * i - 2) * fold:(2 * i - 1) * fold]
    prv = x[..., (2 * i - 1) * fold:2 * i * fold]
    zeros = jnp.zeros_like(nxt[:, :i])
    parts.append(jnp.concatenate([nxt[:, i:], zeros], axis=1))  # frame t sees t+i
    parts.append(jnp.concatenate([zeros, prv[:, :-i]], axis=1))  # frame t sees t-i
  parts.append(x[..., 2 * window * fold:])
  return jnp.concatenate(parts, axis=-1)
