"""Hugging Face VideoPrism -> vvt, and back: a spatial ViT per frame, a temporal transformer over the frames of every
spatial position keeping all tokens (attention='space_then_time'), a tanh logit cap, and an attention pooler.

Reads a folder written by `save_pretrained` (config.json + model.safetensors) of `VideoPrismForVideoClassification`
(`vision_model.*`, `head.*`, `head_layernorm`, `classifier`), of the bare `VideoPrismVisionModel` (no prefix), or
of the video-text `VideoPrismClipModel` (`video_model.vision_model.*`; config `vision_config`). A checkpoint without
`classifier` gets a new attention pooler and classifier of the config's classes, reported as freshly initialised.
Not part of the video classifier, reported unused: the text tower (`text_model.*`), the video model's auxiliary
layers and its contrastive pooler (`video_model.auxiliary_layers.*`, `video_model.head*`). Safetensors only.

Key names (prefix `vision_model.` in the classifier), layer i:
  `spatial_embeddings.patch_embeddings.projection`  Conv3d (D, 3, 1, p, p) (tubelet_size [1, 18, 18])
  `spatial_embeddings.position_embeddings` (1, h0 * w0, D), `temporal_embeddings.position_embeddings` (1, t0, D)
  `{spatial,temporal}_layers.i.{layernorm_before, attention.{q,k,v,o}_proj, layernorm_after, mlp.fc1, mlp.fc2}`
  `layernorm1` (after the spatial layers), `layernorm2` (after the temporal layers)
  `head.{pooling_attention_query (1, 1, D), q_proj, k_proj, v_proj (H*d, D), o_proj (D, H*d), per_dim_scale (d,)}`
  with d = intermediate_size / num_attention_heads; `head_layernorm`; `classifier`

What the model does and the vvt fields that say it:
  * attention='space_then_time': the spatial encoder over the N tokens of each frame, its LayerNorm, the temporal
    encoder over the n_t tokens of each spatial position, its LayerNorm; all n_t * N tokens to the head.
  * positions: two learned tables, added before each encoder; at another clip length or frame size transformers
    (interpolate_pos_encoding=True) resizes them by antialiased bilinear interpolation: pos_table_grid
    (t0, h0, w0) keeps the trained tables and vvt resizes them the same way at run time.
  * every LayerNorm computes (x - mean) / sqrt(var + eps) * (1 + weight) + bias: layer_norm_scale_offset=1.0, the
    weights copied as they are (the file round-trips bit for bit).
  * attention scores capped: c * tanh(s / c), c = attn_logit_softcapping (50): attention_logit_cap.
  * GELU 'gelu_python' (the exact erf formula), q/k/v biases `qkv_bias`, LN eps `layer_norm_eps`.
  * the head: classifier='attentive', cross_attention='plain' (q/k/v to heads of d = intermediate_size / heads,
    o_proj, then head_layernorm), per_dim_scale (q * 1.442695041 * softplus(s) / sqrt(d)).
What vvt cannot express is refused with one line naming the config field: another model_type, non-square frames or
patches, tubelets longer than one frame (transformers' VideoPrism reshapes by frames), num_channels other than 3,
a hidden_act that is no GELU.

`to_hf(params, model_cfg)` writes the inverse: the config.json dict and the state dict of a
`VideoPrismForVideoClassification` (its num_frames and image_size those of the position tables).
"""
from __future__ import annotations

import math
import re
from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import torch_layout
from vvt.convert import weight_files

# transformers' VideoPrismVisionConfig defaults (absent from a diff-only config.json).
HF_DEFAULTS = dict(model_type='videoprism_vision_model', image_size=288, num_frames=16, tubelet_size=[1, 18, 18],
                   num_channels=3, hidden_size=768, num_attention_heads=12, intermediate_size=3072,
                   hidden_act='gelu_python', layer_norm_eps=1e-6, qkv_bias=True, num_spatial_layers=12,
                   num_temporal_layers=4, attn_logit_softcapping=50.0)
MODEL_TYPES = ('videoprism_vision_model', 'videoprism')  # the vision model / classifier, and the video-text model
_LAYER = re.compile(r'(spatial|temporal)_layers\.(\d+)\.')


