"""Hugging Face `VivitForVideoClassification` -> vvt ViViT Model 1 (spatiotemporal).

Two generations of key names are read:
  old (transformers < 5): `vivit.encoder.layer.i.attention.attention.{query,key,value}`,
      `attention.output.dense`, `intermediate.dense`, `output.dense`, `layernorm_before`, `layernorm_after`;
  new (transformers 5): `vivit.layers.i.attention.{q_proj,k_proj,v_proj,o_proj}`, `mlp.fc1`, `mlp.fc2`,
      `layernorm_before`, `layernorm_after`.
Common: `vivit.embeddings.cls_token` (1,1,D), `vivit.embeddings.position_embeddings` (1, 1+T*N, D) over tokens in
(t, h, w) order, `vivit.embeddings.patch_embeddings.projection` Conv3d (D, C, t, h, w), `vivit.layernorm`,
`classifier`. An unused `vivit.pooler.*` is reported as unused.
Numerics from the HF config: `layer_norm_eps` (default 1e-6), `hidden_act` (default 'gelu_fast', the tanh
formula -> gelu_approximate=True), `qkv_bias`.
"""
from __future__ import annotations

import math
import re
from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import torch_layout
from vvt.convert import weight_files
from vvt.models import frame_size

# transformers' VivitConfig defaults (absent from a diff-only config.json).
HF_DEFAULTS = dict(num_attention_heads=12, layer_norm_eps=1e-6, hidden_act='gelu_fast', num_frames=32,
                   image_size=224)
_LAYER = re.compile(r'^vivit\.(?:encoder\.layer|layers)\.(\d+)\.')

OLD, NEW = torch_layout.HF_OLD, torch_layout.HF_NEW


