"""TimeSformer checkpoints -> vvt: the official PyTorch code (facebookresearch/TimeSformer) and Hugging Face
`TimesformerForVideoClassification`.

Official names (after an optional `model.` / `module.` prefix): `cls_token` (1,1,D), `pos_embed` (1,1+N,D),
`time_embed` (1,T,D) (not in space_only), `patch_embed.proj` Conv2d, `blocks.i.{norm1, attn.qkv, attn.proj,
norm2, mlp.fc1, mlp.fc2}` and for divided space-time `blocks.i.{temporal_norm1, temporal_attn.qkv,
temporal_attn.proj, temporal_fc}`, then `norm`, `head`. Hugging Face names map 1:1 onto these (see `HF_NAMES`).

How each attention type is expressed in vvt (the token order differs — TimeSformer is space-major (h, w, t),
vvt is (t, h, w) — but attention within a group does not depend on token order, so only weights move):
  divided_space_time  attention='divided' (time then space, `time_projection` = temporal_fc), one global class
                      token: space row 0 of pos_embed, no time embedding, left out of temporal attention,
                      copied into every frame's spatial attention and its outputs averaged.
  joint_space_time    attention='joint', global class token, separable space + time embeddings.
  space_only          attention='space', a class token per frame, space embedding only; official code averages
                      the frames before the final LayerNorm (frame_aggregation='mean_before_norm'). Hugging Face's
                      space_only returns one logit row per frame (batch B*T): vvt returns their mean
                      (frame_aggregation='mean', identical because the classifier is linear).
Both use exact (erf) GELU and LayerNorm eps 1e-6 (Hugging Face: `layer_norm_eps` of its config).
"""
from __future__ import annotations

import math
import re
from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import torch_layout
from vvt.convert import weight_files

ATTENTION_TYPES = {'divided_space_time': 'divided', 'joint_space_time': 'joint', 'space_only': 'space'}

# Hugging Face suffix inside encoder.layer.i -> official suffix inside blocks.i (longest match first).
HF_LAYER_NAMES = (
    ('temporal_attention.attention.qkv', 'temporal_attn.qkv'),
    ('temporal_attention.output.dense', 'temporal_attn.proj'),
    ('attention.attention.qkv', 'attn.qkv'),
    ('attention.output.dense', 'attn.proj'),
    ('temporal_dense', 'temporal_fc'),
    ('temporal_layernorm', 'temporal_norm1'),
    ('layernorm_before', 'norm1'),
    ('layernorm_after', 'norm2'),
    ('intermediate.dense', 'mlp.fc1'),
    ('output.dense', 'mlp.fc2'),
)
HF_TOP_NAMES = {
    'timesformer.embeddings.cls_token': 'cls_token',
    'timesformer.embeddings.position_embeddings': 'pos_embed',
    'timesformer.embeddings.time_embeddings': 'time_embed',
    'timesformer.embeddings.patch_embeddings.projection.weight': 'patch_embed.proj.weight',
    'timesformer.embeddings.patch_embeddings.projection.bias': 'patch_embed.proj.bias',
    'timesformer.layernorm.weight': 'norm.weight',
    'timesformer.layernorm.bias': 'norm.bias',
    'classifier.weight': 'head.weight',
    'classifier.bias': 'head.bias',
}
# transformers' TimesformerConfig defaults (absent from a diff-only config.json).
HF_DEFAULTS = dict(num_attention_heads=12, layer_norm_eps=1e-6, hidden_act='gelu', num_frames=8, image_size=224,
                   attention_type='divided_space_time')
_HF_LAYER = re.compile(r'^timesformer\.(?:encoder\.layer|layers)\.(\d+)\.(.+)$')


