"""Attention maps of any scheme, recomputed from the model's own query/key projections.

    stages = attention_stages(module, params, video, model)   # one Stage per attention stage of every layer
    result = attention_maps(params, video, model)             # the per-video maps (see `Maps`)

`model` is the model's `vvt.models.spec.ModelSpec` (a run's `model`; `spec_of(vvt.models.resolve(cfg))` of a model
config), `module` / `params` the Flax module `vvt.models.build` makes of it and its params.

Nothing in the model changes: `module.apply(..., capture_intermediates=...)` records every attention module's
query / key / value projections (and its output), and each stage's probabilities softmax(q k^T / sqrt(d_h)) are
recomputed here with the model's own groupings (`vvt.models.groupings.group`), X-ViT's `temporal_shift` of keys
(and values), its summary tokens, the class token joining every group of a stage (its row averaged over the
groups, as the model averages its outputs) and ViViT Model 4's split of heads (the first half in `space`, the
second in `time`). `Stage.recompute_output` rebuilds the module's output from these probabilities and the values
(tests: equal to the module's own output for every scheme, so the maps are the model's real attention).

Every stage's probabilities are scattered into one dense token-to-token matrix over the encoder's M tokens
(patch tokens t * N + n in (T, N) row-major order, a global class token last): `Stage.attn` (B, H, M, M),
row = query, column = key position. X-ViT's keys at (t, n) carry 1/shift_div of their channels from (t +- i, n),
and its summary tokens are the spatial mean of a frame: `Stage.summary` holds the attention to summary tokens
spread uniformly over their frame's tokens, and `Stage.provenance` (M, M) the share of a key's channels that
each token supplies, so `Stage.effective()` = attn @ provenance + summary is where a query's information comes
from, token to token (rows sum to 1 except where the shift brought zeros at a clip end).

Maps (`Maps`, all normalised to sum 1 over the patch tokens of the clip):
  final        (B, T, nh, nw)  class-token attention of the last layer where the model has a class token
                               (global; per-frame: the frames' maps averaged), else attention rollout
                               (Abnar & Zuidema 2020: per stage 0.5 * A + 0.5 * I, heads averaged, multiplied
                               over stages and layers; the representation's rows averaged: all tokens for
                               GAP and the attentive pooler). ViViT Model 2: the spatial encoder's map per frame
                               times the temporal encoder's map over frames. VideoPrism (space_then_time): its
                               spatial stages (within frames) and temporal stages (along positions) on the clip's
                               tokens, rolled out as one encoder.
  Queries and keys are those the model attends with: V-JEPA 2's RoPE applied, VideoPrism's logit cap applied.
  per_stage    {name: (B, H, T, nh, nw)} attention received per patch in each stage of each layer (mean over
               queries: which tokens the stage reads).
  frames       {name: (B, H, T, T)} frame-to-frame attention mass of each stage (row: query frame, sums to 1):
               the temporal part of a factorised scheme (`time` stages; identity for `space`).
  Temporal indices are tubelets: a map at index t covers frames t * tubelet_t ... (t + 1) * tubelet_t - 1.
"""
from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Optional

import numpy as np

ENCODERS = ('encoder', 'spatial_encoder', 'temporal_encoder')


