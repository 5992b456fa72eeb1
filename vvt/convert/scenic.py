"""Scenic ViViT checkpoints (Flax param trees, flattened with '/') -> vvt, for all four ViViT models.

Scenic layout (google-research/scenic, projects/vivit/model.py):
  `embedding/kernel` (t, h, w, C, D) for 3D-conv tubelets, (h, w, C, D) for uniform frame sampling;
  Model 1, 3, 4: optional `cls`, `Transformer/posembed_input/pos_embedding` (1, [1 +] T*N, D) over tokens in
  (t, h, w) order (row 0 = cls), `Transformer/encoderblock_i/...`, `Transformer/encoder_norm`;
  Model 2: `cls_SpatialTransformer`, `SpatialTransformer/...` (shared over time), `cls_TemporalTransformer`,
  `TemporalTransformer/...`; then optional `pre_logits` (Dense + tanh) and `output_projection`.
  Blocks: `LayerNorm_0`, `MultiHeadDotProductAttention_0` (query/key/value (D, H, d_h), out (H, d_h, D)),
  `LayerNorm_1`, `MlpBlock_0/Dense_{0,1}`; Model 3 blocks: `LayerNorm_{space,time}`,
  `MultiHeadDotProductAttention_{space,time}`, `LayerNorm_mlp`, `MlpBlock/Dense_{0,1}`.
Numerics: flax LayerNorm eps 1e-6, flax `nn.gelu` = tanh approximation, qkv bias on.

Model 4 (factorised dot-product) quirk: scenic gives the FIRST half of the heads to temporal attention and the
second half to spatial attention; vvt gives the first half to space. The converter swaps the two halves of
the heads of query/key/value/out, which leaves the function unchanged.
Model 1 and Model 4 have the same parameter names: pass attention='factorised_dot_product' for Model 4.
Model 3's attention order (scenic `attention_order`) is not stored either: pass it (default 'space_time').

Frames and frame size of Models 1, 3 and 4 (`read_token_grid`): the position table covers T*N token rows, and
T*N often factors into several (T, N = a square grid) splits. Trained tables, and tables initialised from an
image ViT (its table repeated over time), vary slowly along time, so the split whose rows (t, n) and (t+1, n) are
most alike is the true one; a table with the period N also repeats with 2N, 4N, ..., so among splits that are
equally alike the shortest period wins. When the rows do not single out one split, an explicit num_frames /
image_size must (the config's values, `frames_hint` / `size_hint`, choose among the alike splits only).
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import weight_files

MODELS = ('spatiotemporal', 'factorised_encoder', 'factorised_self_attention', 'factorised_dot_product')
# read_token_grid: the split's rows at adjacent time steps must be at least this alike (mean cosine, the mean row
# removed) ...
TIME_SIMILARITY = 0.5
# ... and more alike than those of any other split by this margin, unless that split's period is a multiple.
TIME_MARGIN = 0.1


def token_grids(rows: int, patch: tuple[int, int], frames_per_token: int) -> list[tuple[int, int, int]]:
  """Every way `rows` tokens in (t, h, w) order can be T temporal indices of a square frame.

  Args:
    rows: T*N, the position table's rows without the class token.
    patch: (h, w) pixels of a tubelet.
    frames_per_token: frames per temporal index (the tubelet length; 1 for uniform frame sampling).
  Returns:
    (T, num_frames, image_size) with N = (image_size / h) * (image_size / w) patches per frame, fewest T first.
  """
  h, w = patch
  out = []
  for t in range(1, rows + 1):
    if rows % t:
      continue
    size = math.isqrt(rows // t * h * w)
    if size * size == rows // t * h * w and size % h == 0 and size % w == 0:
      out.append((t, t * frames_per_token, size))
  return out


def time_similarity(table: np.ndarray, per_step: int) -> float:
  """How alike the rows of one patch at adjacent time steps are when `table` holds steps of `per_step` rows.

  Args:
    table: (T*N, D) position table without the class token, tokens in (t, h, w) order.
    per_step: N, the rows of one time step.
  Returns:
    The mean cosine similarity of rows i and i + N over all i (the mean row removed first, so an offset shared
    by every row does not count): 1 for a table repeated over time, about 0 for unrelated rows.
  """
  x = np.asarray(table, np.float64)
  x = x - x.mean(axis=0, keepdims=True)
  a, b = x[:-per_step], x[per_step:]
  norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
  return float(np.mean((a * b).sum(-1) / np.maximum(norms, 1e-12)))


def _alike_splits(grids, scores):
  """(the splits within TIME_MARGIN of the most alike over time, whether that one is alike enough to count)."""
  best = max((s for s in scores if s is not None), default=None)
  if best is None or best < TIME_SIMILARITY:
    return list(grids), False
  return [g for g, s in zip(grids, scores, strict=True) if s is not None and s >= best - TIME_MARGIN], True


def _by_hints(grids, frames_hint, size_hint):
  """The one split that agrees with more of the hints than any other (None where no one does)."""
  votes = [int(frames_hint == f) + int(size_hint == s) for _, f, s in grids]
  top = max(votes, default=0)
  return grids[votes.index(top)] if top and votes.count(top) == 1 else None


def read_token_grid(table: np.ndarray, tubelet: tuple[int, int, int], *, num_frames: int | None = None,
                    image_size: int | None = None, frames_hint: int | None = None, size_hint: int | None = None,
                    what: str = 'scenic checkpoint') -> tuple[int, int, str]:
  """Frames and frame size of a joint (T*N, D) position table (Models 1, 3, 4): see the module doc.

  Args:
    table: (T*N, D) rows without the class token, tokens in (t, h, w) order.
    tubelet: (t, h, w) of the patch embedding.
    num_frames / image_size: asked for explicitly; they decide (an error if the table has no such split).
    frames_hint / size_hint: the config's values, used only where the table's rows do not decide.
    what: names the checkpoint in errors.
  Returns:
    (num_frames, image_size, how the split was chosen).
  """
  rows = int(table.shape[0])
  grids = token_grids(rows, tubelet[1:], tubelet[0])
  fits = ', '.join(f'({f}, {s})' for _, f, s in grids) or 'none'
  if num_frames is not None or image_size is not None:
    asked = [g for g in grids if num_frames in (None, g[1]) and image_size in (None, g[2])]
    if not asked:
      raise ValueError(f'{what}: its position table has {rows} token rows, which do not fit num_frames='
                       f'{num_frames}, image_size={image_size} ((frames, px) that fit: {fits})')
    t, frames, size = asked[0]
    return frames, size, f'{t}x{rows // t} tokens by the num_frames/image_size asked for'
  if not grids:
    raise ValueError(f'{what}: its position table has {rows} token rows: no number of time steps of a square '
                     f'frame of {tubelet[1]}x{tubelet[2]} patches')
  if len(grids) == 1:
    t, frames, size = grids[0]
    return frames, size, f'{t}x{rows // t} tokens, the only split'
  scores = [time_similarity(table, rows // t) if t > 1 else None for t, _, _ in grids]
  said = ', '.join(f'{t}x{rows // t}: {s:.2f}' for (t, _, _), s in zip(grids, scores, strict=True) if s is not None)
  alike, counts = _alike_splits(grids, scores)
  shortest = min(alike, key=lambda g: rows // g[0])
  if counts and all((rows // g[0]) % (rows // shortest[0]) == 0 for g in alike):
    t, frames, size = shortest
    return frames, size, f'{t}x{rows // t} tokens, the split most alike over time (similarity {said})'
  chosen = _by_hints(alike, frames_hint, size_hint)
  if chosen is not None:
    t, frames, size = chosen
    return frames, size, f'{t}x{rows // t} tokens by the config (the table\'s similarity over time {said})'
  raise ValueError(f'{what}: its position table\'s {rows} token rows fit (frames, px) {fits} and its rows do '
                   'not tell which: pass num_frames (vvt convert --num-frames N) or image_size')


def _block(w: conversion.Writer, name: str, key: str, stage: str, swap_heads: bool = False):
  src = w.src
  mlp = 'MlpBlock_0' if f'{key}/MlpBlock_0/Dense_0/kernel' in src else 'MlpBlock'
  if stage in ('space', 'time') and f'{key}/MultiHeadDotProductAttention_space/query/kernel' in src:
    norms = {'space': 'LayerNorm_space', 'time': 'LayerNorm_time'}
    attns = {'space': 'MultiHeadDotProductAttention_space', 'time': 'MultiHeadDotProductAttention_time'}
    stages = [('space', norms['space'], attns['space']), ('time', norms['time'], attns['time'])]
    mlp_norm = 'LayerNorm_mlp'
  else:
    stages = [(stage, 'LayerNorm_0', 'MultiHeadDotProductAttention_0')]
    mlp_norm = 'LayerNorm_1'
  for st, ln, attn in stages:
    for p in ('scale', 'bias'):
      w.copy(f'{name}/{st}_norm/{p}', f'{key}/{ln}/{p}')
    for part in ('query', 'key', 'value', 'out'):
      for p in ('kernel', 'bias'):
        k = f'{key}/{attn}/{part}/{p}'
        if p == 'bias' and part != 'out' and k not in src:
          continue  # qkv without bias
        if swap_heads and not (part == 'out' and p == 'bias'):
          axis = 1 if (p == 'kernel' and part != 'out') else 0
          v = src.take(k)
          half = v.shape[axis] // 2
          v = np.concatenate([np.take(v, range(half, 2 * half), axis), np.take(v, range(half), axis)], axis)
          w.put(f'{name}/{st}_attention/{part}/{p}', v, k,
                'heads swapped (scenic: first half time, second half space; vvt: first half space)')
        else:
          w.copy(f'{name}/{st}_attention/{part}/{p}', k)
  for p in ('scale', 'bias'):
    w.copy(f'{name}/mlp_norm/{p}', f'{key}/{mlp_norm}/{p}')
  for dense in ('Dense_0', 'Dense_1'):
    for p in ('kernel', 'bias'):
      w.copy(f'{name}/mlp/{dense}/{p}', f'{key}/{mlp}/{dense}/{p}')


def _encoder(w: conversion.Writer, name: str, key: str, stage: str, swap_heads: bool = False) -> dict:
  src = w.src
  layers = sorted({int(k[len(key) + len('/encoderblock_'):].split('/')[0])
                   for k in src.keys() if k.startswith(f'{key}/encoderblock_')})
  if not layers or layers != list(range(len(layers))):
    raise ValueError(f'{src.origin}: {key}/encoderblock_i are missing or not numbered 0..n-1: {layers}')
  for i in layers:
    _block(w, f'{name}/layers/block_{i}', f'{key}/encoderblock_{i}', stage, swap_heads)
  for p in ('scale', 'bias'):
    w.copy(f'{name}/encoder_norm/{p}', f'{key}/encoder_norm/{p}')
  if f'{key}/posembed_input/pos_embedding' in src:
    w.copy(f'{name}/posembed/pos_embedding', f'{key}/posembed_input/pos_embedding')
  first = f'{key}/encoderblock_0'
  q = [k for k in src.keys() if k.startswith(first) and k.endswith('query/kernel')][0]
  mlp = [k for k in src.keys() if k.startswith(first) and k.endswith('Dense_0/kernel')][0]
  return dict(num_layers=len(layers), num_heads=int(src.state[q].shape[1]), mlp_dim=int(src.state[mlp].shape[1]),
              qkv_bias=any(k.startswith(first) and k.endswith('query/bias') for k in src.keys()))


@weight_files.names_its_file
def _model_of(src: conversion.Source, attention: str | None) -> str:
  """The ViViT model of the parameters (detected from their names; Model 4 only when asked for)."""
  if 'SpatialTransformer/encoder_norm/scale' in src:
    detected = 'factorised_encoder'
  elif any('MultiHeadDotProductAttention_space' in k for k in src.keys()):
    detected = 'factorised_self_attention'
  else:
    detected = 'spatiotemporal'
  attention = attention or detected
  if attention not in MODELS:
    raise ValueError(f'attention must be one of {MODELS}, got {attention!r}')
  if not (attention == detected or (attention == 'factorised_dot_product' and detected == 'spatiotemporal')):
    raise ValueError(f'scenic checkpoint: attention={attention!r} asked for, but the parameters are those of '
                     f'{detected!r}')
  return attention


def _tubelet_embedding(w: conversion.Writer, src: conversion.Source) -> tuple[tuple[int, int, int], int]:
  """embedding/kernel, (h, w, C, D) or (t, h, w, C, D) -> embedding/conv; returns (tubelet, hidden size)."""
  shape = src.shape('embedding/kernel')  # from the file's header: a member of another rank is never inflated
  if len(shape) not in (4, 5):
    raise ValueError(f'scenic embedding/kernel has shape {shape}; expected 4 or 5 dimensions')
  kernel = src.take('embedding/kernel')
  if kernel.ndim == 4:  # 'temporal_sampling': 2D patches of stacked frames == tubelets of length 1.
    w.put('embedding/conv/kernel', kernel[None], 'embedding/kernel', '2D (h,w,C,D) -> (1,h,w,C,D)')
  else:
    w.put('embedding/conv/kernel', kernel, 'embedding/kernel')
  w.copy('embedding/conv/bias', 'embedding/bias')
  k5 = w.flat['embedding/conv/kernel']
  return tuple(int(x) for x in k5.shape[:3]), int(k5.shape[-1])


def _factorised_encoder(w: conversion.Writer, src: conversion.Source, tubelet,
                        frames: int | None) -> tuple[bool, int, int, dict]:
  """Model 2's spatial and temporal encoders; returns (class token?, frames, frame size, the model fields the
  encoders fix), frames and size from the two position tables. frames: num_frames or the hint (needed without a temporal
  encoder, the spatial-only baseline)."""
  token = 'cls_SpatialTransformer' in src
  if token:
    w.copy('spatial_encoder/cls', 'cls_SpatialTransformer')
    w.copy('temporal_encoder/cls', 'cls_TemporalTransformer')
  spatial = _encoder(w, 'spatial_encoder', 'SpatialTransformer', 'joint')
  fields = dict(num_layers=spatial['num_layers'], num_heads=spatial['num_heads'], mlp_dim=spatial['mlp_dim'],
                qkv_bias=spatial['qkv_bias'])
  n = src.state['SpatialTransformer/posembed_input/pos_embedding'].shape[1] - int(token)
  if 'TemporalTransformer/encoder_norm/scale' in src:
    temporal = _encoder(w, 'temporal_encoder', 'TemporalTransformer', 'joint')
    nt = src.state['TemporalTransformer/posembed_input/pos_embedding'].shape[1] - int(token)
    fields.update(temporal_layers=temporal['num_layers'], temporal_num_heads=temporal['num_heads'],
                  temporal_mlp_dim=temporal['mlp_dim'])
  else:  # spatial_only_baseline: frames averaged.
    if frames is None:
      raise ValueError('scenic checkpoint without TemporalTransformer (spatial_only_baseline): pass num_frames')
    nt = frames // tubelet[0]
    fields.update(temporal_layers=0)
  grid = math.isqrt(n)
  if grid * grid != n:
    raise ValueError(f'scenic SpatialTransformer pos_embedding has {n} patch rows: not a square grid')
  return token, nt * tubelet[0], grid * tubelet[1], fields


def _single_encoder(w: conversion.Writer, src: conversion.Source, attention: str, tubelet,
                    **grid_args) -> tuple[bool, int, int, dict]:
  """Models 1, 3, 4: one encoder; returns (class token?, frames, frame size, the model fields the encoder fixes),
  frames and size read from the split of its T*N position table (`read_token_grid`, given num_frames / image_size
  / hints in grid_args)."""
  token = 'cls' in src
  if token:
    w.copy('encoder/cls', 'cls')
  stage = {'spatiotemporal': 'joint', 'factorised_self_attention': 'space',
           'factorised_dot_product': 'factorised_dot_product'}[attention]
  enc = _encoder(w, 'encoder', 'Transformer', stage, swap_heads=attention == 'factorised_dot_product')
  key = 'Transformer/posembed_input/pos_embedding'
  table = src.take(key)
  frames, size, how = read_token_grid(table.reshape(-1, table.shape[-1])[int(token):], tubelet,
                                      what=f'{src.origin} ({attention})', **grid_args)
  w.report.loaded = [(n, f'{k} (rows read as {how})' if k == key else k) for n, k in w.report.loaded]
  return token, frames, size, dict(num_layers=enc['num_layers'], num_heads=enc['num_heads'], mlp_dim=enc['mlp_dim'],
                                   qkv_bias=enc['qkv_bias'])


def _head(w: conversion.Writer, src: conversion.Source) -> int | None:
  """pre_logits (if any) and output_projection -> head/; returns representation_size."""
  size = None
  if 'pre_logits/kernel' in src:
    w.copy('head/pre_logits/kernel', 'pre_logits/kernel')
    w.copy('head/pre_logits/bias', 'pre_logits/bias')
    size = int(src.state['pre_logits/kernel'].shape[1])
  w.copy('head/output_projection/kernel', 'output_projection/kernel')
  w.copy('head/output_projection/bias', 'output_projection/bias')
  return size


def convert(state: Mapping[str, np.ndarray], *, attention: str | None = None, num_frames: int | None = None,
            image_size: int | None = None, attention_order: str = 'space_time', frames_hint: int | None = None,
            size_hint: int | None = None) -> conversion.Converted:
  """Scenic ViViT params (flat '/'-joined names) -> vvt params + the exact model fields.

  attention: one of MODELS; detected from the names except Model 4 (looks like Model 1, see module doc).
  num_frames / image_size: derived from the positional embeddings (Model 2: its spatial and temporal tables;
  Models 1, 3, 4: the split of their T*N table, `read_token_grid`); when given, they must fit the tables and
  decide a split the table's rows leave open. Model 2 without a temporal encoder needs num_frames or the hint.
  frames_hint / size_hint: the config's values; they only choose among splits the table's rows cannot tell apart.
  """
  src = conversion.Source(state, 'scenic ViViT checkpoint')
  w = conversion.Writer(src)
  attention = _model_of(src, attention)
  tubelet, hidden = _tubelet_embedding(w, src)
  if attention == 'factorised_encoder':
    token, frames, size, encoder_fields = _factorised_encoder(w, src, tubelet, num_frames or frames_hint)
  else:
    token, frames, size, encoder_fields = _single_encoder(w, src, attention, tubelet, num_frames=num_frames,
                                                          image_size=image_size, frames_hint=frames_hint,
                                                          size_hint=size_hint)
  if num_frames is not None and num_frames != frames:
    raise ValueError(f'scenic checkpoint is for {frames} frames, but num_frames={num_frames} was asked for')
  if image_size is not None and image_size != size:
    raise ValueError(f'scenic checkpoint is for {size}px frames, but image_size={image_size} was asked for')
  fields = dict(family='vivit', attention=attention, variant=conversion.variant_name(hidden, tubelet[1], tubelet[0]),
                tubelet=tubelet, hidden_size=hidden, layer_norm_eps=1e-6, gelu_approximate=True,
                positional_embedding='joint', attention_order=attention_order, temporal_projection=False,
                dropout_rate=0.0, **encoder_fields, representation_size=_head(w, src), num_frames=frames,
                image_size=size, classifier='token' if token else 'gap',
                num_classes=int(src.state['output_projection/kernel'].shape[1]))
  return w.result(fields)


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source scenic_vivit`. Only Model 4 cannot be told from the names (it looks like Model 1): the
  config decides that one case. Model 2's tables say its frames and frame size (the caller checks those asked for);
  Models 1, 3, 4 read them from the split of their position table, where the config's values only choose among
  splits its rows leave open and those asked for decide."""
  two_stage = any(k.startswith('SpatialTransformer/') for k in state)
  fixed = two_stage and any(k.startswith('TemporalTransformer/') for k in state)
  factorised = ask.hint('attention') == 'factorised_dot_product' and not two_stage
  return convert(state, attention='factorised_dot_product' if factorised else None,
                 num_frames=None if fixed else ask.num_frames, image_size=None if two_stage else ask.image_size,
                 frames_hint=ask.hint('num_frames'), size_hint=ask.hint('image_size'),
                 attention_order=ask.hint('attention_order') or 'space_time')
