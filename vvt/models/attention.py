"""One attention primitive, and the space-time neighbourhoods of every scheme as reshapings of tokens.

Every scheme of ViViT, TimeSformer and X-ViT is the same scaled dot-product attention (ViViT eq. 7,
TimeSformer eq. 5, X-ViT eq. 10) applied to a different grouping of the video tokens:

  tokens x: (B, T, N, ...) with N = n_h * n_w patch tokens per temporal index (row-major h, w)
  group(x, stage) -> (B * G, L, ...)   G groups of L tokens that attend to each other
  ungroup(y, stage) -> (B, T, N, ...)

Stages (TimeSformer Fig. 2 / ViViT Fig. 4-6):
  joint   one group of all T*N tokens                        (ViViT Model 1, TimeSformer 'joint')
  space   one group per temporal index: N tokens             (TimeSformer 'space', X-ViT)
  time    one group per spatial position: T tokens           (TimeSformer / ViViT temporal attention)
  width   one group per (t, row): n_w tokens                 (TimeSformer axial)
  height  one group per (t, column): n_h tokens              (TimeSformer axial)
  local   one group per spatial quadrant: T x n_h/2 x n_w/2  (TimeSformer sparse local)
  global  one group per (t, h, w) parity: stride 2 in each   (TimeSformer sparse global)

Two schemes change more than the grouping, and are still this one primitive:
  factorised_dot_product  (ViViT Model 4) half of the heads attend within `space`, half within `time`,
                          over the same projected Q, K, V.
  space_time_mixing       (X-ViT eq. 9-10) K and V take 1/shift_div of their channels from frame t+i and
                          as many from t-i (i = 1..t_w, zeros at the clip ends) before `space` attention;
                          optionally every frame also attends to one summary token (spatial mean) per frame.
                          With `num_segments` < T the T frames are cut into consecutive segments of
                          num_segments frames that mix only among themselves (zeros at every segment end), as
                          the official code's TemporalShift(n_segment=NUM_SEGMENTS) does.

A class token (global, shape (B, 1, D)) is prepended to every group of a stage except `time`, and its
outputs are averaged over the groups (TimeSformer: the class token is excluded from temporal attention,
replicated for each frame's spatial attention and averaged). A per-frame class token is simply part of
the frame's N tokens.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

STAGES = ('joint', 'space', 'time', 'width', 'height', 'local', 'global')
_CLASS_TOKEN_STAGES = ('joint', 'space', 'width', 'height', 'local', 'global')


def dot_product_attention(q, k, v, *, dropout_rate=0.0, dropout_rng=None, deterministic=True):
  """Softmax(Q K^T / sqrt(d_h)) V, per head (ViViT eq. 7).

  q: (G, Lq, H, d_h); k, v: (G, Lk, H, d_h) -> (G, Lq, H, d_h). Softmax is computed in float32.
  """
  q = q / jnp.sqrt(q.shape[-1]).astype(q.dtype)
  logits = jnp.einsum('gqhd,gkhd->ghqk', q, k)
  weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(v.dtype)
  if not deterministic and dropout_rate > 0.0:
    keep = jax.random.bernoulli(dropout_rng, 1.0 - dropout_rate, weights.shape)
    weights = jnp.where(keep, weights / (1.0 - dropout_rate), 0).astype(v.dtype)
  return jnp.einsum('ghqk,gkhd->gqhd', weights, v)


@functools.lru_cache(maxsize=None)
def _layout(stage: str, t: int, n: int, nh: int, nw: int):
  """How `stage` splits the (T, N) token axes: (split shape, group axes, sequence axes)."""
  if stage == 'joint':
    return (t, n), (), (1, 2)
  if stage == 'space':
    return (t, n), (1,), (2,)
  if stage == 'time':
    return (t, n), (2,), (1,)
  if n != nh * nw:
    raise ValueError(f'attention stage {stage!r} needs a pure patch grid, got {n} tokens for {nh}x{nw}')
  if stage == 'width':
    return (t, nh, nw), (1, 2), (3,)
  if stage == 'height':
    return (t, nh, nw), (1, 3), (2,)
  if stage == 'local':  # (T, 2, n_h/2, 2, n_w/2): one group per quadrant.
    return (t, 2, nh // 2, 2, nw // 2), (2, 4), (1, 3, 5)
  if stage == 'global':  # (T/2, 2, n_h/2, 2, n_w/2, 2): one group per parity, stride 2.
    return (t // 2, 2, nh // 2, 2, nw // 2, 2), (2, 4, 6), (1, 3, 5)
  raise ValueError(f'unknown attention stage {stage!r}; expected one of {STAGES}')


def group(x, stage: str, grid):
  """(B, T, N, *F) -> (B * G, L, *F): the groups of tokens that attend to each other in `stage`."""
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


class MultiHeadAttention(nn.Module):
  """Multi-head self-attention over the neighbourhood of `stage` (ViViT eq. 7 with W_q, W_k, W_v, W_O).

  Call with x (B, T, N, D) and an optional global class token cls (B, 1, D); returns (y, cls_y) of the same
  shapes, cls_y None where the class token does not join the stage (`time`: TimeSformer leaves it untouched). Projections are named like flax's
  MultiHeadDotProductAttention (query, key, value: (D, H, d_h); out: (H, d_h, D)).
  """
  num_heads: int
  qkv_bias: bool = True
  dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()

  @nn.compact
  def __call__(self, x, cls, *, stage: str, grid, mixing=None, train: bool = False):
    b, t, n, d = x.shape
    h = self.num_heads
    dense = functools.partial(nn.DenseGeneral, features=(h, d // h), axis=-1, use_bias=self.qkv_bias,
                              dtype=self.dtype, kernel_init=self.kernel_init)
    proj = {name: dense(name=name) for name in ('query', 'key', 'value')}
    q, k, v = (proj[name](x) for name in ('query', 'key', 'value'))  # (B, T, N, H, d_h)
    has_cls = cls is not None
    if has_cls:
      cq, ck, cv = (proj[name](cls) for name in ('query', 'key', 'value'))  # (B, 1, H, d_h)

    extra_kv = None
    if mixing is not None:  # X-ViT space-time mixing of keys and values (eq. 9), within segments.
      seg = mixing.get('num_segments') or t  # temporal indices per segment
      shift = functools.partial(temporal_shift, window=mixing.window, shift_div=mixing.shift_div, num_segments=seg)
      k = shift(k.reshape(b, t, n, d)).reshape(k.shape)
      v = shift(v.reshape(b, t, n, d)).reshape(v.shape)
      if mixing.summary_token:  # one summary token (spatial mean) per frame, seen by every frame of its segment.
        summary = jnp.mean(x, axis=2)  # (B, T, D)
        sk, sv = proj['key'](summary), proj['value'](summary)  # (B, T, H, d_h)
        per_frame = lambda s: jnp.repeat(s.reshape(b * (t // seg), 1, seg, h, d // h), seg, axis=1).reshape(
            b * t, seg, h, d // h)  # (B*T, seg, H, d_h): the summaries of the frame's segment
        extra_kv = (per_frame(sk), per_frame(sv))

    rng = self.make_rng('dropout') if train and self.dropout_rate > 0 else None
    attend = functools.partial(dot_product_attention, dropout_rate=self.dropout_rate, dropout_rng=rng,
                               deterministic=not train)

    def run(stage, q, k, v, cls_qkv):
      """Attention of `stage` over (B, T, N, H', d_h) tensors; returns (y, cls_y or None)."""
      gq, gk, gv = (group(a, stage, grid) for a in (q, k, v))
      if extra_kv is not None:
        if stage != 'space':
          raise ValueError('summary tokens are defined for space(-time mixing) attention only')
        gk = jnp.concatenate([gk, extra_kv[0]], axis=1)
        gv = jnp.concatenate([gv, extra_kv[1]], axis=1)
      with_cls = cls_qkv is not None and stage in _CLASS_TOKEN_STAGES
      if with_cls:
        groups = gq.shape[0] // b
        cq, ck, cv = (jnp.repeat(a, groups, axis=0) for a in cls_qkv)
        gq, gk, gv = (jnp.concatenate([c, g], axis=1) for c, g in ((cq, gq), (ck, gk), (cv, gv)))
      out = attend(gq, gk, gv)
      cls_out = None
      if with_cls:
        cls_out = out[:, :1].reshape(b, -1, *out.shape[2:]).mean(axis=1, keepdims=True)
        out = out[:, 1:]
      return ungroup(out, stage, grid, b, t, n), cls_out

    cls_qkv = (cq, ck, cv) if has_cls else None
    if stage == 'factorised_dot_product':  # ViViT Model 4: half the heads in space, half in time.
      if has_cls:
        raise ValueError('factorised_dot_product attention has no class token')
      half = h // 2
      ys, _ = run('space', q[..., :half, :], k[..., :half, :], v[..., :half, :], None)
      yt, _ = run('time', q[..., half:, :], k[..., half:, :], v[..., half:, :], None)
      y, cy = jnp.concatenate([ys, yt], axis=-2), None
    else:
      y, cy = run(stage, q, k, v, cls_qkv)

    out = nn.DenseGeneral(features=d, axis=(-2, -1), dtype=self.dtype, kernel_init=self.kernel_init, name='out')
    return out(y), (out(cy) if cy is not None else None)
