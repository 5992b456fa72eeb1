"""Hugging Face V-JEPA 2 -> vvt, and back: joint space-time attention with 3D RoPE and the attentive pooler.

Reads a folder written by `save_pretrained` (config.json + model.safetensors) of `VJEPA2ForVideoClassification`
(`vjepa2.encoder.*`, `pooler.*`, `classifier`) or of the bare `VJEPA2Model` (`encoder.*`: a new classifier of the
config's classes, and a new attentive pooler, both reported as freshly initialised). The predictor (`predictor.*`,
the self-supervised training's) is no part of the video classifier: reported unused, but for a pretraining config
(task.name='jepa') or none, which keep it as the params `predictor` (`convert_for`, `read_predictor`; `vvt train
--init` of a jepa run continues from it). Weights are read from safetensors only; a pickle is refused unopened.

Key names (prefix `vjepa2.` in the classifier), layer i:
  `encoder.embeddings.patch_embeddings.proj`   Conv3d (D, 3, tubelet_size, patch_size, patch_size), tokens in
                                               (t, h, w) order as vvt's tubelet embedding
  `encoder.layer.i.norm1`, `attention.{query, key, value, proj}`, `norm2`, `mlp.fc1`, `mlp.fc2`
  `encoder.layernorm`                          the final LayerNorm of every token
  `pooler.query_tokens` (1, 1, D); `pooler.self_attention_layers.j.{layer_norm1, self_attn.{q,k,v,out}_proj,
  layer_norm2, mlp.fc1, mlp.fc2}`; `pooler.cross_attention_layer.{layer_norm1, cross_attn.{q,k,v}_proj,
  layer_norm2, mlp.fc1, mlp.fc2}`; `classifier`

What the model does and the vvt fields that say it:
  * tokens: tubelets tubelet_size x patch_size x patch_size (2x16x16), no class token, no position table:
    positional_embedding='rope' (vvt/models/rope.py: the head split into three parts of 2 * floor(d_h / 6)
    channels rotated by t, h, w, frequencies exactly as transformers computes them), so any clip length and frame
    size divisible by the tubelet run with the same weights (`num_frames` / `image_size` of `convert`).
  * blocks: pre-LN, eps `layer_norm_eps` (1e-6), q/k/v biases `qkv_bias`, MLP int(hidden_size * mlp_ratio) wide,
    `hidden_act` (exact 'gelu'); the final LayerNorm has the same eps.
  * classifier: classifier='attentive' with the pooler of cross_attention='block' (vvt/models/poolers.py):
    num_pooler_layers self-attention blocks over all the tokens, then the query token's cross-attention block;
    its heads are num_attention_heads, its MLPs int(hidden_size * 4.0) wide whatever mlp_ratio (as transformers).
What vvt cannot express is refused with one line naming the config field: another model_type, num_frames or
image_size not divisible by the tubelet, non-square patches, in_chans other than 3, a hidden_act that is no GELU.
transformers 5.23 computes the RoPE rows and columns from the config's crop_size whatever the frame size (a frame
of another size gets wrapped positions); vvt and the released V-JEPA 2 code use the frame's own grid: the two agree
whenever crop_size is the frame size.

`to_hf(params, model_cfg)` writes the inverse: the config.json dict and the state dict of a
`VJEPA2ForVideoClassification`. A classifier has no predictor (the self-supervised training's, which the classifier
never runs; a classification config's `convert` reports its tensors unused), so the export writes an empty one,
`EMPTY_PREDICTOR`: no layer, a width of 1, no mask token, its 3 * hidden_size + 3 parameters zero, in config.json
and in the weights alike. So `from_pretrained` loads every tensor it builds (no random predictor of transformers'
default size, 12 layers of 384, and no table of missing keys), and the model's parameters are vvt's plus those
3 * hidden_size + 3.
"""
from __future__ import annotations

import re
from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import hf_config_reading
from vvt.convert import torch_layout
from vvt.convert import tubelet_checkpoint
from vvt.convert import weight_files

