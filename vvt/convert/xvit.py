"""Official X-ViT checkpoints (1adrianb/video-transformers, PyTorch) -> vvt space-time mixing + TA head.

Names (after an optional `module.` prefix): backbone `base_model.{cls_token (1,1,D), pos_embed (1,1+G*G,D),
temp_embed (1,T,1,D), patch_embed.proj, blocks.i.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}, norm}`;
TA head `consensus.{cls_token, temporal_encoder.i.{norm1, attn.qkv (no bias), attn.proj, norm2, mlp.fc1,
mlp.fc2}, mlp_head.0 (LayerNorm), mlp_head.1 (Linear D->MLP_DIM), mlp_head.4 (Linear -> classes)}`.
`new_fc.*` exists in checkpoints but is unused with the TA ('vit') consensus: it is reported as unused.

Quirks expressed exactly:
  * `pos_embed` always holds the grid of a 224-pixel frame (PatchEmbed is built with img_size=224); for other
    frame sizes the official forward resizes it with torch bicubic interpolation, scale_factor
    (image_size/16)/(224/16), align_corners=False. The converter does that resize once (`torch_bicubic_resize`,
    a float64 re-implementation of torch's kernel: A = -0.75, border indices clamped).
  * `temp_embed` is added to every token of frame t, the per-frame class token included (vvt: per-frame class
    token + separable embedding). It has the backbone's own `num_frames` rows, and XVIT never passes the clip
    length (VisionTransformer default num_frames=8, vit.py:171; XVIT._prepare_base_model,
    video_model_builder.py:106-121), so released checkpoints have 8 rows. forward_features adds it to groups of
    8 consecutive frames (vit.py:341-350): at 16 frames frame t gets row t mod 8, never an interpolation.
    vvt: `time_embedding_rows` = the rows of the file, `num_frames` = the clip length asked for (a multiple).
  * Keys and values of every backbone block (configs: LOCATIONS_LIST [0..14], i.e. all 12 blocks) are mixed
    over time on the flat channel index (head*d_h + j): channels [0, D/shift_div) from frame t+1, the next
    D/shift_div from t-1, zeros at the clip ends (vvt `temporal_shift`; temporal_shift.py:51-73). Frames are
    grouped by XVIT.NUM_SEGMENTS (temporal_shift.py:53-54): only frames of one segment mix; the TA head then
    attends over all frames (video_model_builder.py:178-180). Neither shift_div nor NUM_SEGMENTS is in the
    weights: shift_div defaults to the official default 8 (defaults.py:120; Kinetics configs 8, SSv2 4),
    num_segments to the rows of temp_embed (defaults.py:112 NUM_SEGMENTS = 8 = the backbone's num_frames;
    Kinetics 16-frame configs 8, SSv2 16).
  * Backbone: LayerNorm eps 1e-6, exact GELU, qkv bias. TA head (VitHead): no qkv bias, LayerNorm eps 1e-5,
    MLP ratio 4, no temporal position embedding; mlp_head LayerNorm eps 1e-5.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import torch_layout
from vvt.models import embedding


def torch_bicubic_resize(grid: np.ndarray, scale_factor: float) -> np.ndarray:
  """(G, G, D) -> (floor(G*s), floor(G*s), D) as torch F.interpolate(mode='bicubic', scale_factor=s,
  align_corners=False) does on the (1, D, G, G) tensor (float64 inside)."""
  out = (int(math.floor(grid.shape[0] * scale_factor)), int(math.floor(grid.shape[1] * scale_factor)))
  for axis in (0, 1):
    w = embedding.cubic_weights(grid.shape[axis], out[axis], scale=scale_factor)
    grid = np.moveaxis(np.tensordot(w, grid.astype(np.float64), axes=((1,), (axis,))), 0, axis)
  return grid.astype(np.float32)


def _spatial_embedding(w: conversion.Writer, src: conversion.Source, image_size: int, patch: int) -> None:
  """base_model.pos_embed (1, 1 + g*g, D) -> encoder/posembed/pos_embedding, its grid resized (torch bicubic) to
  the patches of an `image_size` frame."""
  pos = src.take('base_model.pos_embed')
  g = math.isqrt(pos.shape[1] - 1)
  if g * g != pos.shape[1] - 1:
    raise ValueError(f'X-ViT base_model.pos_embed has {pos.shape[1] - 1} patch rows: not a square grid')
  if image_size == 224:
    if g * patch != 224:
      raise ValueError(f'X-ViT base_model.pos_embed is a {g}x{g} grid of {patch}px patches, not a 224px frame')
    w.put('encoder/posembed/pos_embedding', pos, 'base_model.pos_embed')
    return
  scale = (image_size / 16) / (224 / 16)
  grid = torch_bicubic_resize(pos[0, 1:].reshape(g, g, -1), scale)
  if grid.shape[0] != image_size // patch:
    raise ValueError(f'X-ViT: resizing the {g}x{g} pos_embed grid by {scale} gives {grid.shape[0]} rows, '
                     f'not the {image_size // patch} patches of a {image_size}px frame')
  pos = np.concatenate([pos[:, :1], grid.reshape(1, -1, pos.shape[-1])], axis=1)
  how = f'patch grid {g}x{g} resized to {grid.shape[0]}x{grid.shape[1]} (torch bicubic, scale {scale:.6g})'
  w.put('encoder/posembed/pos_embedding', pos, 'base_model.pos_embed', how)


def _time_embedding(w: conversion.Writer, src: conversion.Source, num_frames: int | None,
                    num_segments: int | None) -> tuple[int, int, int]:
  """base_model.temp_embed (1, R, 1, D) -> encoder/posembed/time_embedding (1, R, D); returns
  (num_frames, num_segments, R) with the defaults (R) filled in and checked."""
  temp = src.take('base_model.temp_embed')
  rows = temp.shape[1]
  asked = num_frames
  num_frames = num_frames or rows
  if num_frames % rows:
    raise ValueError(f'X-ViT: num_frames={num_frames} is not a multiple of the {rows} rows of base_model.temp_embed '
                     f'(the official backbone adds row t mod {rows} to frame t; it never interpolates)')
  num_segments = num_segments or rows
  if num_frames % num_segments:
    default = '' if asked else f'; num_frames defaults to the {rows} rows of temp_embed: pass num_frames'
    raise ValueError(f'X-ViT: num_frames={num_frames} is not a multiple of num_segments={num_segments} '
                     f'(XVIT.NUM_SEGMENTS: frames mix within consecutive segments of that many frames){default}')
  how = f'(1,{rows},1,D) -> (1,{rows},D)'
  if num_frames != rows:
    how += (f'; for {num_frames} frames used periodically, frame t gets row t mod {rows} '
            f'(model.time_embedding_rows={rows}, as the official forward_features)')
  w.put('encoder/posembed/time_embedding', temp.reshape(1, rows, -1), 'base_model.temp_embed', how)
  return num_frames, num_segments, rows


def _blocks(w: conversion.Writer, src: conversion.Source, prefix: str, name: str, stage: str,
            heads: int) -> tuple[int, bool, int]:
  """The transformer blocks `prefix`.0..n-1 -> `name`/block_i; returns (n, whether every qkv has a bias, MLP
  width)."""
  layers = sorted({int(k[len(prefix) + 1:].split('.')[0]) for k in src.state if k.startswith(prefix + '.')})
  if not layers or layers != list(range(len(layers))):
    raise ValueError(f'X-ViT checkpoint: {prefix}.i blocks missing or not numbered 0..n-1: {layers}')
  bias = True
  for i in layers:
    bias &= torch_layout.torch_vit_block(w, f'{name}/block_{i}', f'{prefix}.{i}', heads, norm=f'{stage}_norm',
                                   attention=f'{stage}_attention')
  return len(layers), bias, src.state[f'{prefix}.0.mlp.fc1.weight'].shape[0]


def convert(state: Mapping[str, np.ndarray], *, num_heads: int | None = None, head_num_heads: int | None = None,
            image_size: int = 224, shift_div: int = 8, num_frames: int | None = None,
            num_segments: int | None = None) -> conversion.Converted:
  """X-ViT state dict -> vvt params + the exact model fields.

  num_heads / head_num_heads: backbone / TA-head heads (not stored; default hidden_size // 64 and num_heads).
  image_size: the frame size the model runs at (the official config's DATA.TRAIN_CROP_SIZE).
  shift_div: XVIT.SHIFT_DIV (default 8, the official default; the SSv2 config uses 4).
  num_frames: the clip length (DATA.NUM_FRAMES), a multiple of the R rows of temp_embed (default R).
  num_segments: XVIT.NUM_SEGMENTS, a divisor of num_frames (default R: the official default 8 = R).
  """
  state = conversion.strip_prefix(state, ('module.',))
  src = conversion.Source(state, 'X-ViT checkpoint')
  w = conversion.Writer(src)
  if 'base_model.pre_logits.fc.weight' in src:
    raise ValueError('X-ViT checkpoint has base_model.pre_logits (representation_size); vvt does not model a '
                     'per-frame pre-logits layer before the TA head')
  if 'consensus.cls_token' not in src:
    raise ValueError("X-ViT checkpoint has no consensus.* (TA head): only CONSENSUS_TYPE='vit' is supported")

  kernel = torch_layout.torch_patch_embedding(w, 'embedding/conv', 'base_model.patch_embed.proj')
  hidden, _, ph, pw = kernel.shape
  num_heads = num_heads or max(hidden // 64, 1)
  head_num_heads = head_num_heads or num_heads
  if image_size % ph:
    raise ValueError(f'X-ViT: image_size={image_size} is not a multiple of the patch size {ph}')
  _spatial_embedding(w, src, image_size, ph)
  num_frames, num_segments, rows = _time_embedding(w, src, num_frames, num_segments)
  w.copy('encoder/cls', 'base_model.cls_token')

  num_layers, qkv_bias, mlp_dim = _blocks(w, src, 'base_model.blocks', 'encoder/layers', 'space', num_heads)
  torch_layout.torch_layer_norm(w, 'encoder/encoder_norm', 'base_model.norm')
  w.copy('temporal_head/cls', 'consensus.cls_token')
  head_layers, head_bias, head_mlp = _blocks(w, src, 'consensus.temporal_encoder', 'temporal_head/layers', 'joint',
                                             head_num_heads)
  if head_mlp % hidden:
    raise ValueError(f'X-ViT TA head MLP width {head_mlp} is not a multiple of hidden_size {hidden}')
  torch_layout.torch_layer_norm(w, 'head/head_norm', 'consensus.mlp_head.0')
  torch_layout.torch_dense(w, 'head/head_hidden', 'consensus.mlp_head.1')
  torch_layout.torch_dense(w, 'head/output_projection', 'consensus.mlp_head.4')

  fields = dict(
      family='xvit', attention='space_time_mixing', variant=conversion.variant_name(hidden, ph), tubelet=(1, ph, pw),
      num_frames=int(num_frames),
      image_size=image_size, num_classes=int(src.state['consensus.mlp_head.4.weight'].shape[0]),
      hidden_size=int(hidden), num_layers=num_layers, num_heads=int(num_heads), mlp_dim=int(mlp_dim),
      classifier='token', class_token='per_frame', positional_embedding='separable',
      frame_aggregation='temporal_attention', attention_order='space_time', temporal_projection=False,
      time_embedding_rows=int(rows),
      mixing=dict(window=1, shift_div=int(shift_div), summary_token=False, num_segments=int(num_segments)),
      temporal_head=dict(num_layers=head_layers, num_heads=int(head_num_heads), mlp_ratio=head_mlp // hidden,
                         qkv_bias=bool(head_bias), layer_norm_eps=1e-5,
                         mlp_dim=int(src.state['consensus.mlp_head.1.weight'].shape[0])),
      layer_norm_eps=1e-6, gelu_approximate=False, qkv_bias=bool(qkv_bias), representation_size=None)
  return w.result(fields)


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source xvit`: what the weights do not say (heads, frame size, shift_div, num_segments) from the
  config, the official defaults (224 px, shift_div 8) without one."""
  head, mixing = ask.hint('temporal_head'), ask.hint('mixing')
  return convert(state, num_heads=ask.hint('num_heads'), head_num_heads=head.get('num_heads') if head else None,
                 image_size=ask.image_size or ask.hint('image_size') or 224,
                 shift_div=(mixing.get('shift_div') if mixing else None) or 8,
                 num_frames=ask.num_frames, num_segments=ask.raw('mixing', 'num_segments'))
