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

from vvt.convert import common

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
  return common.with_path(out, state)


def detect_attention_type(state: Mapping[str, np.ndarray]) -> str:
  if any('temporal_attn.' in k for k in state):
    return 'divided_space_time'
  return 'joint_space_time' if 'time_embed' in state else 'space_only'


@common.names_its_file
def convert_official(state: Mapping[str, np.ndarray], *, num_heads: int | None = None,
                     attention_type: str | None = None, num_frames: int | None = None,
                     image_size: int | None = None, layer_norm_eps: float = 1e-6,
                     gelu_approximate: bool = False, space_only_aggregation: str = 'mean_before_norm',
                     origin: str = 'TimeSformer checkpoint') -> common.Converted:
  """Official TimeSformer state dict -> vvt params + the exact model fields.

  num_heads: not stored in the weights (default hidden_size // 64, as in ViT-B/L). attention_type: detected
  from the keys if None. num_frames: from `time_embed` (required for space_only). image_size: from the
  number of `pos_embed` rows (square grids).
  """
  state = common.strip_prefix(state, ('module.', 'model.'))
  src = common.Source(state, origin)
  w = common.Writer(src)
  detected = detect_attention_type(state)
  attention_type = attention_type or detected
  if attention_type not in ATTENTION_TYPES:
    raise ValueError(f'attention_type must be one of {tuple(ATTENTION_TYPES)}, got {attention_type!r}')
  if attention_type != detected:
    raise ValueError(f'{origin}: attention_type={attention_type!r} but the parameters are those of {detected!r}')
  attention = ATTENTION_TYPES[attention_type]

  kernel = common.torch_patch_embedding(w, 'embedding/conv', 'patch_embed.proj')
  hidden, _, ph, pw = kernel.shape
  num_heads = num_heads or max(hidden // 64, 1)
  pos = src.take('pos_embed')
  grid = math.isqrt(pos.shape[1] - 1)
  if grid * grid != pos.shape[1] - 1:
    raise ValueError(f'{origin}: pos_embed has {pos.shape[1] - 1} patch rows, not a square grid')
  if image_size is not None and image_size != grid * ph:
    raise ValueError(f'{origin}: pos_embed is a {grid}x{grid} grid of {ph}-pixel patches (image_size '
                     f'{grid * ph}), but image_size={image_size} was asked for')
  image_size = grid * ph
  w.put('encoder/posembed/pos_embedding', pos, 'pos_embed')
  if attention_type != 'space_only':
    time = src.take('time_embed')
    if num_frames is not None and num_frames != time.shape[1]:
      raise ValueError(f'{origin}: time_embed has {time.shape[1]} frames, but num_frames={num_frames} was asked for')
    num_frames = time.shape[1]
    w.put('encoder/posembed/time_embedding', time, 'time_embed')
  elif num_frames is None:
    raise ValueError(f'{origin}: a space_only checkpoint does not store the number of frames; pass num_frames')
  w.copy('encoder/cls', 'cls_token')

  layers = sorted({int(k.split('.')[1]) for k in state if k.startswith('blocks.')})
  if layers != list(range(len(layers))):
    raise ValueError(f'{origin}: blocks are not numbered 0..n-1: {layers}')
  qkv_bias = True
  stage = {'divided': 'space', 'joint': 'joint', 'space': 'space'}[attention]
  for i in layers:
    b, name = f'blocks.{i}', f'encoder/layers/block_{i}'
    if attention == 'divided':
      common.torch_layer_norm(w, f'{name}/time_norm', f'{b}.temporal_norm1')
      common.torch_qkv(w, f'{name}/time_attention', f'{b}.temporal_attn.qkv', num_heads)
      common.torch_attention_out(w, f'{name}/time_attention/out', f'{b}.temporal_attn.proj', num_heads)
      common.torch_dense(w, f'{name}/time_projection', f'{b}.temporal_fc')
    qkv_bias &= common.torch_vit_block(w, name, b, num_heads, norm=f'{stage}_norm',
                                       attention=f'{stage}_attention')
  common.torch_layer_norm(w, 'encoder/encoder_norm', 'norm')
  head = src.take('head.weight')
  w.put('head/output_projection/kernel', head.T, 'head.weight', 'transpose (out,in)->(in,out)')
  w.copy('head/output_projection/bias', 'head.bias')

  mlp_dim = src.state['blocks.0.mlp.fc1.weight'].shape[0]
  fields = dict(
      family='timesformer', attention=attention, variant=common.variant_name(hidden, ph), tubelet=(1, ph, pw), num_frames=num_frames,
      image_size=image_size, num_classes=int(head.shape[0]), hidden_size=int(hidden), num_layers=len(layers),
      num_heads=int(num_heads), mlp_dim=int(mlp_dim), classifier='token',
      class_token='per_frame' if attention == 'space' else 'global',
      positional_embedding='spatial' if attention == 'space' else 'separable',
      frame_aggregation=space_only_aggregation if attention == 'space' else 'mean_before_norm',
      attention_order='time_space', temporal_projection=attention == 'divided',
      layer_norm_eps=float(layer_norm_eps), gelu_approximate=bool(gelu_approximate), qkv_bias=bool(qkv_bias),
      representation_size=None)
  return w.result(fields)


@common.names_its_file
def convert_hf(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *,
               num_heads: int | None = None, num_frames: int | None = None,
               image_size: int | None = None) -> common.Converted:
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
  gelu = common.gelu_approximate_of(hf_config.get('hidden_act', 'gelu'))
  return convert_official(
      hf_to_official_names(state), num_heads=num_heads, attention_type=attention_type,
      num_frames=num_frames or hf_config.get('num_frames') if attention_type == 'space_only' else num_frames,
      image_size=image_size, layer_norm_eps=eps, gelu_approximate=gelu, space_only_aggregation='mean',
      origin='Hugging Face TimeSformer checkpoint')