# transformers' VJEPA2Config defaults (absent from a diff-only config.json).
HF_DEFAULTS = dict(model_type='vjepa2', patch_size=16, crop_size=256, frames_per_clip=64, tubelet_size=2,
                   hidden_size=1024, in_chans=3, num_attention_heads=16, num_hidden_layers=24, mlp_ratio=4.0,
                   layer_norm_eps=1e-6, qkv_bias=True, hidden_act='gelu', num_pooler_layers=3)
# The predictor an exported classifier has (none of its weights are vvt's): VJEPA2Config fields.
EMPTY_PREDICTOR = dict(pred_hidden_size=1, pred_num_hidden_layers=0, pred_num_mask_tokens=0,
                       pred_num_attention_heads=1)
POOLER_MLP_RATIO = 4.0  # VJEPA2MLP(config, hidden_size) in the pooler: its default ratio, not config.mlp_ratio
_LAYER = re.compile(r'^(?:vjepa2\.)?encoder\.layer\.(\d+)\.')
_POOLER_LAYER = re.compile(r'^pooler\.self_attention_layers\.(\d+)\.')


def read_config(hf_config: Mapping | None) -> dict:
  """config.json over transformers' defaults, its fields checked against what vvt expresses (ValueError naming
  the field)."""
  cfg = {**HF_DEFAULTS, **dict(hf_config or {})}
  if cfg['model_type'] != 'vjepa2':
    raise ValueError(f"hf_config.model_type is {cfg['model_type']!r}, not 'vjepa2'")
  cfg['patch_size'] = hf_config_reading.square_patch_size(cfg['patch_size'])
  conversion.check_hf_sizes(cfg, ('patch_size', 'crop_size', 'frames_per_clip', 'tubelet_size', 'hidden_size',
                                  'num_attention_heads', 'num_hidden_layers', 'num_pooler_layers'), 'in_chans',
                            zero_ok='num_pooler_layers')
  if cfg['hidden_size'] % cfg['num_attention_heads']:
    raise ValueError(f"hf_config.hidden_size={cfg['hidden_size']} is not divisible by "
                     f"hf_config.num_attention_heads={cfg['num_attention_heads']}")
  cfg['gelu_approximate'] = hf_config_reading.gelu_approximate(cfg['hidden_act'])
  return cfg


def _check_clip(cfg: dict, num_frames: int, image_size: int) -> None:
  if num_frames % cfg['tubelet_size']:
    raise ValueError(f'num_frames={num_frames} is not a multiple of hf_config.tubelet_size={cfg["tubelet_size"]} '
                     '(vvt tokenises whole tubelets only)')
  if image_size % cfg['patch_size']:
    raise ValueError(f'image_size={image_size} is not a multiple of hf_config.patch_size={cfg["patch_size"]}')