def hf_to_official_names(state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Renames a Hugging Face TimeSformer state dict to the official code's names (unknown keys kept as they are)."""
  out = {}
  for key, value in state.items():
    new = HF_TOP_NAMES.get(key)
    m = _HF_LAYER.match(key)
    if new is None and m:
      layer, rest = m.groups()
      for hf, official in HF_LAYER_NAMES:
        if rest.startswith(hf + '.'):
          new = f'blocks.{layer}.{official}{rest[len(hf):]}'
          break
    out[new or key] = value
  return weight_files.with_path(out, state)


def detect_attention_type(state: Mapping[str, np.ndarray]) -> str:
  if any('temporal_attn.' in k for k in state):
    return 'divided_space_time'
  return 'joint_space_time' if 'time_embed' in state else 'space_only'


@weight_files.names_its_file
def _space_embedding(w: conversion.Writer, src: conversion.Source, patch: int, image_size: int | None) -> int:
  """pos_embed (1, 1 + g*g, D) -> encoder/posembed/pos_embedding; returns the frame size g * patch."""
  pos = src.take('pos_embed')
  grid = math.isqrt(pos.shape[1] - 1)
  if grid * grid != pos.shape[1] - 1:
    raise ValueError(f'{src.origin}: pos_embed has {pos.shape[1] - 1} patch rows, not a square grid')
  if image_size is not None and image_size != grid * patch:
    raise ValueError(f'{src.origin}: pos_embed is a {grid}x{grid} grid of {patch}-pixel patches (image_size '
                     f'{grid * patch}), but image_size={image_size} was asked for')
  w.put('encoder/posembed/pos_embedding', pos, 'pos_embed')
  return grid * patch


def _time_embedding(w: conversion.Writer, src: conversion.Source, attention_type: str, num_frames: int | None) -> int:
  """time_embed (1, T, D) -> encoder/posembed/time_embedding; returns T (space_only stores none: num_frames)."""
  if attention_type == 'space_only':
    if num_frames is None:
      raise ValueError(f'{src.origin}: a space_only checkpoint does not store the number of frames; pass num_frames')
    return num_frames
  time = src.take('time_embed')
  if num_frames is not None and num_frames != time.shape[1]:
    raise ValueError(f'{src.origin}: time_embed has {time.shape[1]} frames, but num_frames={num_frames} was asked for')
  w.put('encoder/posembed/time_embedding', time, 'time_embed')
  return time.shape[1]


def _blocks(w: conversion.Writer, src: conversion.Source, attention: str, num_heads: int) -> tuple[int, bool]:
  """blocks.i -> encoder/layers/block_i (divided attention: the temporal stage and its projection too);
  returns (number of blocks, whether every qkv has a bias)."""
  layers = sorted({int(k.split('.')[1]) for k in src.state if k.startswith('blocks.')})
  if layers != list(range(len(layers))):
    raise ValueError(f'{src.origin}: blocks are not numbered 0..n-1: {layers}')
  qkv_bias = True
  stage = {'divided': 'space', 'joint': 'joint', 'space': 'space'}[attention]
  for i in layers:
    b, name = f'blocks.{i}', f'encoder/layers/block_{i}'
    if attention == 'divided':
      torch_layout.torch_layer_norm(w, f'{name}/time_norm', f'{b}.temporal_norm1')
      torch_layout.torch_qkv(w, f'{name}/time_attention', f'{b}.temporal_attn.qkv', num_heads)
      torch_layout.torch_attention_out(w, f'{name}/time_attention/out', f'{b}.temporal_attn.proj', num_heads)
      torch_layout.torch_dense(w, f'{name}/time_projection', f'{b}.temporal_fc')
    qkv_bias &= torch_layout.torch_vit_block(w, name, b, num_heads, norm=f'{stage}_norm',
                                             attention=f'{stage}_attention')
  return len(layers), qkv_bias


def convert_official(state: Mapping[str, np.ndarray], *, num_heads: int | None = None,
                     attention_type: str | None = None, num_frames: int | None = None,
                     image_size: int | None = None, layer_norm_eps: float = 1e-6,
                     gelu_approximate: bool = False, space_only_aggregation: str = 'mean_before_norm',
                     origin: str = 'TimeSformer checkpoint') -> conversion.Converted:
  """Official TimeSformer state dict -> vvt params + the exact model fields.

  num_heads: not stored in the weights (default hidden_size // 64, as in ViT-B/L). attention_type: detected
  from the keys if None. num_frames: from `time_embed` (required for space_only). image_size: from the
  number of `pos_embed` rows (square grids).
  """
  state = conversion.strip_prefix(state, ('module.', 'model.'))
  src = conversion.Source(state, origin)
  w = conversion.Writer(src)
  detected = detect_attention_type(state)
  attention_type = attention_type or detected
  if attention_type not in ATTENTION_TYPES:
    raise ValueError(f'attention_type must be one of {tuple(ATTENTION_TYPES)}, got {attention_type!r}')
  if attention_type != detected:
    raise ValueError(f'{origin}: attention_type={attention_type!r} but the parameters are those of {detected!r}')
  attention = ATTENTION_TYPES[attention_type]

  kernel = torch_layout.torch_patch_embedding(w, 'embedding/conv', 'patch_embed.proj')
  hidden, _, ph, pw = kernel.shape
  num_heads = num_heads or max(hidden // 64, 1)
  image_size = _space_embedding(w, src, ph, image_size)
  num_frames = _time_embedding(w, src, attention_type, num_frames)
  w.copy('encoder/cls', 'cls_token')
  num_layers, qkv_bias = _blocks(w, src, attention, num_heads)
  torch_layout.torch_layer_norm(w, 'encoder/encoder_norm', 'norm')
  head = src.take('head.weight')
  w.put('head/output_projection/kernel', head.T, 'head.weight', 'transpose (out,in)->(in,out)')
  w.copy('head/output_projection/bias', 'head.bias')

  mlp_dim = src.state['blocks.0.mlp.fc1.weight'].shape[0]
  fields = dict(
      family='timesformer', attention=attention, variant=conversion.variant_name(hidden, ph), tubelet=(1, ph, pw),
      num_frames=num_frames, image_size=image_size, num_classes=int(head.shape[0]), hidden_size=int(hidden),
      num_layers=num_layers,
      num_heads=int(num_heads), mlp_dim=int(mlp_dim), classifier='token',
      class_token='per_frame' if attention == 'space' else 'global',
      positional_embedding='spatial' if attention == 'space' else 'separable',
      frame_aggregation=space_only_aggregation if attention == 'space' else 'mean_before_norm',
      attention_order='time_space', temporal_projection=attention == 'divided',
      layer_norm_eps=float(layer_norm_eps), gelu_approximate=bool(gelu_approximate), qkv_bias=bool(qkv_bias),
      representation_size=None)
  return w.result(fields)


def convert_official_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source timesformer`: the heads from the config (a fused qkv does not say them); a space_only
  checkpoint (no time table) runs at the clip asked, else the config's."""
  space_only = detect_attention_type(conversion.strip_prefix(state, ('module.', 'model.'))) == 'space_only'
  return convert_official(state, num_heads=ask.hint('num_heads'), num_frames=ask.frames_hint if space_only else None)


@weight_files.names_its_file
def convert_hf(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *,
               num_heads: int | None = None, num_frames: int | None = None,
               image_size: int | None = None) -> conversion.Converted:
  """Hugging Face TimesformerForVideoClassification state dict (+ its config.json dict) -> vvt.

  Without `hf_config`, transformers' defaults are assumed (layer_norm_eps 1e-6, hidden_act 'gelu') and
  num_heads must be given (default hidden_size // 64).
  """
  if hf_config:  # config.json written by save_pretrained holds only the fields that differ from the defaults
    hf_config = {**HF_DEFAULTS, **hf_config}
  hf_config = dict(hf_config or {})
  if hf_config.get('model_type', 'timesformer') != 'timesformer':
    raise ValueError(f"hf_config.model_type is {hf_config.get('model_type')!r}, not 'timesformer'")
  num_heads = num_heads or hf_config.get('num_attention_heads')
  attention_type = hf_config.get('attention_type')
  eps = float(hf_config.get('layer_norm_eps', 1e-6))
  gelu = torch_layout.gelu_approximate_of(hf_config.get('hidden_act', 'gelu'))
  return convert_official(
      hf_to_official_names(state), num_heads=num_heads, attention_type=attention_type,
      num_frames=num_frames or hf_config.get('num_frames') if attention_type == 'space_only' else num_frames,
      image_size=image_size, layer_norm_eps=eps, gelu_approximate=gelu, space_only_aggregation='mean',
      origin='Hugging Face TimeSformer checkpoint')


def convert_hf_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source hf_timesformer`: the heads from config.json, else from the vvt config."""
  return convert_hf(state, ask.hf_config, num_heads=None if ask.hf_config else ask.hint('num_heads'))


# ------------------------------------------------------------------------------ vvt -> Hugging Face

HF_CLASS = 'TimesformerForVideoClassification'
HF_ATTENTION_TYPES = {'divided': 'divided_space_time', 'joint': 'joint_space_time',
                      'spatiotemporal': 'joint_space_time'}


def to_hf(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt TimeSformer divided ('T+S') or joint ('ST') -> Hugging Face TimesformerForVideoClassification: (config
  dict, state dict in the names and layouts save_pretrained writes). The inverse of `convert_hf`.

  model_cfg: the resolved model config. What the class expresses (else NotExpressible naming the field): one
  global class token read by the classifier, learned separable space + time tables (one time row per frame),
  single-frame square patches (tubelet (1, p, p)), divided: time then space with temporal_fc
  (temporal_projection); one LayerNorm eps throughout; exact or tanh GELU; qkv biases all or none (a vvt model
  without the key bias gets a zero one: it never changes attention)."""
  m = model_cfg
  torch_layout.require(m, 'attention', tuple(HF_ATTENTION_TYPES), HF_CLASS)
  tt, th, tw = m.tubelet
  if tt != 1 or th != tw:
    raise torch_layout.NotExpressible(f'model.tubelet={tuple(m.tubelet)}: {HF_CLASS} embeds single frames in square '
                                'patches, tubelet (1, p, p)')
  torch_layout.require(m, 'classifier', 'token', HF_CLASS)
  torch_layout.require(m, 'class_token', 'global', HF_CLASS)
  torch_layout.require(m, 'positional_embedding', 'separable', HF_CLASS, 'learned space and time tables')
  torch_layout.require(m, 'time_embedding_rows', m.num_frames, HF_CLASS, 'one time-table row per frame')
  divided = m.attention == 'divided'
  if divided:
    torch_layout.require(m, 'temporal_projection', True, HF_CLASS, "divided attention's temporal_dense")
  torch_layout.require(m, 'encoder_norm_eps', m.layer_norm_eps, HF_CLASS, 'the final LayerNorm has layer_norm_eps')
  w = torch_layout.TorchState(params, HF_CLASS)
  w.patch_embedding('timesformer.embeddings.patch_embeddings.projection', 'embedding/conv', conv2d=True)
  w.copy('timesformer.embeddings.cls_token', 'encoder/cls')
  w.copy('timesformer.embeddings.position_embeddings', 'encoder/posembed/pos_embedding')
  w.copy('timesformer.embeddings.time_embeddings', 'encoder/posembed/time_embedding')
  biases = (True, m.key_bias, True) if m.qkv_bias else (None,) * 3
  stage = 'space' if divided else 'joint'
  for i in range(m.num_layers):
    key, name = f'timesformer.encoder.layer.{i}', f'encoder/layers/block_{i}'
    if divided:
      w.layer_norm(f'{key}.temporal_layernorm', f'{name}/time_norm')
      w.fused_qkv(f'{key}.temporal_attention.attention.qkv', f'{name}/time_attention', biases)
      w.attention_out(f'{key}.temporal_attention.output.dense', f'{name}/time_attention/out')
      w.dense(f'{key}.temporal_dense', f'{name}/time_projection')
    w.layer_norm(f'{key}.layernorm_before', f'{name}/{stage}_norm')
    w.fused_qkv(f'{key}.attention.attention.qkv', f'{name}/{stage}_attention', biases)
    w.attention_out(f'{key}.attention.output.dense', f'{name}/{stage}_attention/out')
    w.layer_norm(f'{key}.layernorm_after', f'{name}/mlp_norm')
    w.dense(f'{key}.intermediate.dense', f'{name}/mlp/Dense_0')
    w.dense(f'{key}.output.dense', f'{name}/mlp/Dense_1')
  w.layer_norm('timesformer.layernorm', 'encoder/encoder_norm')
  w.dense('classifier', 'head/output_projection')
  config = dict(
      model_type='timesformer', architectures=[HF_CLASS], image_size=torch_layout.hf_image_size(m, HF_CLASS, False),
      patch_size=int(th),
      num_channels=3, num_frames=int(m.num_frames), hidden_size=int(m.hidden_size),
      num_hidden_layers=int(m.num_layers), num_attention_heads=int(m.num_heads), intermediate_size=int(m.mlp_dim),
      hidden_act=torch_layout.hf_activation(m.gelu_approximate), hidden_dropout_prob=0.0,
      attention_probs_dropout_prob=0.0, initializer_range=0.02, layer_norm_eps=float(m.layer_norm_eps),
      qkv_bias=bool(m.qkv_bias), attention_type=HF_ATTENTION_TYPES[m.attention], drop_path_rate=0)
  return config, w.result()