def read_config(hf_config: Mapping | None) -> dict:
  """config.json (a vision config, or a VideoPrismConfig's `vision_config`) over transformers' defaults, checked
  against what vvt expresses (ValueError naming the field)."""
  given = dict(hf_config or {})
  model_type = given.get('model_type', HF_DEFAULTS['model_type'])
  if model_type not in MODEL_TYPES:
    raise ValueError(f"hf_config.model_type is {model_type!r}, not one of {', '.join(map(repr, MODEL_TYPES))}")
  if model_type == 'videoprism':
    given = {**dict(given.get('vision_config') or {}), 'model_type': 'videoprism_vision_model'}
  cfg = {**HF_DEFAULTS, **given}
  image = cfg['image_size']
  if isinstance(image, (list, tuple)):
    if len(set(image)) != 1:
      raise ValueError(f'hf_config.image_size={list(image)}: vvt takes square frames')
    cfg['image_size'] = image[0]
  tubelet = list(cfg['tubelet_size'])
  if len(tubelet) != 3 or tubelet[1] != tubelet[2]:
    raise ValueError(f'hf_config.tubelet_size={tubelet}: vvt takes (t, p, p) tubelets of square patches')
  if tubelet[0] != 1:
    raise ValueError(f'hf_config.tubelet_size={tubelet}: transformers\' VideoPrism runs one-frame tubelets only')
  cfg['tubelet_size'] = tubelet
  conversion.check_hf_sizes(cfg, ('image_size', 'num_frames', 'hidden_size', 'num_attention_heads',
                                  'intermediate_size', 'num_spatial_layers', 'num_temporal_layers'), 'num_channels',
                            zero_ok='num_temporal_layers')
  for name in ('hidden_size', 'intermediate_size'):
    if cfg[name] % cfg['num_attention_heads']:
      raise ValueError(f'hf_config.{name}={cfg[name]} is not divisible by '
                       f"hf_config.num_attention_heads={cfg['num_attention_heads']}")
  cap = cfg['attn_logit_softcapping']
  if cap is not None and (not isinstance(cap, (int, float)) or isinstance(cap, bool) or cap <= 0):
    raise ValueError(f'hf_config.attn_logit_softcapping must be a number > 0, got {cap!r}')
  try:
    cfg['gelu_approximate'] = torch_layout.gelu_approximate_of(cfg['hidden_act'])
  except ValueError as e:
    raise ValueError(f'hf_config.{e}') from None
  return cfg


