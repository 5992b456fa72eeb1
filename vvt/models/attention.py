"""Multi-head self-attention over the neighbourhood of one stage: the Flax module of every scheme.

Every scheme of ViViT, TimeSformer and X-ViT is the one attention primitive (vvt/models/kernels.py) applied to a
grouping of the (B, T, N, D) tokens (vvt/models/groupings.py); the scheme table (vvt/models/schemes.py) says which
groupings a block runs. Two schemes change more than the grouping, and are still this one primitive:
  factorised_dot_product  (ViViT Model 4) half of the heads attend within `space`, half within `time`,
                          over the same projected Q, K, V (`groupings.HEAD_SPLITS`).
  space_time_mixing       (X-ViT eq. 9-10) K and V take 1/shift_div of their channels from frame t+i and
                          as many from t-i (i = 1..t_w, zeros at the clip ends) before `space` attention;
                          optionally every frame also attends to one summary token (spatial mean) per frame.
                          With `num_segments` < T the T frames are cut into consecutive segments of
                          num_segments frames that mix only among themselves (zeros at every segment end), as
                          the official code's TemporalShift(n_segment=NUM_SEGMENTS) does.
"""
from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import jax.numpy as jnp

from vvt.models import groupings
from vvt.models import kernels
from vvt.models import rope