@dataclasses.dataclass
class Stage:
  """One attention stage of one layer, as dense token-to-token matrices over the encoder's M tokens."""
  encoder: str  # 'encoder' | 'spatial_encoder' | 'temporal_encoder'
  layer: int
  stage: str  # the model's stage name (factorised_dot_product: heads split space | time)
  t: int  # temporal indices of the encoder's token array
  n: int  # tokens per temporal index (a per-frame class token included, at n = 0)
  per_frame_cls: bool
  has_cls: bool  # a global class token (index M - 1)
  cls_joins: bool  # the global class token takes part in this stage
  attn: np.ndarray  # (B, H, M, M) probabilities over key positions
  summary: Optional[np.ndarray]  # (B, H, M, M) attention to X-ViT summary tokens, spread over their frames
  provenance: Optional[np.ndarray]  # (M, M) X-ViT: share of key (row) channels from each token (column)
  head_stages: tuple  # the stage each head attends in
  values: Any = None  # for recompute_output: (v (B,T,N,H,dh) as used by the keys, v unshifted, cls v)
  out_params: Any = None
  output: Any = None  # the module's own output (y, cls_y)

  @property
  def name(self) -> str:
    prefix = '' if self.encoder == 'encoder' else self.encoder.split('_')[0] + '/'
    return f'{prefix}layer{self.layer}/{self.stage}'

  def effective(self) -> np.ndarray:
    """(B, H, M, M): where each query's information comes from, token to token (see module docstring)."""
    a = self.attn
    if self.provenance is not None:
      a = a @ self.provenance
    if self.summary is not None:
      a = a + self.summary
    return a

  def recompute_output(self):
    """The module's output (y (B, T, N, D), cls_y (B, 1, D) or None) from the probabilities and the values."""
    v_keys, v_plain, v_cls = self.values
    b, t, n, h, dh = v_keys.shape
    flat = lambda v: v.reshape(b, t * n, h, dh)
    tokens = flat(v_keys)
    if self.has_cls:
      tokens = np.concatenate([tokens, v_cls.reshape(b, 1, h, dh)], axis=1)
    y = np.einsum('bhqk,bkhd->bqhd', self.attn, tokens)
    if self.summary is not None:
      plain = flat(v_plain)
      if self.has_cls:
        plain = np.concatenate([plain, np.zeros_like(tokens[:, -1:])], axis=1)
      y = y + np.einsum('bhqk,bkhd->bqhd', self.summary, plain)
    kernel, bias = self.out_params
    out = np.einsum('bqhd,hdo->bqo', y, kernel) + (0 if bias is None else bias)
    patches = out[:, :t * n].reshape(b, t, n, -1)
    cls = out[:, t * n:] if self.has_cls and self.cls_joins else None
    return patches, cls


@dataclasses.dataclass
class Maps:
  scheme: str
  kind: str  # 'class_token' | 'rollout'
  grid: tuple  # (T, nh, nw) token grid
  tubelet_t: int
  final: np.ndarray  # (B, T, nh, nw)
  per_stage: dict  # name -> (B, H, T, nh, nw)
  frames: dict  # name -> (B, H, T, T)
  stages: list


# --------------------------------------------------------------------------------------------- capture


def prepare(model, params):
  """(ModelSpec, params) for capture: unscanned layers, no remat, einsum attention (the same function)."""
  from vvt.models import layout
  return (dataclasses.replace(model, scan_layers=False, remat='none', attention_impl='einsum'),
          layout.to_per_layer(params))


def capture(module, params, video):
  """(logits, intermediates) with the query/key/value/out projections and outputs of every attention module."""
  from vvt.models.attention import MultiHeadAttention

  def wanted(mdl, method):
    return method == '__call__' and (isinstance(mdl, MultiHeadAttention) or
                                     isinstance(getattr(mdl, 'parent', None), MultiHeadAttention))

  logits, state = module.apply({'params': params}, video, train=False, capture_intermediates=wanted,
                               mutable=['intermediates'])
  return logits, state['intermediates']


def _find_attention(tree, path=()):
  """Yields (path, node) of every '<stage>_attention' module in the intermediates tree."""
  for key, node in tree.items():
    if not hasattr(node, 'items'):
      continue
    if key.endswith('_attention') and 'query' in node:
      yield path + (key,), node
    else:
      yield from _find_attention(node, path + (key,))


# --------------------------------------------------------------------------------------------- stages


def _grouped_probs(q, k, logit_cap=None):
  """softmax(q k^T / sqrt(d)) of grouped (G, Lq, H, d), (G, Lk, H, d) -> (G, H, Lq, Lk), float64; with
  `logit_cap` c the scores are c * tanh(scores / c) first (VideoPrism, as the model)."""
  q = np.asarray(q, np.float64) / math.sqrt(q.shape[-1])
  s = np.einsum('gqhd,gkhd->ghqk', q, np.asarray(k, np.float64))
  if logit_cap is not None:
    s = logit_cap * np.tanh(s / logit_cap)
  s = s - s.max(axis=-1, keepdims=True)
  e = np.exp(s)
  return e / e.sum(axis=-1, keepdims=True)