def model_fields(cfg: dict, *, num_frames: int, image_size: int, num_classes, mlp_dim: int, pooler_mlp_dim: int,
                 num_pooler_layers: int) -> dict:
  """The vvt model fields of a V-JEPA 2 classifier of (read) config `cfg`."""
  hidden, heads, p, tt = cfg['hidden_size'], cfg['num_attention_heads'], cfg['patch_size'], cfg['tubelet_size']
  return dict(
      family='vivit', attention='spatiotemporal', variant=conversion.variant_name(hidden, p, tt), tubelet=(tt, p, p),
      num_frames=int(num_frames), image_size=int(image_size), num_classes=num_classes, hidden_size=hidden,
      num_layers=cfg['num_hidden_layers'], num_heads=heads, mlp_dim=int(mlp_dim), classifier='attentive',
      class_token=None, pooling='mean', positional_embedding='rope', time_embedding_rows=None,
      representation_size=None, temporal_projection=False, layer_norm_eps=float(cfg['layer_norm_eps']),
      encoder_norm_eps=float(cfg['layer_norm_eps']), gelu_approximate=cfg['gelu_approximate'],
      qkv_bias=bool(cfg['qkv_bias']), key_bias=True, attention_logit_cap=None, layer_norm_scale_offset=0.0,
      pos_table_grid=None,
      attentive_pooler=dict(num_queries=1, num_heads=heads, depth=int(num_pooler_layers), mlp_dim=int(pooler_mlp_dim),
                            head_dim=hidden // heads, cross_attention='block', per_dim_scale=False))


_ENCODER_BLOCK = dict(torch_layout.HF_NEW, norm1='norm1', q='attention.query', k='attention.key',
                      v='attention.value', o='attention.proj', norm2='norm2')
_POOLER_BLOCK = dict(torch_layout.HF_NEW, norm1='layer_norm1', q='self_attn.q_proj', k='self_attn.k_proj',
                     v='self_attn.v_proj', o='self_attn.out_proj', norm2='layer_norm2')


def _pooler(w: conversion.Writer, heads: int) -> int:
  """VJEPA2AttentivePooler -> vvt `pooler` (cross_attention='block'); returns its number of self-attention layers."""
  w.copy('pooler/query_tokens', 'pooler.query_tokens')
  layers = sorted({int(m.group(1)) for k in w.src.keys() if (m := _POOLER_LAYER.match(k))})
  if layers != list(range(len(layers))):
    raise ValueError(f'V-JEPA 2 pooler: self-attention layers not numbered 0..n-1: {layers}')
  for j in layers:
    torch_layout.torch_separate_block(w, f'pooler/layers/block_{j}', f'pooler.self_attention_layers.{j}', heads,
                                      _POOLER_BLOCK)
  key = 'pooler.cross_attention_layer'
  torch_layout.torch_layer_norm(w, 'pooler/cross_norm', f'{key}.layer_norm1')
  torch_layout.torch_separate_qkv(w, 'pooler/cross_attention', tuple(f'{key}.cross_attn.{q}_proj' for q in 'qkv'),
                                  heads)
  torch_layout.torch_layer_norm(w, 'pooler/mlp_norm', f'{key}.layer_norm2')
  torch_layout.torch_dense(w, 'pooler/mlp/Dense_0', f'{key}.mlp.fc1')
  torch_layout.torch_dense(w, 'pooler/mlp/Dense_1', f'{key}.mlp.fc2')
  return len(layers)


@weight_files.names_its_file
def convert(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *, num_frames: int | None = None,
            image_size: int | None = None, num_classes=None, predictor: bool = False) -> conversion.Converted:
  """HF V-JEPA 2 state dict (+ config.json dict) -> vvt params + the exact model fields.

  num_frames / image_size: the clip to run at (RoPE: any multiple of the tubelet; default the config's
  frames_per_clip and crop_size); num_classes: the classes of a new head where the checkpoint has no classifier;
  predictor: keep a VJEPA2Model's predictor (`read_predictor`, the params `predictor` of task.name='jepa'), else
  it is reported unused."""
  cfg = read_config(hf_config)
  num_frames = int(num_frames or cfg['frames_per_clip'])
  image_size = int(image_size or cfg['crop_size'])
  _check_clip(cfg, num_frames, image_size)
  heads = cfg['num_attention_heads']
  w, p, hidden = tubelet_checkpoint.open_checkpoint(state, 'V-JEPA 2', 'vjepa2.',
                                                    'encoder.embeddings.patch_embeddings.proj', 'in_chans',
                                                    tubelet_size=cfg['tubelet_size'], patch_size=cfg['patch_size'],
                                                    hidden_size=cfg['hidden_size'])
  src = w.src
  qkv_bias = True
  for i in range(cfg['num_hidden_layers']):
    qkv_bias &= torch_layout.torch_separate_block(w, f'encoder/layers/block_{i}', f'{p}encoder.layer.{i}', heads,
                                                  _ENCODER_BLOCK)
  conversion.check_layer_count((int(m.group(1)) for k in state if (m := _LAYER.match(k))), cfg['num_hidden_layers'],
                               'num_hidden_layers')
  torch_layout.torch_layer_norm(w, 'encoder/encoder_norm', f'{p}encoder.layernorm')
  mlp_dim = w.flat['encoder/layers/block_0/mlp/Dense_0/kernel'].shape[1]
  if 'classifier.weight' in src:
    depth = _pooler(w, heads)
    if depth != cfg['num_pooler_layers']:
      raise ValueError(f"hf_config.num_pooler_layers={cfg['num_pooler_layers']} but the checkpoint's pooler has "
                       f'{depth} self-attention layers')
    torch_layout.torch_dense(w, 'head/output_projection', 'classifier')
    classes = int(src.state['classifier.weight'].shape[0])
    fields = model_fields(cfg, num_frames=num_frames, image_size=image_size, num_classes=classes, mlp_dim=mlp_dim,
                          pooler_mlp_dim=w.flat['pooler/mlp/Dense_0/kernel'].shape[1], num_pooler_layers=depth)
  else:
    if num_classes is None:
      raise ValueError('the V-JEPA 2 checkpoint has no classifier (a VJEPA2Model): give the number of classes of '
                       'the new head (model.num_classes of the config)')
    fields = model_fields(cfg, num_frames=num_frames, image_size=image_size, num_classes=num_classes,
                          mlp_dim=mlp_dim, pooler_mlp_dim=int(hidden * POOLER_MLP_RATIO),
                          num_pooler_layers=cfg['num_pooler_layers'])
    conversion.new_attentive_head(w, fields, hidden, num_classes, 'a VJEPA2Model has none')
  fields['qkv_bias'] = bool(qkv_bias)
  if predictor and has_predictor(state):
    read_predictor(w, cfg)
  return w.result(fields)


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source hf_vjepa2`: at the clip asked (None: config.json's); the predictor is kept for a
  pretraining config (task.name='jepa': `ask.pretraining`), and a VJEPA2Model's with no config, as a
  VideoPrismClipModel's text tower where the config asks for it; a pretraining checkpoint converted so without
  classes gets a one-output head (as a pretraining run's, never read). A backbone's new head has the config's
  classes."""
  keep = ask.pretraining or (ask.model_cfg is None and 'classifier.weight' not in state)
  classes = ask.hint('num_classes')
  if keep and not classes and 'classifier.weight' not in state and has_predictor(state):
    classes = 1
  return convert(state, ask.hf_config, num_frames=ask.num_frames, image_size=ask.image_size, num_classes=classes,
                 predictor=keep)


# ------------------------------------------------------------------------------------------ vvt -> HF


HF_CLASS = 'VJEPA2ForVideoClassification'


def _mlp_ratio(hidden: int, mlp_dim: int) -> float:
  """A float r with int(hidden * r) == mlp_dim, as transformers sizes the MLP."""
  r = mlp_dim / hidden
  while int(hidden * r) < mlp_dim:
    r = float(np.nextafter(r, np.inf))
  return r


def check_encoder(m, hf_class: str = HF_CLASS) -> None:
  """NotExpressible (one line naming the field) for a resolved model config whose encoder V-JEPA 2 cannot
  express."""
  torch_layout.require(m, 'attention', ('spatiotemporal', 'joint'), hf_class, 'joint space-time attention')
  torch_layout.require(m, 'positional_embedding', 'rope', hf_class, '3D rotary embeddings, no table')
  if m.tubelet[1] != m.tubelet[2]:
    raise torch_layout.NotExpressible(f'model.tubelet={tuple(m.tubelet)}: {hf_class} needs square patches (t, p, p)')
  torch_layout.require(m, 'key_bias', True, hf_class, 'its key projection has a bias when the query\'s has')
  torch_layout.require(m, 'layer_norm_scale_offset', 0.0, hf_class, 'LayerNorm weights used as they are')
  torch_layout.require(m, 'attention_logit_cap', None, hf_class, 'uncapped attention logits')
  torch_layout.require(m, 'encoder_norm_eps', m.layer_norm_eps, hf_class, 'the final LayerNorm has layer_norm_eps')


def check(m) -> None:
  """NotExpressible (one line naming the field) for a resolved model config VJEPA2ForVideoClassification cannot
  express."""
  check_encoder(m)
  torch_layout.require(m, 'classifier', 'attentive', HF_CLASS, 'its attentive pooler')
  p = m.attentive_pooler
  if not (p.cross_attention == 'block' and p.num_queries == 1 and not p.per_dim_scale and p.num_heads == m.num_heads
          and p.mlp_dim == int(m.hidden_size * POOLER_MLP_RATIO)):
    raise torch_layout.NotExpressible(
        f'model.attentive_pooler={p.to_dict()!r}: {HF_CLASS} has one query, cross_attention block, the encoder\'s '
        'heads, MLPs 4 x hidden_size wide, no per_dim_scale')


def _empty_predictor(w: torch_layout.TorchState, hidden: int) -> None:
  """The zero tensors of the `EMPTY_PREDICTOR` transformers builds: embeddings Linear(D, 1), no mask token, the
  LayerNorm of width 1, the projection Linear(1, D)."""
  p = 'vjepa2.predictor'
  width = EMPTY_PREDICTOR['pred_hidden_size']
  for key, shape in (('embeddings.mask_tokens', (EMPTY_PREDICTOR['pred_num_mask_tokens'], 1, 1, width)),
                     ('embeddings.predictor_embeddings.weight', (width, hidden)),
                     ('embeddings.predictor_embeddings.bias', (width,)), ('layernorm.weight', (width,)),
                     ('layernorm.bias', (width,)), ('proj.weight', (hidden, width)), ('proj.bias', (hidden,))):
    w.put(f'{p}.{key}', np.zeros(shape, np.float32))


def to_hf(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt params (per-layer layout) of a V-JEPA 2-shaped model + its resolved config -> (config.json dict, state
  dict) of a `VJEPA2ForVideoClassification`: the exact inverse of `convert` (tensors bit-identical), the predictor
  an empty one (`EMPTY_PREDICTOR`). A model transformers cannot express is refused (NotExpressible
  naming the field)."""
  m = model_cfg
  check(m)
  w = torch_layout.TorchState(params, HF_CLASS)
  _write_encoder(w, m, 'vjepa2.')
  for j in range(m.attentive_pooler.depth):
    w.separate_block(f'pooler.self_attention_layers.{j}', f'pooler/layers/block_{j}', _POOLER_BLOCK, (True,) * 3)
  w.copy('pooler.query_tokens', 'pooler/query_tokens')
  key = 'pooler.cross_attention_layer'
  w.layer_norm(f'{key}.layer_norm1', 'pooler/cross_norm')
  for part in ('query', 'key', 'value'):
    weight, b = w.projection('pooler/cross_attention', part, True)
    w.put(f'{key}.cross_attn.{part[0]}_proj.weight', weight)
    w.put(f'{key}.cross_attn.{part[0]}_proj.bias', b)
  w.layer_norm(f'{key}.layer_norm2', 'pooler/mlp_norm')
  w.dense(f'{key}.mlp.fc1', 'pooler/mlp/Dense_0')
  w.dense(f'{key}.mlp.fc2', 'pooler/mlp/Dense_1')
  w.dense('classifier', 'head/output_projection')
  _empty_predictor(w, int(m.hidden_size))
  hf = dict(_encoder_config(m, HF_CLASS), num_pooler_layers=int(m.attentive_pooler.depth), **EMPTY_PREDICTOR)
  return hf, w.result()


def _write_encoder(w: torch_layout.TorchState, m, prefix: str) -> None:
  """The encoder's tensors (`{prefix}encoder.*`: tokeniser, blocks, final LayerNorm) of the vvt params in `w`."""
  w.patch_embedding(f'{prefix}encoder.embeddings.patch_embeddings.proj', 'embedding/conv')
  for i in range(m.num_layers):
    w.separate_block(f'{prefix}encoder.layer.{i}', f'encoder/layers/block_{i}', _ENCODER_BLOCK,
                     (True if m.qkv_bias else None,) * 3)
  w.layer_norm(f'{prefix}encoder.layernorm', 'encoder/encoder_norm')


def _encoder_config(m, hf_class: str) -> dict:
  """The config.json fields of the encoder of resolved model config `m`."""
  return dict(
      model_type='vjepa2', architectures=[hf_class], patch_size=int(m.tubelet[1]),
      crop_size=torch_layout.hf_image_size(m, hf_class, False), frames_per_clip=int(m.num_frames),
      tubelet_size=int(m.tubelet[0]),
      hidden_size=int(m.hidden_size), in_chans=3, num_attention_heads=int(m.num_heads),
      num_hidden_layers=int(m.num_layers), mlp_ratio=_mlp_ratio(m.hidden_size, m.mlp_dim),
      layer_norm_eps=float(m.layer_norm_eps), qkv_bias=bool(m.qkv_bias),
      hidden_act=torch_layout.hf_activation(m.gelu_approximate, 'gelu_pytorch_tanh'))


# ------------------------------------------------------------------------------------------ the predictor
# `VJEPA2Predictor` (the self-supervised training's, `VJEPA2Model.predictor`) <-> vvt `predictor`
# (vvt/models/predictor.py): `predictor.embeddings.predictor_embeddings` -> `embed`, `predictor.embeddings.
# mask_tokens` (n, 1, 1, D_p) -> `mask_tokens` (n, D_p), `predictor.layer.i` -> `block_i` (the encoder blocks'
# names), `predictor.layernorm` -> `norm`, `predictor.proj` -> `projection`.

_PREDICTOR_LAYER = re.compile(r'^(?:vjepa2\.)?predictor\.layer\.(\d+)\.')


def predictor_fields(cfg: dict) -> dict:
  """The `vvt.models.predictor.PredictorSpec` fields of a read config (`read_config`): transformers' predictor
  has its own width, depth, heads and MLP ratio, the encoder's LayerNorm eps, activation and q/k/v biases."""
  full = {**PREDICTOR_DEFAULTS, **cfg}
  width = int(full['pred_hidden_size'])
  if width % int(full['pred_num_attention_heads']):
    raise ValueError(f"hf_config.pred_hidden_size={width} is not divisible by "
                     f"hf_config.pred_num_attention_heads={full['pred_num_attention_heads']}")
  return dict(hidden_size=width, depth=int(full['pred_num_hidden_layers']),
              num_heads=int(full['pred_num_attention_heads']), mlp_dim=int(width * float(full['pred_mlp_ratio'])),
              num_mask_tokens=int(full['pred_num_mask_tokens']), layer_norm_eps=float(cfg['layer_norm_eps']),
              gelu_approximate=cfg['gelu_approximate'], qkv_bias=bool(cfg['qkv_bias']))


# transformers' VJEPA2Config defaults of the predictor.
PREDICTOR_DEFAULTS = dict(pred_hidden_size=384, pred_num_attention_heads=12, pred_num_hidden_layers=12,
                          pred_num_mask_tokens=10, pred_mlp_ratio=4.0)


def has_predictor(state: Mapping[str, np.ndarray]) -> bool:
  """Whether a V-JEPA 2 state dict holds a predictor with layers (an exported classifier's empty one has none)."""
  return any(_PREDICTOR_LAYER.match(k) for k in state)


def read_predictor(w: conversion.Writer, cfg: dict, name: str = 'predictor') -> dict:
  """The predictor of the state behind `w` into the vvt params under `name`; returns its PredictorSpec fields."""
  fields = predictor_fields(cfg)
  p = 'vjepa2.predictor' if any(k.startswith('vjepa2.predictor.') for k in w.src.keys()) else 'predictor'
  torch_layout.torch_dense(w, f'{name}/embed', f'{p}.embeddings.predictor_embeddings')
  tokens = w.src.take(f'{p}.embeddings.mask_tokens')
  w.put(f'{name}/mask_tokens', tokens.reshape(tokens.shape[0], -1), f'{p}.embeddings.mask_tokens',
        '(n, 1, 1, D_p) -> (n, D_p)')
  for i in range(fields['depth']):
    torch_layout.torch_separate_block(w, f'{name}/block_{i}', f'{p}.layer.{i}', fields['num_heads'], _ENCODER_BLOCK)
  conversion.check_layer_count((int(m.group(1)) for k in w.src.keys() if (m := _PREDICTOR_LAYER.match(k))),
                               fields['depth'], 'pred_num_hidden_layers')
  torch_layout.torch_layer_norm(w, f'{name}/norm', f'{p}.layernorm')
  torch_layout.torch_dense(w, f'{name}/projection', f'{p}.proj')
  return fields


def write_predictor(w: torch_layout.TorchState, fields: dict, name: str = 'predictor') -> dict:
  """The inverse of `read_predictor`: the vvt predictor under `name` into `predictor.*`; returns its config.json
  fields."""
  w.dense('predictor.embeddings.predictor_embeddings', f'{name}/embed')
  tokens = w.take(f'{name}/mask_tokens')
  w.put('predictor.embeddings.mask_tokens', tokens.reshape(tokens.shape[0], 1, 1, -1))
  for i in range(fields['depth']):
    w.separate_block(f'predictor.layer.{i}', f'{name}/block_{i}', _ENCODER_BLOCK,
                     (True if fields['qkv_bias'] else None,) * 3)
  w.layer_norm('predictor.layernorm', f'{name}/norm')
  w.dense('predictor.proj', f'{name}/projection')
  return dict(pred_hidden_size=int(fields['hidden_size']), pred_num_hidden_layers=int(fields['depth']),
              pred_num_attention_heads=int(fields['num_heads']), pred_num_mask_tokens=int(fields['num_mask_tokens']),
              pred_mlp_ratio=_mlp_ratio(fields['hidden_size'], fields['mlp_dim']))


PRETRAINING_CLASS = 'VJEPA2Model'


def predictor_shape(params: Mapping) -> dict:
  """The `PredictorSpec` width, depth, heads, MLP width, mask tokens and q/k/v biases of vvt predictor params (as
  `write_predictor` reads its fields)."""
  depth = sum(1 for k in params if re.fullmatch(r'block_\d+', k))
  query = params['block_0']['joint_attention']['query']
  return dict(hidden_size=int(np.shape(params['embed']['kernel'])[1]), depth=depth,
              num_heads=int(np.shape(query['kernel'])[1]), mlp_dim=int(np.shape(params['block_0']['mlp']['Dense_0']
                                                                                    ['kernel'])[1]),
              num_mask_tokens=int(np.shape(params['mask_tokens'])[0]), qkv_bias='bias' in query)


def to_hf_pretraining(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt params of a V-JEPA 2-shaped pretraining run (the encoder's and `predictor`; per-layer layout) + its resolved
  model config -> (config.json dict, state dict) of a `VJEPA2Model`: `encoder.*` and `predictor.*`, the inverse of
  `convert`'s encoder and `read_predictor`. The backbone's classifier and any other params of the run (an EMA
  target encoder) are not part of it. NotExpressible (one line naming the field) for an encoder V-JEPA 2 cannot
  express."""
  m = model_cfg
  check_encoder(m, PRETRAINING_CLASS)
  if 'predictor' not in params:
    raise torch_layout.NotExpressible(f'{PRETRAINING_CLASS}: the params hold no predictor')
  w = torch_layout.TorchState({k: params[k] for k in ('embedding', 'encoder', 'predictor')}, PRETRAINING_CLASS)
  _write_encoder(w, m, '')
  shape = predictor_shape(params['predictor'])
  if shape['qkv_bias'] != bool(m.qkv_bias):
    raise torch_layout.NotExpressible(f"model.qkv_bias={m.qkv_bias}: {PRETRAINING_CLASS}'s predictor has q/k/v biases "
                                      "where its encoder has (one config.qkv_bias); vvt's predictor has "
                                      f"{'some' if shape['qkv_bias'] else 'none'}")
  pred = write_predictor(w, dict(shape, layer_norm_eps=m.layer_norm_eps, gelu_approximate=m.gelu_approximate))
  return {**_encoder_config(m, PRETRAINING_CLASS), **pred}, w.result()