@weight_files.names_its_file
def convert(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *, num_heads: int | None = None,
            num_frames: int | None = None, image_size: int | None = None) -> conversion.Converted:
  """HF ViViT state dict (+ config.json dict) -> vvt params + the exact model fields."""
  if hf_config:  # config.json written by save_pretrained holds only the fields that differ from the defaults
    hf_config = {**HF_DEFAULTS, **hf_config}
  hf_config = dict(hf_config or {})
  if hf_config.get('model_type', 'vivit') != 'vivit':
    raise ValueError(f"hf_config.model_type is {hf_config.get('model_type')!r}, not 'vivit'")
  src = conversion.Source(state, 'Hugging Face ViViT checkpoint')
  w = conversion.Writer(src)
  kernel = torch_layout.torch_patch_embedding(w, 'embedding/conv', 'vivit.embeddings.patch_embeddings.projection')
  hidden, _, tt, th, tw = kernel.shape
  num_heads = num_heads or hf_config.get('num_attention_heads') or max(hidden // 64, 1)
  num_frames = num_frames or hf_config.get('num_frames')
  image_size = image_size or hf_config.get('image_size')  # an int, or [H, W] (transformers takes both)
  w.copy('encoder/cls', 'vivit.embeddings.cls_token')
  pos = src.take('vivit.embeddings.position_embeddings')
  rows = pos.shape[1] - 1
  if num_frames is None and image_size is None:
    raise ValueError('HF ViViT: pass num_frames or image_size (or the HF config), the position table covers '
                     f'T*N = {rows} tokens')
  if image_size is None:
    per_frame = rows // (num_frames // tt)
    image_size = math.isqrt(per_frame) * th
  height, width = frame_size.parse(image_size, 'hf_config.image_size')
  image_size = frame_size.config_value((height, width))
  if num_frames is None:
    num_frames = rows // ((height // th) * (width // tw)) * tt
  if (num_frames // tt) * (height // th) * (width // tw) != rows:
    raise ValueError(f'HF ViViT position_embeddings has {rows} token rows, not ({num_frames}/{tt}) x '
                     f'({height}/{th}) x ({width}/{tw}) for num_frames={num_frames}, image_size={image_size}')
  w.put('encoder/posembed/pos_embedding', pos, 'vivit.embeddings.position_embeddings')

  layers = sorted({int(m.group(1)) for k in state if (m := _LAYER.match(k))})
  if not layers or layers != list(range(len(layers))):
    raise ValueError(f'HF ViViT: layers missing or not numbered 0..n-1: {layers}')
  qkv_bias = True
  for i in layers:
    prefix = f'vivit.layers.{i}' if f'vivit.layers.{i}.layernorm_before.weight' in src else f'vivit.encoder.layer.{i}'
    names = NEW if f'{prefix}.{NEW["q"]}.weight' in src else OLD
    qkv_bias &= torch_layout.torch_separate_block(w, f'encoder/layers/block_{i}', prefix, num_heads, names)
  torch_layout.torch_layer_norm(w, 'encoder/encoder_norm', 'vivit.layernorm')
  torch_layout.torch_dense(w, 'head/output_projection', 'classifier')
  mlp_dim = w.flat['encoder/layers/block_0/mlp/Dense_0/kernel'].shape[1]
  fields = dict(
      family='vivit', attention='spatiotemporal', variant=conversion.variant_name(hidden, th, tt),
      tubelet=(int(tt), int(th), int(tw)),
      num_frames=int(num_frames), image_size=image_size,
      num_classes=int(src.state['classifier.weight'].shape[0]), hidden_size=int(hidden), num_layers=len(layers),
      num_heads=int(num_heads), mlp_dim=int(mlp_dim), classifier='token', class_token='global',
      positional_embedding='joint', layer_norm_eps=float(hf_config.get('layer_norm_eps', 1e-6)),
      gelu_approximate=torch_layout.gelu_approximate_of(hf_config.get('hidden_act', 'gelu_fast')),
      qkv_bias=bool(qkv_bias), representation_size=None, temporal_projection=False)
  return w.result(fields)


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source hf_vivit`: config.json's sizes, else the vvt config's and those asked."""
  if ask.hf_config:
    return convert(state, ask.hf_config)
  return convert(state, ask.hf_config, num_heads=ask.hint('num_heads'), num_frames=ask.frames_hint,
                 image_size=ask.image_size)


# ------------------------------------------------------------------------------ vvt -> Hugging Face

HF_CLASS = 'VivitForVideoClassification'


def to_hf(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt joint space-time attention with a class token (ViViT Model 1) -> Hugging Face VivitForVideoClassification:
  (config dict, state dict in the names save_pretrained writes, `OLD`). The inverse of `convert`.

  model_cfg: the resolved model config. What the class expresses (else NotExpressible naming the field): one
  global class token read by the classifier, one learned table over the class token and the T*N tubelets
  (positional_embedding='joint'), any tubelet; one LayerNorm eps throughout; exact or tanh GELU; qkv biases all
  or none (a vvt model without the key bias gets a zero one: it never changes attention)."""
  m = model_cfg
  torch_layout.require(m, 'attention', ('spatiotemporal', 'joint'), HF_CLASS)
  torch_layout.require(m, 'classifier', 'token', HF_CLASS)
  torch_layout.require(m, 'class_token', 'global', HF_CLASS)
  torch_layout.require(m, 'positional_embedding', 'joint', HF_CLASS, 'one learned table over all tokens')
  torch_layout.require(m, 'encoder_norm_eps', m.layer_norm_eps, HF_CLASS, 'the final LayerNorm has layer_norm_eps')
  w = torch_layout.TorchState(params, HF_CLASS)
  w.patch_embedding('vivit.embeddings.patch_embeddings.projection', 'embedding/conv')
  w.copy('vivit.embeddings.cls_token', 'encoder/cls')
  w.copy('vivit.embeddings.position_embeddings', 'encoder/posembed/pos_embedding')
  biases = (True, m.key_bias, True) if m.qkv_bias else (None,) * 3
  for i in range(m.num_layers):
    w.separate_block(f'vivit.encoder.layer.{i}', f'encoder/layers/block_{i}', OLD, biases)
  w.layer_norm('vivit.layernorm', 'encoder/encoder_norm')
  w.dense('classifier', 'head/output_projection')
  config = dict(
      model_type='vivit', architectures=[HF_CLASS], image_size=torch_layout.hf_image_size(m, HF_CLASS, True),
      num_frames=int(m.num_frames),
      tubelet_size=[int(x) for x in m.tubelet], num_channels=3, hidden_size=int(m.hidden_size),
      num_hidden_layers=int(m.num_layers), num_attention_heads=int(m.num_heads), intermediate_size=int(m.mlp_dim),
      hidden_act=torch_layout.hf_activation(m.gelu_approximate, 'gelu_fast'), hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0, initializer_range=0.02, layer_norm_eps=float(m.layer_norm_eps),
      qkv_bias=bool(m.qkv_bias), pooler_output_size=int(m.hidden_size), pooler_act='tanh')
  return config, w.result()
