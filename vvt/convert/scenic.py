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
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from vvt.convert import common

MODELS = ('spatiotemporal', 'factorised_encoder', 'factorised_self_attention', 'factorised_dot_product')


def _block(w: common.Writer, name: str, key: str, stage: str, swap_heads: bool = False):
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


def _encoder(w: common.Writer, name: str, key: str, stage: str, swap_heads: bool = False) -> dict:
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


@common.names_its_file
def convert(state: Mapping[str, np.ndarray], *, attention: str | None = None, num_frames: int | None = None,
            image_size: int | None = None, attention_order: str = 'space_time') -> common.Converted:
  """Scenic ViViT params (flat '/'-joined names) -> vvt params + the exact model fields.

  attention: one of MODELS; detected from the names except Model 4 (looks like Model 1, see module doc).
  num_frames / image_size: derived from the positional embeddings where possible (Model 2 always; Models 1,
  3, 4 need one of the two, since their table covers T*N tokens).
  """
  src = common.Source(state, 'scenic ViViT checkpoint')
  w = common.Writer(src)
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

  kernel = src.take('embedding/kernel')
  if kernel.ndim == 4:  # 'temporal_sampling': 2D patches of stacked frames == tubelets of length 1.
    w.put('embedding/conv/kernel', kernel[None], 'embedding/kernel', '2D (h,w,C,D) -> (1,h,w,C,D)')
  elif kernel.ndim == 5:
    w.put('embedding/conv/kernel', kernel, 'embedding/kernel')
  else:
    raise ValueError(f'scenic embedding/kernel has shape {kernel.shape}; expected 4 or 5 dimensions')
  w.copy('embedding/conv/bias', 'embedding/bias')
  k5 = w.flat['embedding/conv/kernel']
  tubelet = tuple(int(x) for x in k5.shape[:3])
  hidden = int(k5.shape[-1])

  fields = dict(family='vivit', attention=attention, variant=common.variant_name(hidden, tubelet[1], tubelet[0]), tubelet=tubelet,
                hidden_size=hidden, layer_norm_eps=1e-6, gelu_approximate=True, positional_embedding='joint',
                attention_order=attention_order, temporal_projection=False, dropout_rate=0.0)

  if attention == 'factorised_encoder':
    token = 'cls_SpatialTransformer' in src
    if token:
      w.copy('spatial_encoder/cls', 'cls_SpatialTransformer')
      w.copy('temporal_encoder/cls', 'cls_TemporalTransformer')
    sp = _encoder(w, 'spatial_encoder', 'SpatialTransformer', 'joint')
    n = src.state['SpatialTransformer/posembed_input/pos_embedding'].shape[1] - int(token)
    if 'TemporalTransformer/encoder_norm/scale' in src:
        tp = _encoder(w, 'temporal_encoder', 'TemporalTransformer', 'joint')
        nt = src.state['TemporalTransformer/posembed_input/pos_embedding'].shape[1] - int(token)
        fields.update(temporal_layers=tp['num_layers'], temporal_num_heads=tp['num_heads'],
                      temporal_mlp_dim=tp['mlp_dim'])
    else:  # spatial_only_baseline: frames averaged.
      if num_frames is None:
        raise ValueError('scenic checkpoint without TemporalTransformer (spatial_only_baseline): pass num_frames')
      nt = num_frames // tubelet[0]
      fields.update(temporal_layers=0)
    grid = math.isqrt(n)
    if grid * grid != n:
      raise ValueError(f'scenic SpatialTransformer pos_embedding has {n} patch rows: not a square grid')
    derived_frames, derived_size = nt * tubelet[0], grid * tubelet[1]
    fields.update(num_layers=sp['num_layers'], num_heads=sp['num_heads'], mlp_dim=sp['mlp_dim'],
                  qkv_bias=sp['qkv_bias'])
  else:
    token = 'cls' in src
    if token:
      w.copy('encoder/cls', 'cls')
    stage = {'spatiotemporal': 'joint', 'factorised_self_attention': 'space',
             'factorised_dot_product': 'factorised_dot_product'}[attention]
    enc = _encoder(w, 'encoder', 'Transformer', stage, swap_heads=attention == 'factorised_dot_product')
    rows = src.state['Transformer/posembed_input/pos_embedding'].shape[1] - int(token)
    if image_size is not None:
      n = (image_size // tubelet[1]) * (image_size // tubelet[2])
      if rows % n:
        raise ValueError(f'scenic pos_embedding has {rows} token rows, not a multiple of the {n} patches of a '
                         f'{image_size}x{image_size} frame')
      derived_frames, derived_size = rows // n * tubelet[0], image_size
    elif num_frames is not None:
      nt = num_frames // tubelet[0]
      grid = math.isqrt(rows // nt) if rows % nt == 0 else -1
      if grid < 1 or grid * grid * nt != rows:
        raise ValueError(f'scenic pos_embedding has {rows} token rows: not {nt} temporal indices of a square grid')
      derived_frames, derived_size = num_frames, grid * tubelet[1]
    else:
      raise ValueError(f'scenic {attention} checkpoint: pass num_frames or image_size (the positional embedding '
                       f'covers T*N = {rows} tokens and does not say how they split)')
    fields.update(num_layers=enc['num_layers'], num_heads=enc['num_heads'], mlp_dim=enc['mlp_dim'],
                  qkv_bias=enc['qkv_bias'])
  if num_frames is not None and num_frames != derived_frames:
    raise ValueError(f'scenic checkpoint is for {derived_frames} frames, but num_frames={num_frames} was asked for')
  if image_size is not None and image_size != derived_size:
    raise ValueError(f'scenic checkpoint is for {derived_size}px frames, but image_size={image_size} was asked for')

  if 'pre_logits/kernel' in src:
    w.copy('head/pre_logits/kernel', 'pre_logits/kernel')
    w.copy('head/pre_logits/bias', 'pre_logits/bias')
    fields['representation_size'] = int(src.state['pre_logits/kernel'].shape[1])
  else:
    fields['representation_size'] = None
  w.copy('head/output_projection/kernel', 'output_projection/kernel')
  w.copy('head/output_projection/bias', 'output_projection/bias')
  fields.update(num_frames=derived_frames, image_size=derived_size, classifier='token' if token else 'gap',
                num_classes=int(src.state['output_projection/kernel'].shape[1]))
  return w.result(fields)