def model_fields(cfg: dict, *, num_frames: int, image_size: int, num_classes, table_grid) -> dict:
  """The vvt model fields of a VideoPrism classifier of (read) config `cfg` whose position tables are of
  `table_grid` (t0, h0, w0)."""
  hidden, heads, p = cfg['hidden_size'], cfg['num_attention_heads'], cfg['tubelet_size'][1]
  return dict(
      family='vivit', attention='space_then_time', variant=conversion.variant_name(hidden, p), tubelet=(1, p, p),
      num_frames=int(num_frames), image_size=int(image_size), num_classes=num_classes, hidden_size=hidden,
      num_layers=cfg['num_spatial_layers'], temporal_layers=cfg['num_temporal_layers'], num_heads=heads,
      temporal_num_heads=heads, mlp_dim=cfg['intermediate_size'], temporal_mlp_dim=cfg['intermediate_size'],
      classifier='attentive', class_token=None, pooling='mean', positional_embedding='joint',
      time_embedding_rows=None, pos_table_grid=tuple(int(x) for x in table_grid), representation_size=None,
      temporal_projection=False, layer_norm_eps=float(cfg['layer_norm_eps']),
      encoder_norm_eps=float(cfg['layer_norm_eps']), gelu_approximate=cfg['gelu_approximate'],
      qkv_bias=bool(cfg['qkv_bias']), key_bias=True, layer_norm_scale_offset=1.0,
      attention_logit_cap=None if cfg['attn_logit_softcapping'] is None else float(cfg['attn_logit_softcapping']),
      attentive_pooler=dict(num_queries=1, num_heads=heads, depth=0, mlp_dim=None,
                            head_dim=cfg['intermediate_size'] // heads, cross_attention='plain', per_dim_scale=True))


def _prefix(state) -> str:
  for p in ('video_model.vision_model.', 'vision_model.'):
    if any(k.startswith(p) for k in state):
      return p
  return ''


def encoders(w: conversion.Writer, cfg: dict, p: str, root: str = '') -> tuple[tuple[int, int, int], int, bool]:
  """The patch embedding, the two position tables and the two encoders of file prefix `p` into vvt names under
  `root` ('' for a classifier, 'video/' for a video-text model's video tower). Returns (the tables' grid
  (t0, h0, w0), the patch size, whether every q/k/v projection has a bias)."""
  src, heads = w.src, cfg['num_attention_heads']
  kernel = torch_layout.torch_conv3d_tokeniser(w, f'{root}embedding/conv',
                                               f'{p}spatial_embeddings.patch_embeddings.projection', 'VideoPrism')
  hidden, channels, tt, th, tw = kernel.shape
  torch_layout.check_kernel(kernel, (('num_channels', 3, channels), ('tubelet_size', tuple(cfg['tubelet_size']),
                                     (tt, th, tw)), ('hidden_size', cfg['hidden_size'], hidden)))
  spatial = src.take(f'{p}spatial_embeddings.position_embeddings')
  temporal = src.take(f'{p}temporal_embeddings.position_embeddings')
  side = math.isqrt(spatial.shape[1])
  if spatial.ndim != 3 or side * side != spatial.shape[1] or temporal.ndim != 3:
    raise weight_files.WeightFileError(f'{src.origin}: position tables of shapes {spatial.shape} and {temporal.shape}; '
                                 'expected (1, h0 * w0, D) over a square grid and (1, t0, D)')
  w.put(f'{root}spatial_encoder/posembed/pos_embedding', spatial, f'{p}spatial_embeddings.position_embeddings')
  w.put(f'{root}temporal_encoder/posembed/pos_embedding', temporal, f'{p}temporal_embeddings.position_embeddings')
  qkv_bias = True
  for kind, n, enc in (('spatial', cfg['num_spatial_layers'], 'spatial_encoder'),
                       ('temporal', cfg['num_temporal_layers'], 'temporal_encoder')):
    for i in range(n):
      qkv_bias &= torch_layout.torch_separate_block(w, f'{root}{enc}/layers/block_{i}', f'{p}{kind}_layers.{i}',
                                                    heads, torch_layout.HF_NEW)
    conversion.check_layer_count((int(m.group(2)) for k in src.keys() if k.startswith(p)
                                  and (m := _LAYER.match(k[len(p):])) and m.group(1) == kind), n, f'num_{kind}_layers')
  torch_layout.torch_layer_norm(w, f'{root}spatial_encoder/encoder_norm', f'{p}layernorm1')
  torch_layout.torch_layer_norm(w, f'{root}temporal_encoder/encoder_norm', f'{p}layernorm2')
  return (int(temporal.shape[1]), side, side), th, qkv_bias


def pooler(w: conversion.Writer, cfg: dict, head: str, norm: str, root: str = '') -> None:
  """VideoPrism's attention pooling head `head` (its query, q/k/v/o projections, per_dim_scale) and its LayerNorm
  `norm` into the vvt pooler under `root`."""
  heads = cfg['num_attention_heads']
  w.copy(f'{root}pooler/query_tokens', f'{head}.pooling_attention_query')
  torch_layout.torch_separate_qkv(w, f'{root}pooler/cross_attention', tuple(f'{head}.{q}_proj' for q in 'qkv'), heads)
  torch_layout.torch_attention_out(w, f'{root}pooler/cross_attention/out', f'{head}.o_proj', heads)
  w.copy(f'{root}pooler/cross_attention/per_dim_scale', f'{head}.per_dim_scale')
  torch_layout.torch_layer_norm(w, f'{root}pooler/output_norm', norm)


def run_clip(cfg: dict, th: int, num_frames, image_size) -> tuple[int, int]:
  """(frames, frame size) to run at: those asked, else the config's; ValueError where the patch does not divide."""
  run_frames, run_size = int(num_frames or cfg['num_frames']), int(image_size or cfg['image_size'])
  if run_size % th:
    raise ValueError(f'image_size={run_size} is not a multiple of the patch size {th} (hf_config.tubelet_size)')
  return run_frames, run_size


@weight_files.names_its_file
def convert(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *, num_frames: int | None = None,
            image_size: int | None = None, num_classes=None, text: bool = True) -> conversion.Converted:
  """HF VideoPrism state dict (+ config.json dict) -> vvt params + the exact model fields.

  num_frames / image_size: the clip to run at (default the config's; another one resizes the position tables at
  run time, as transformers' interpolate_pos_encoding); num_classes: the classes of a new head where the
  checkpoint has no classifier. A `VideoPrismClipModel` (text_model.* beside video_model.*) is converted whole,
  as a video-text model (`vvt.convert.hf_videoprism_clip`), where `text`; else its video encoders only, with a new
  head (its text tower, auxiliary layers and contrastive pooler reported unused)."""
  if text and any(k.startswith('text_model.') for k in state) and _prefix(state) == 'video_model.vision_model.':
    from vvt.convert import hf_videoprism_clip
    return hf_videoprism_clip.convert(state, hf_config, num_frames=num_frames, image_size=image_size)
  cfg = read_config(hf_config)
  w = conversion.Writer(conversion.Source(state, 'Hugging Face VideoPrism checkpoint'))
  table, th, qkv_bias = encoders(w, cfg, _prefix(state))
  run_frames, run_size = run_clip(cfg, th, num_frames, image_size)
  if 'classifier.weight' in w.src:
    pooler(w, cfg, 'head', 'head_layernorm')
    torch_layout.torch_dense(w, 'head/output_projection', 'classifier')
    classes = int(w.src.state['classifier.weight'].shape[0])
    fields = model_fields(cfg, num_frames=run_frames, image_size=run_size, num_classes=classes, table_grid=table)
  else:
    if num_classes is None:
      raise ValueError('the VideoPrism checkpoint has no classifier (a VideoPrismVisionModel or VideoPrismClipModel):'
                       ' give the number of classes of the new head (model.num_classes of the config)')
    fields = model_fields(cfg, num_frames=run_frames, image_size=run_size, num_classes=num_classes, table_grid=table)
    conversion.new_attentive_head(w, fields, cfg['hidden_size'], num_classes, 'the checkpoint has none')
  fields['qkv_bias'] = bool(qkv_bias)
  return w.result(fields)


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source hf_videoprism`: at the clip asked (None: config.json's); a VideoPrismClipModel keeps
  both towers unless the config asks for a video model (one without model.text: `vvt train --init` of a
  classifier, a classification config), which gets its video encoders and a new head of the config's classes."""
  text = ask.model_cfg is None or ask.raw('text') is not None
  return convert(state, ask.hf_config, num_frames=ask.num_frames, image_size=ask.image_size,
                 num_classes=ask.hint('num_classes'), text=text)


# ------------------------------------------------------------------------------------------ vvt -> HF

HF_CLASS = 'VideoPrismForVideoClassification'


def check(m) -> None:
  """NotExpressible (one line naming the field) for a resolved model config VideoPrismForVideoClassification
  cannot express."""
  torch_layout.require(m, 'attention', 'space_then_time', HF_CLASS)
  torch_layout.require(m, 'positional_embedding', 'joint', HF_CLASS, 'a spatial and a temporal table')
  torch_layout.require(m, 'classifier', 'attentive', HF_CLASS, 'its attention pooler')
  p = m.attentive_pooler
  if not (p.cross_attention == 'plain' and p.per_dim_scale and p.num_queries == 1 and p.num_heads == m.num_heads
          and p.num_heads * p.head_dim == m.mlp_dim):
    raise torch_layout.NotExpressible(
        f'model.attentive_pooler={p.to_dict()!r}: {HF_CLASS} has one query, cross_attention plain with '
        "per_dim_scale, the encoder's heads of mlp_dim / heads channels")
  if not (m.tubelet[0] == 1 and m.tubelet[1] == m.tubelet[2]):
    raise torch_layout.NotExpressible(f'model.tubelet={tuple(m.tubelet)}: {HF_CLASS} needs (1, p, p)')
  torch_layout.require(m, 'temporal_num_heads', m.num_heads, HF_CLASS, 'the temporal layers have num_heads')
  torch_layout.require(m, 'temporal_mlp_dim', m.mlp_dim, HF_CLASS, 'the temporal layers have mlp_dim')
  torch_layout.require(m, 'key_bias', True, HF_CLASS, 'its key projection has a bias when the query\'s has')
  torch_layout.require(m, 'layer_norm_scale_offset', 1.0, HF_CLASS, 'every LayerNorm scales by 1 + weight')
  if m.attention_logit_cap is None:
    raise torch_layout.NotExpressible(f'model.attention_logit_cap=None: {HF_CLASS} always caps attention logits')
  torch_layout.require(m, 'encoder_norm_eps', m.layer_norm_eps, HF_CLASS, 'the final LayerNorms have layer_norm_eps')


def encoders_to_hf(w: torch_layout.TorchState, m, v: str, root: str = '') -> None:
  """The inverse of `encoders`: the vvt embedding and encoders under `root` into file prefix `v`."""
  w.patch_embedding(f'{v}.spatial_embeddings.patch_embeddings.projection', f'{root}embedding/conv')
  w.copy(f'{v}.spatial_embeddings.position_embeddings', f'{root}spatial_encoder/posembed/pos_embedding')
  w.copy(f'{v}.temporal_embeddings.position_embeddings', f'{root}temporal_encoder/posembed/pos_embedding')
  bias = True if m.qkv_bias else None
  for kind, n in (('spatial', m.num_layers), ('temporal', m.temporal_layers)):
    for i in range(n):
      w.separate_block(f'{v}.{kind}_layers.{i}', f'{root}{kind}_encoder/layers/block_{i}', torch_layout.HF_NEW,
                       (bias,) * 3)
  w.layer_norm(f'{v}.layernorm1', f'{root}spatial_encoder/encoder_norm')
  w.layer_norm(f'{v}.layernorm2', f'{root}temporal_encoder/encoder_norm')


def pooler_to_hf(w: torch_layout.TorchState, head: str, norm: str, root: str = '') -> None:
  """The inverse of `pooler`."""
  w.copy(f'{head}.pooling_attention_query', f'{root}pooler/query_tokens')
  for part in ('query', 'key', 'value'):
    weight, b = w.projection(f'{root}pooler/cross_attention', part, True)
    w.put(f'{head}.{part[0]}_proj.weight', weight)
    w.put(f'{head}.{part[0]}_proj.bias', b)
  w.attention_out(f'{head}.o_proj', f'{root}pooler/cross_attention/out')
  w.copy(f'{head}.per_dim_scale', f'{root}pooler/cross_attention/per_dim_scale')
  w.layer_norm(norm, f'{root}pooler/output_norm')


def vision_config(m) -> dict:
  """The VideoPrismVisionConfig fields of a resolved vvt model (num_frames and image_size those of its position
  tables)."""
  import vvt.models.config
  table = tuple(m.pos_table_grid) if m.pos_table_grid is not None else vvt.models.config.token_grid(m)
  patch = int(m.tubelet[1])
  return dict(
      model_type='videoprism_vision_model',
      image_size=int(table[1] * patch), num_frames=int(table[0]), tubelet_size=[1, patch, patch], num_channels=3,
      hidden_size=int(m.hidden_size), num_attention_heads=int(m.num_heads), intermediate_size=int(m.mlp_dim),
      hidden_act='gelu_pytorch_tanh' if m.gelu_approximate else 'gelu_python',
      layer_norm_eps=float(m.layer_norm_eps), qkv_bias=bool(m.qkv_bias), num_spatial_layers=int(m.num_layers),
      num_temporal_layers=int(m.temporal_layers), attn_logit_softcapping=float(m.attention_logit_cap))


def to_hf(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt params (per-layer layout) of a VideoPrism-shaped model + its resolved config -> (config.json dict, state
  dict) of a `VideoPrismForVideoClassification`: the exact inverse of `convert` (tensors bit-identical). Its
  num_frames and image_size are the position tables' (a model run at another clip length needs transformers'
  interpolate_pos_encoding=True, which resizes them as vvt does). A model transformers cannot express is refused
  (NotExpressible naming the field)."""
  m = model_cfg
  check(m)
  w = torch_layout.TorchState(params, HF_CLASS)
  encoders_to_hf(w, m, 'vision_model')
  pooler_to_hf(w, 'head', 'head_layernorm')
  w.dense('classifier', 'head/output_projection')
  return {**vision_config(m), 'architectures': [HF_CLASS]}, w.result()