class MultiHeadAttention(nn.Module):
  """Multi-head self-attention over the neighbourhood of `stage` (ViViT eq. 7 with W_q, W_k, W_v, W_O).

  Call with x (B, T, N, D) and an optional global class token cls (B, 1, D); returns (y, cls_y) of the same
  shapes, cls_y None where the class token joins none of the stage's groupings (`time`: TimeSformer leaves it
  untouched). `stage` is a grouping or a head split (`groupings.head_slices`); `mixing` (a
  `vvt.models.spec.Mixing`, or any object with its fields) turns on X-ViT's shift of keys and values. Projections
  are named like flax's MultiHeadDotProductAttention (query, key, value: (D, H, d_h); out: (H, d_h, D)).
  `key_bias` False leaves the key projection without its bias where `qkv_bias` (VideoMAE's q and v biases): softmax
  ignores the q.b_k that a key bias adds to a whole row of logits, so only the parameter count differs. `rope`
  rotates the queries and keys by their token's (t, h, w) in `grid` (V-JEPA 2's 3D RoPE, vvt/models/rope.py)
  before any grouping (`positions` (B, T, N): the grid indices of kept tokens, vvt/models/masking.py);
  `logit_cap` caps the scores (VideoPrism, `kernels.dot_product_attention`). Both off by default.
  """
  num_heads: int
  qkv_bias: bool = True
  key_bias: bool = True
  dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()
  impl: str = 'einsum'  # one of config.ATTENTION_IMPLS: how `kernels.dot_product_attention` runs (per stage: 'auto')
  backend: str | None = None  # the backend 'auto' chooses for (None: jax's default backend)
  rope: bool = False  # V-JEPA 2's 3D rotary embedding of q and k (no class token)
  logit_cap: float | None = None  # VideoPrism's tanh cap of the attention scores

  @nn.compact
  def __call__(self, x, cls, *, stage: str, grid, mixing=None, train: bool = False, positions=None):
    b, t, n, d = x.shape
    h = self.num_heads
    dense = functools.partial(nn.DenseGeneral, features=(h, d // h), axis=-1, use_bias=self.qkv_bias,
                              dtype=self.dtype, param_dtype=self.param_dtype, kernel_init=self.kernel_init)
    proj = {name: dense(name=name, use_bias=self.qkv_bias and (self.key_bias or name != 'key'))
            for name in ('query', 'key', 'value')}
    q, k, v = (proj[name](x) for name in ('query', 'key', 'value'))  # (B, T, N, H, d_h)
    if self.rope:
      if cls is not None:
        raise ValueError('rope rotates the patch tokens by their (t, h, w): a class token has no position')
      q, k = rope.rotate(q, grid, positions=positions), rope.rotate(k, grid, positions=positions)
    cls_qkv = None if cls is None else tuple(proj[name](cls) for name in ('query', 'key', 'value'))  # (B, 1, H, d_h)
    extra_kv = None
    if mixing is not None:  # X-ViT space-time mixing of keys and values (eq. 9), within segments.
      k, v, extra_kv = _mix(x, k, v, proj, mixing)

    rng = self.make_rng('dropout') if train and self.dropout_rate > 0 else None
    attend = functools.partial(kernels.dot_product_attention, dropout_rate=self.dropout_rate, dropout_rng=rng,
                               deterministic=not train, impl=self.impl, backend=self.backend,
                               logit_cap=self.logit_cap)
    parts = groupings.head_slices(stage, h)
    if cls_qkv is not None and len(parts) > 1:
      raise ValueError(f'{stage} attention splits its heads among {len(parts)} groupings and has no class token')
    ys, cls_y = [], None
    for grouping, heads in parts:
      part = (lambda a: a) if len(parts) == 1 else (lambda a, heads=heads: a[..., heads, :])
      y, cy = _attend_grouping(attend, grouping, grid, part(q), part(k), part(v),
                               None if cls_qkv is None else tuple(part(a) for a in cls_qkv),
                               None if extra_kv is None else tuple(part(a) for a in extra_kv))
      ys.append(y)
      cls_y = cy if cls_y is None else cls_y
    y = ys[0] if len(ys) == 1 else jnp.concatenate(ys, axis=-2)

    out = nn.DenseGeneral(features=d, axis=(-2, -1), dtype=self.dtype, param_dtype=self.param_dtype,
                          kernel_init=self.kernel_init, name='out')
    return out(y), (out(cls_y) if cls_y is not None else None)


def _mix(x, k, v, proj, mixing):
  """X-ViT eq. 9: keys and values (B, T, N, H, d_h) shifted in time within segments, and with summary tokens the
  per-frame keys and values (B*T, seg, H, d_h) of the frame's segment's summaries (None without)."""
  b, t, n, d = x.shape
  h, dh = k.shape[-2:]
  seg = getattr(mixing, 'num_segments', None) or t  # temporal indices per segment
  shift = functools.partial(groupings.temporal_shift, window=mixing.window, shift_div=mixing.shift_div,
                            num_segments=seg)
  k = shift(k.reshape(b, t, n, d)).reshape(k.shape)
  v = shift(v.reshape(b, t, n, d)).reshape(v.shape)
  if not mixing.summary_token:
    return k, v, None
  summary = jnp.mean(x, axis=2)  # (B, T, D): one summary token (spatial mean) per frame
  per_frame = lambda s: jnp.repeat(s.reshape(b * (t // seg), 1, seg, h, dh), seg, axis=1).reshape(b * t, seg, h, dh)
  return k, v, (per_frame(proj['key'](summary)), per_frame(proj['value'](summary)))


def _attend_grouping(attend, grouping, grid, q, k, v, cls_qkv, extra_kv):
  """Attention within `grouping` over (B, T, N, H', d_h) tensors: a global class token (cls_qkv, (B, 1, H', d_h)
  each) joins every group where the grouping takes it, its outputs averaged over the groups; extra_kv: keys and
  values every group also attends to (summary tokens, `space` only). Returns (y, cls_y or None)."""
  b, t, n = q.shape[:3]
  gq, gk, gv = (groupings.group(a, grouping, grid) for a in (q, k, v))
  if extra_kv is not None:
    if grouping != 'space':
      raise ValueError('summary tokens are defined for space(-time mixing) attention only')
    gk = jnp.concatenate([gk, extra_kv[0]], axis=1)
    gv = jnp.concatenate([gv, extra_kv[1]], axis=1)
  with_cls = cls_qkv is not None and groupings.joins_class_token(grouping)
  if with_cls:
    groups = gq.shape[0] // b
    cq, ck, cv = (jnp.repeat(a, groups, axis=0) for a in cls_qkv)
    gq, gk, gv = (jnp.concatenate([c, g], axis=1) for c, g in ((cq, gq), (ck, gk), (cv, gv)))
  out = attend(gq, gk, gv)
  cls_out = None
  if with_cls:
    cls_out = out[:, :1].reshape(b, -1, *out.shape[2:]).mean(axis=1, keepdims=True)
    out = out[:, 1:]
  return groupings.ungroup(out, grouping, grid, b, t, n), cls_out