def _encoder_geometry(model, encoder: str, b: int, t: int, n: int):
  """(grid, per_frame_cls, mixing) of an encoder of the model (as vvt.models.video_transformer builds it)."""
  nt, nh, nw = model.grid
  if encoder == 'spatial_encoder':
    return (1, nh, nw), False, None
  if encoder == 'temporal_encoder':
    return (1, 1, t * n), False, None
  per_frame = model.class_token == 'per_frame'
  mixing = None
  if model.mixing is not None:  # X-ViT: num_segments in temporal indices
    mixing = dict(window=model.mixing.window, shift_div=model.mixing.shift_div,
                  num_segments=model.mixing.num_segments, summary_token=model.mixing.summary_token)
  return (nt, nh, nw), per_frame, mixing


def _provenance(t, n, m, c, mixing):
  """(M, M): the share of the channels of the key at token i (row) that token j (column) supplies."""
  fold = c // mixing['shift_div']
  window, seg = mixing['window'], mixing['num_segments']
  p = np.zeros((m, m))
  for ti in range(t):
    for nn in range(n):
      i = ti * n + nn
      p[i, i] = (c - 2 * window * fold) / c
      for d in range(1, window + 1):
        for src in (ti + d, ti - d):
          if src // seg == ti // seg and 0 <= src < t:
            p[i, src * n + nn] += fold / c
  for i in range(t * n, m):  # a global class token's key is not shifted
    p[i, i] = 1.0
  return p


@dataclasses.dataclass(frozen=True)
class Grouping:
  """One way an attention module's heads group the tokens (`vvt.models.groupings.group`)."""
  stage: str  # the neighbourhood these heads attend in: 'joint' | 'space' | 'time' | 'width' | ...
  heads: slice  # the heads that attend in it
  groups: np.ndarray  # (G, L) token indices t * N + n of each group (every token in exactly one group)
  with_cls: bool  # the global class token joins every group (its output: the mean over the groups)


def groupings(stage_name: str, num_heads: int, t: int, n: int, grid, has_cls: bool) -> list:
  """The Groupings of one attention module of stage `stage_name` over (T, N) tokens, as the model forms them:
  the groupings table of `vvt.models.groupings` (ViViT Model 4's `factorised_dot_product` splits its heads, the
  first half in `space`, the second in `time`; the class token joins the groupings that let it in, not
  TimeSformer's `time`).
  """
  from vvt.models import groupings as grouping_table
  ids = np.arange(t * n).reshape(1, t, n)
  return [Grouping(grouping, heads, np.asarray(grouping_table.group(ids, grouping, grid)),
                   has_cls and grouping_table.joins_class_token(grouping))
          for grouping, heads in grouping_table.head_slices(stage_name, num_heads)]


@dataclasses.dataclass
class _Projections:
  """An attention module's captured projections, float64 NumPy."""
  q: np.ndarray  # (B, T, N, H, dh) patch tokens
  k: np.ndarray
  v: np.ndarray
  cls: Optional[tuple]  # (q, k, v) of the global class token, each (B, 1, H, dh); None without one
  summary_k: Optional[np.ndarray]  # X-ViT's summary-token keys (B, T, H, dh): a key call with no query call
  output: tuple  # the module's own output (y (B, T, N, D), cls_y (B, 1, D) or None)


def _projections(node) -> _Projections:
  """The query / key / value calls recorded in `node` (patch tokens, then the class token, then summaries)."""
  import jax
  as_np = lambda a: np.asarray(jax.device_get(a), np.float64)
  qs, ks, vs = ([as_np(a) for a in node[name]['__call__']] for name in ('query', 'key', 'value'))
  has_cls = len(qs) > 1
  return _Projections(q=qs[0], k=ks[0], v=vs[0], cls=(qs[1], ks[1], vs[1]) if has_cls else None,
                      summary_k=ks[-1] if len(ks) > len(qs) else None,
                      output=tuple(as_np(a) if a is not None else None for a in node['__call__'][0]))


def _mixed(x: np.ndarray, mixing) -> np.ndarray:
  """X-ViT eq. 9: keys or values (B, T, N, H, dh) with their channels shifted in time, as the model does."""
  from vvt.models.groupings import temporal_shift
  if mixing is None:
    return x
  b, t, n, h, dh = x.shape
  return np.asarray(temporal_shift(x.reshape(b, t, n, h * dh), window=mixing['window'], shift_div=mixing['shift_div'],
                                   num_segments=mixing['num_segments'])).reshape(x.shape)


def _group_of(x, g: Grouping):
  """(B, T, N, *F) -> (B * G, L, *F): `x` gathered into the groups of `g`."""
  b = x.shape[0]
  flat = x.reshape(b, -1, *x.shape[3:])
  return flat[:, g.groups].reshape(-1, g.groups.shape[1], *x.shape[3:])


def _grouping_probs(g: Grouping, q, k, cls, summary_k, seg, logit_cap=None) -> np.ndarray:
  """(B, G, H', Lq, Lk): softmax(q k^T / sqrt(d_h)) in each group of `g`, for its heads H'.

  Queries: [class token,] the group's patches; keys: [class token,] the group's patches [, the summary tokens
  of the frame's segment (`seg` frames; X-ViT, space stage: group gi is temporal index gi)].
  """
  b = q.shape[0]
  gq, gk = (_group_of(a[..., g.heads, :], g) for a in (q, k))  # (B*G, L, H', dh)
  hs, dh = gq.shape[2:]
  if summary_k is not None:
    t = summary_k.shape[1]
    sk = summary_k[..., g.heads, :].reshape(b, t // seg, 1, seg, hs, dh)
    gk = np.concatenate([gk, np.repeat(sk, seg, axis=2).reshape(b * t, seg, hs, dh)], axis=1)
  if g.with_cls:
    num_groups = g.groups.shape[0]
    rep = lambda a: np.repeat(a[..., g.heads, :], num_groups, axis=0)
    gq = np.concatenate([rep(cls[0]), gq], axis=1)
    gk = np.concatenate([rep(cls[1]), gk], axis=1)
  return _grouped_probs(gq, gk, logit_cap).reshape(b, -1, hs, gq.shape[1], gk.shape[1])


def _scatter_patches(attn, p, g: Grouping, nk: int) -> None:
  """Writes the patch-query -> patch-key probabilities of `g` into attn (B, H, M, M)."""
  off = int(g.with_cls)
  iq, ik = g.groups[:, :, None], g.groups[:, None, :]
  attn[:, g.heads, iq, ik] = p[:, :, :, off:, off:off + nk].transpose(0, 2, 1, 3, 4)


def _scatter_class_token(attn, p, g: Grouping, nk: int) -> None:
  """The class token (index M - 1) in attn (B, H, M, M): every patch query's attention to it, and its own row,
  the mean over the groups of its query's attention in each group (the model averages its outputs)."""
  cls_index = attn.shape[-1] - 1
  num_groups = g.groups.shape[0]
  attn[:, g.heads, g.groups, cls_index] = p[:, :, :, 1:, 0].transpose(0, 2, 1, 3)  # patch queries -> class token
  cls_row = p[:, :, :, 0, :]  # (B, G, H', Lk)
  attn[:, g.heads, cls_index, cls_index] = cls_row[..., 0].mean(axis=1)
  for gi in range(num_groups):
    attn[:, g.heads, cls_index, g.groups[gi]] += cls_row[:, gi, :, 1:1 + nk] / num_groups


def _scatter_summary(summary, p, g: Grouping, nk: int, n: int, seg: int) -> None:
  """X-ViT: attention to the summary token of frame j of a query's segment, spread uniformly over that frame's
  N tokens, into summary (B, H, M, M) (the class token's row averaged over the groups)."""
  off = int(g.with_cls)
  num_groups = g.groups.shape[0]
  ps = p[:, :, :, off:, off + nk:]  # (B, G, H', L, seg)
  for gi in range(num_groups):
    first = (gi // seg) * seg
    for j in range(seg):
      frame = np.arange((first + j) * n, (first + j + 1) * n)
      summary[:, g.heads, g.groups[gi][:, None], frame[None, :]] += ps[:, gi, :, :, j][..., None] / n
      if g.with_cls:
        summary[:, g.heads, -1, frame] += (p[:, gi, :, 0, off + nk + j] / n / num_groups)[..., None]


def _stage_of(model, encoder, layer, stage_name, node):
  """One Stage from an attention module's captured projections."""
  proj = _projections(node)
  b, t, n, h, _ = proj.q.shape
  grid, per_frame, mixing = _encoder_geometry(model, encoder, b, t, n)
  if model.positional_embedding == 'rope' and encoder == 'encoder':  # V-JEPA 2: q and k rotated as the model
    from vvt.models import rope
    proj.q, proj.k = rope.rotate(proj.q, grid, xp=np), rope.rotate(proj.k, grid, xp=np)
  cap = model.attention_logit_cap
  k_used, v_used = _mixed(proj.k, mixing), _mixed(proj.v, mixing)
  seg = mixing['num_segments'] if mixing is not None else t
  has_cls = proj.cls is not None
  m = t * n + int(has_cls)
  attn = np.zeros((b, h, m, m))
  summary = np.zeros((b, h, m, m)) if proj.summary_k is not None else None
  parts = groupings(stage_name, h, t, n, grid, has_cls)
  for g in parts:
    p = _grouping_probs(g, proj.q, k_used, proj.cls, proj.summary_k, seg, cap)
    nk = g.groups.shape[1]
    _scatter_patches(attn, p, g, nk)
    if g.with_cls:
      _scatter_class_token(attn, p, g, nk)
    elif has_cls:  # the class token skips this stage (TimeSformer `time`): unchanged
      attn[:, g.heads, m - 1, m - 1] = 1.0
    if summary is not None:
      _scatter_summary(summary, p, g, nk, n, seg)
  return Stage(encoder=encoder, layer=layer, stage=stage_name, t=t, n=n, per_frame_cls=per_frame, has_cls=has_cls,
               cls_joins=any(g.with_cls for g in parts), attn=attn, summary=summary,
               provenance=_provenance(t, n, m, h * proj.q.shape[-1], mixing) if mixing is not None else None,
               head_stages=tuple(g.stage for g in parts for _ in range(h)[g.heads]),
               values=(v_used, proj.v, proj.cls[2] if has_cls else None), out_params=None, output=proj.output)


def attention_stages(module, params, video, model, *, prepared: bool = False) -> list:
  """Every attention stage of every layer of every encoder, in the order the model runs them.

  module / params: as vvt.models.build makes them of the ModelSpec `model`; video float (B, T, H, W, 3),
  normalised as the model expects. Layers may be scanned or rematerialised: the maps are taken from an unscanned
  copy (`prepared`: `module`, `params` and `model` are that copy already, `prepare`).
  """
  import vvt.models
  if not prepared:
    model, params = prepare(model, params)
    module = vvt.models.build(model)
  _, inter = capture(module, params, video)
  stages = []
  for encoder in ENCODERS:
    if encoder not in inter:
      continue
    layers = inter[encoder]['layers']
    for lname in sorted(layers, key=lambda s: int(s.split('_')[1])):
      block = layers[lname]
      layer = int(lname.split('_')[1])
      names = [k for k in block if k.endswith('_attention')]
      for stage_name in _stage_order(model, encoder, names):
        st = _stage_of(model, encoder, layer, stage_name, block[f'{stage_name}_attention'])
        p = params[encoder]['layers'][lname][f'{stage_name}_attention']['out']
        st.out_params = (np.asarray(p['kernel'], np.float64),
                         np.asarray(p['bias'], np.float64) if 'bias' in p else None)
        stages.append(st)
  return stages


def _stage_order(model, encoder, names):
  """The stages of a block of `encoder` in the order the model runs them (the scheme table's), those present."""
  if encoder != 'encoder':
    return ['joint']
  present = {re.sub('_attention$', '', k) for k in names}
  return [s for s in model.stages if s in present]


# --------------------------------------------------------------------------------------------- maps


def _patch_columns(st: Stage) -> np.ndarray:
  """Indices of the patch tokens (no class tokens) among the M tokens, in (T, N') order."""
  start = 1 if st.per_frame_cls else 0
  return np.asarray([ti * st.n + j for ti in range(st.t) for j in range(start, st.n)])


def _normalise(x, axes):
  s = x.sum(axis=axes, keepdims=True)
  return x / np.where(s > 0, s, 1)


def rollout(stages: list) -> np.ndarray:
  """(B, M, M) attention rollout through the residuals: prod over stages of rownorm(0.5 * mean_h A + 0.5 I)."""
  r = None
  for st in stages:
    a = st.effective().mean(axis=1)
    a = 0.5 * a + 0.5 * np.eye(a.shape[-1])[None]
    a = _normalise(a, -1)
    r = a if r is None else a @ r
  return r


def _readout_rows(st: Stage, classifier: str):
  """Token rows whose average is the representation: the class token(s), or every token (GAP)."""
  if st.has_cls:
    return np.asarray([st.t * st.n])
  if st.per_frame_cls:
    return np.asarray([ti * st.n for ti in range(st.t)])
  return np.arange(st.t * st.n)


def _encoder_map(stages: list, use_class_token: bool, first_token: bool = False) -> np.ndarray:
  """(B, T, N') relevance of the patch tokens of one encoder, sum 1 per example (first_token: the representation
  is the first token's output, model.pooling='first_token', so the rollout is read from its row alone)."""
  last = stages[-1]
  cols = _patch_columns(last)
  rows = np.asarray([0]) if first_token and not use_class_token else _readout_rows(last, '')
  if use_class_token:  # the class token's attention in the last layer's stages it joins
    joined = [s for s in stages if s.layer == last.layer and (s.cls_joins or s.per_frame_cls)]
    m = np.mean([s.effective().mean(axis=1)[:, rows][:, :, cols].mean(axis=1) for s in joined], axis=0)
  else:
    m = rollout(stages)[:, rows][:, :, cols].mean(axis=1)
  m = _normalise(m, -1)
  return m.reshape(m.shape[0], last.t, -1)


def per_stage_maps(st: Stage, grid) -> np.ndarray:
  """(B, H, T, nh, nw): attention received by each patch in the stage (mean over the patch queries)."""
  cols = _patch_columns(st)
  a = st.effective()[:, :, cols][:, :, :, cols].mean(axis=2)  # (B, H, P)
  a = _normalise(a, -1)
  return a.reshape(a.shape[0], a.shape[1], *grid)


def frame_attention(st: Stage) -> np.ndarray:
  """(B, H, T, T): attention mass from the patch queries of frame t (rows) to the tokens of frame t'."""
  cols = _patch_columns(st)
  a = st.effective()[:, :, cols][:, :, :, :st.t * st.n]  # (B, H, P, T*N)
  b, h = a.shape[:2]
  per = len(cols) // st.t
  a = a.reshape(b, h, st.t, per, st.t, st.n).sum(axis=-1).mean(axis=3)
  return _normalise(a, -1)


def attention_maps(params, video, model) -> Maps:
  """The maps of `video` under `params` of the model of ModelSpec `model` (see the module docstring)."""
  import vvt.models
  model, params = prepare(model, params)
  stages = attention_stages(vvt.models.build(model), params, video, model, prepared=True)
  grid = tuple(model.grid)
  nt, nh, nw = grid
  use_cls = model.classifier == 'token'
  per_stage, frames = {}, {}
  b = video.shape[0]
  if model.attention == 'factorised_encoder':
    spatial = [s for s in stages if s.encoder == 'spatial_encoder']
    temporal = [s for s in stages if s.encoder == 'temporal_encoder']
    ms = _encoder_map(spatial, use_cls).reshape(b, nt, nh, nw)  # per frame, each sums to 1
    mt = (_encoder_map(temporal, use_cls).reshape(b, nt) if temporal else np.full((b, nt), 1.0 / nt))
    final = ms * mt[:, :, None, None]
    for s in spatial:
      per_stage[s.name] = per_stage_maps(s, (1, nh, nw)).reshape(b, nt, -1, 1, nh, nw)[:, :, :, 0].transpose(
          0, 2, 1, 3, 4) / nt
    for s in temporal:
      frames[s.name] = np.broadcast_to(per_stage_maps(s, (1, 1, nt))[:, :, 0, 0][:, :, None, :],
                                        (b, s.attn.shape[1], nt, nt)).copy()
  else:
    clip = _on_clip_tokens(stages, b, nt, nh * nw) if model.attention == 'space_then_time' else stages
    final = _encoder_map(clip, use_cls, model.pooling == 'first_token').reshape(b, nt, nh, nw)
    for s in clip:
      per_stage[s.name] = per_stage_maps(s, grid)
      frames[s.name] = frame_attention(s)
  final = _normalise(final, (1, 2, 3))
  return Maps(scheme=model.attention, kind='class_token' if use_cls else 'rollout', grid=grid,
              tubelet_t=model.tubelet[0], final=final, per_stage=per_stage, frames=frames, stages=stages)


def _on_clip_tokens(stages: list, b: int, nt: int, n: int) -> list:
  """VideoPrism's (space_then_time) stages on the clip's M = n_t * N tokens: a spatial stage's (B * n_t, H, N, N)
  attention within each frame and a temporal stage's (B * N, H, n_t, n_t) attention along each position, both
  scattered into (B, H, M, M) over tokens t * N + n, so that rollout and the maps read them as one encoder."""
  out = []
  for st in stages:
    h = st.attn.shape[1]
    attn = np.zeros((b, h, nt * n, nt * n))
    ids = np.arange(nt * n).reshape(nt, n)
    if st.encoder == 'spatial_encoder':  # st.attn: (B * n_t, H, N, N)
      a = st.attn.reshape(b, nt, h, n, n)
      for t in range(nt):
        attn[:, :, ids[t][:, None], ids[t][None, :]] = a[:, t]
    else:  # temporal_encoder, st.attn: (B * N, H, n_t, n_t)
      a = st.attn.reshape(b, n, h, nt, nt)
      for j in range(n):
        attn[:, :, ids[:, j][:, None], ids[:, j][None, :]] = a[:, j]
    out.append(dataclasses.replace(st, t=nt, n=n, per_frame_cls=False, has_cls=False, cls_joins=False, attn=attn,
                                   summary=None, provenance=None))
  return out


def upsample(m: np.ndarray, tubelet_t: int, size: tuple[int, int]) -> np.ndarray:
  """(T, nh, nw) token map -> (T * tubelet_t, H, W) per-frame pixel map, size = (H, W) (nearest; each frame sums
  to its share of the mass)."""
  t, nh, nw = m.shape
  (height, width) = size
  up = np.repeat(np.repeat(m, height // nh, axis=1), width // nw, axis=2) / ((height // nh) * (width // nw))
  return np.repeat(up, tubelet_t, axis=0) / tubelet_t


def token_mask(mask: np.ndarray, grid, tubelet_t: int) -> np.ndarray:
  """bool (T, nh, nw): the tokens (tubelets) that hold any pixel of a bool (F, H, W) mask."""
  t, nh, nw = grid
  f, h, w = mask.shape[:3]
  return mask.reshape(t, f // t, nh, h // nh, nw, w // nw).any(axis=(1, 3, 5))


def mass_on_tokens(final: np.ndarray, mask: np.ndarray, tubelet_t: int) -> tuple:
  """(share of a (T, nh, nw) map's mass on the tokens that hold the bool (F, H, W) mask, their share of the
  tokens: what a uniform map would give)."""
  tokens = token_mask(mask, final.shape, tubelet_t)
  return float(np.asarray(final)[tokens].sum() / np.asarray(final).sum()), float(tokens.mean())
