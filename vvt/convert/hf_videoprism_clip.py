"""Hugging Face `VideoPrismClipModel` <-> vvt video-text model (`model.text`, vvt/models/video_text.py), both ways.

Reads a `save_pretrained` folder of the video-text model (config.json model_type 'videoprism' with `vision_config`
and `text_config`; model.safetensors): both towers are kept.

  video_model.vision_model.*             the video encoders (`hf_videoprism.encoders`)       -> video/...
  video_model.auxiliary_layers.i         VideoPrism layers over all n_t * N tokens   -> video/pooler/layers/block_i
  video_model.head.*, head_layernorm     the attention pooling head and its LayerNorm        -> video/pooler/...
  text_model.embeddings.token_embedding  (V, D)                                              -> text/token_embedding
  text_model.embeddings.cls_emb          (1, 1, D) the class token after the tokens          -> text/cls
  text_model.layers.i                    pre-LN layers (ReLU MLP, logit cap), as the video's -> text/block_i
  text_model.layernorm                                                                       -> text/encoder_norm
  text_model.embeddings.position_embedding / position_ids: buffers, the fixed sinusoid and 0..L-1, which vvt
  computes (checked against the file: the table within 1e-5, the ids exactly); not written back by the export,
  transformers recomputes them when it builds the model.

The auxiliary layers are the attentive pooler's self-attention blocks (model.attentive_pooler.depth = the config's
num_auxiliary_layers, mlp_dim its intermediate_size), capped as the encoders. VideoPrismClipModel has no learned
temperature: its forward divides the cosines by an optional `temperature` argument (default none) and returns
the softmax over the videos of that. vvt's `logit_scale` is set to 0 (exp(0) = 1: the logits are the cosines; a
softmax over axis 0 of them is transformers' logits_per_video) and reported as freshly initialised; no bias.

Refused with one line naming the field: what `hf_videoprism.read_config` refuses in `vision_config`; a text_config
of another model_type, a hidden_act that is not ReLU or GELU, a width other than the video's, q/k/v biases or
L2 normalisation unlike the video tower's, auxiliary layers without q/k/v biases (vvt's pooler blocks have them).

`to_hf(params, model_cfg)` writes the inverse (config.json dict and state dict of a `VideoPrismClipModel`), every
tensor bit-identical.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import hf_videoprism
from vvt.convert import torch_layout
from vvt.convert import weight_files

HF_CLASS = 'VideoPrismClipModel'
# transformers' VideoPrismTextConfig defaults (absent from a diff-only config.json).
TEXT_DEFAULTS = dict(model_type='videoprism_text_model', vocab_size=32000, hidden_size=768, intermediate_size=3072,
                     num_hidden_layers=12, num_attention_heads=12, max_position_embeddings=64, hidden_act='relu',
                     layer_norm_eps=1e-6, apply_l2norm=True, qkv_bias=True, attn_logit_softcapping=50.0)
VISION_EXTRA = dict(num_auxiliary_layers=2, apply_l2norm=True)  # the VideoPrismVisionConfig fields of the clip model
ACTIVATIONS = {'relu': 'relu', 'gelu': 'gelu', 'gelu_python': 'gelu', 'gelu_pytorch_tanh': 'gelu_tanh',
               'gelu_new': 'gelu_tanh'}
POSITION_ATOL = 1e-5  # the file's sinusoid against vvt's (float32 sin/cos of different libraries)


def read_text_config(hf_config: Mapping | None, vision: dict) -> dict:
  """The text_config of a VideoPrismConfig over transformers' defaults, checked against the (read) vision config
  `vision` and what vvt expresses (ValueError naming hf_config.text_config.FIELD)."""
  given = dict((hf_config or {}).get('text_config') or {})
  cfg = {**TEXT_DEFAULTS, **given}
  if cfg['model_type'] != TEXT_DEFAULTS['model_type']:
    raise ValueError(f"hf_config.text_config.model_type is {cfg['model_type']!r}, not 'videoprism_text_model'")
  try:
    conversion.check_hf_sizes({**cfg, 'num_channels': 3}, ('vocab_size', 'hidden_size', 'intermediate_size',
                                                          'num_hidden_layers', 'num_attention_heads',
                                                          'max_position_embeddings'), 'num_channels')
  except ValueError as e:
    raise ValueError(str(e).replace('hf_config.', 'hf_config.text_config.')) from None
  if cfg['hidden_act'] not in ACTIVATIONS:
    raise ValueError(f"hf_config.text_config.hidden_act={cfg['hidden_act']!r}: vvt's text tower takes "
                     f"{', '.join(ACTIVATIONS)}")
  if cfg['hidden_size'] % cfg['num_attention_heads']:
    raise ValueError(f"hf_config.text_config.hidden_size={cfg['hidden_size']} is not divisible by its "
                     f"num_attention_heads={cfg['num_attention_heads']}")
  for name, video in (('hidden_size', 'hidden_size'), ('qkv_bias', 'qkv_bias'), ('apply_l2norm', 'apply_l2norm')):
    if cfg[name] != vision[video]:
      raise ValueError(f'hf_config.text_config.{name}={cfg[name]!r} but vision_config.{video}={vision[video]!r}: '
                       'vvt compares the two towers\' embeddings as they are, with one setting for both')
  cap = cfg['attn_logit_softcapping']
  if cap is not None and (not isinstance(cap, (int, float)) or isinstance(cap, bool) or cap <= 0):
    raise ValueError(f'hf_config.text_config.attn_logit_softcapping must be a number > 0, got {cap!r}')
  return cfg


def text_fields(text: dict) -> dict:
  """The `model.text` fields of a (read) text config."""
  cap = text['attn_logit_softcapping']
  return dict(family='videoprism', vocab_size=text['vocab_size'], hidden_size=text['hidden_size'],
              num_layers=text['num_hidden_layers'], num_heads=text['num_attention_heads'],
              mlp_dim=text['intermediate_size'], max_length=text['max_position_embeddings'],
              activation=ACTIVATIONS[text['hidden_act']], layer_norm_eps=float(text['layer_norm_eps']),
              attention_logit_cap=None if cap is None else float(cap), causal=True,
              normalize=bool(text['apply_l2norm']), logit_scale=0.0, logit_bias=None)


def _buffers(w: conversion.Writer, text: dict) -> None:
  """The file's position table and ids, checked against what vvt computes, marked as read."""
  from vvt.models.text import sinusoid
  length, dim = text['max_position_embeddings'], text['hidden_size']
  table = w.src.get('text_model.embeddings.position_embedding')
  if table is not None:
    diff = float(np.abs(np.asarray(table, np.float64) - sinusoid(length, dim)).max()) if table.shape == (
        length, dim) else float('inf')
    if diff > POSITION_ATOL:
      raise weight_files.WeightFileError(
          f'{w.src.origin}: text_model.embeddings.position_embedding (shape {tuple(table.shape)}) is not the '
          f'sinusoid of {length} x {dim} vvt computes (max difference {diff:.3g})')
    w.report.notes.append(f'text_model.embeddings.position_embedding: the fixed sinusoid vvt computes (max '
                          f'difference {diff:.2g})')
  ids = w.src.state.get('text_model.embeddings.position_ids')
  if ids is not None:
    w.src.used.add('text_model.embeddings.position_ids')
    if np.asarray(ids).reshape(-1).tolist() != list(range(length)):
      raise weight_files.WeightFileError(f'{w.src.origin}: text_model.embeddings.position_ids is not 0 ... '
                                         f'{length - 1}')


def text_tower(w: conversion.Writer, text: dict) -> None:
  """text_model.* -> text/... (see the module docstring)."""
  w.copy('text/token_embedding/embedding', 'text_model.embeddings.token_embedding.weight')
  w.copy('text/cls', 'text_model.embeddings.cls_emb')
  n = text['num_hidden_layers']
  for i in range(n):
    torch_layout.torch_separate_block(w, f'text/block_{i}', f'text_model.layers.{i}', text['num_attention_heads'],
                                      torch_layout.HF_NEW)
  conversion.check_layer_count((int(k.split('.')[2]) for k in w.src.keys() if k.startswith('text_model.layers.')),
                               n, 'text_config.num_hidden_layers')
  torch_layout.torch_layer_norm(w, 'text/encoder_norm', 'text_model.layernorm')
  _buffers(w, text)


def _auxiliary_layers(w: conversion.Writer, vision: dict) -> None:
  n = vision['num_auxiliary_layers']
  for i in range(n):
    if not torch_layout.torch_separate_block(w, f'video/pooler/layers/block_{i}', f'video_model.auxiliary_layers.{i}',
                                             vision['num_attention_heads'], torch_layout.HF_NEW):
      raise ValueError('hf_config.vision_config.qkv_bias=False: vvt\'s pooler blocks (the auxiliary layers) have '
                       'q/k/v biases')
  conversion.check_layer_count((int(k.split('.')[2]) for k in w.src.keys()
                                if k.startswith('video_model.auxiliary_layers.')), n,
                               'vision_config.num_auxiliary_layers')


@weight_files.names_its_file
def convert(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *, num_frames: int | None = None,
            image_size: int | None = None) -> conversion.Converted:
  """HF VideoPrismClipModel state dict (+ config.json dict) -> vvt params of the video-text model + its fields."""
  given = {**VISION_EXTRA, **dict((hf_config or {}).get('vision_config') or {})}
  cfg = hf_videoprism.read_config(hf_config)
  vision = {**cfg, 'num_auxiliary_layers': given['num_auxiliary_layers'], 'apply_l2norm': given['apply_l2norm']}
  aux = vision['num_auxiliary_layers']
  if not isinstance(aux, int) or isinstance(aux, bool) or aux < 0:
    raise ValueError(f'hf_config.vision_config.num_auxiliary_layers must be an int >= 0, got {aux!r}')
  text = read_text_config(hf_config, vision)
  w = conversion.Writer(conversion.Source(state, 'Hugging Face VideoPrismClipModel checkpoint'))
  table, th, qkv_bias = hf_videoprism.encoders(w, cfg, 'video_model.vision_model.', root='video/')
  run_frames, run_size = hf_videoprism.run_clip(cfg, th, num_frames, image_size)
  _auxiliary_layers(w, vision)
  hf_videoprism.pooler(w, cfg, 'video_model.head', 'video_model.head_layernorm', root='video/')
  text_tower(w, text)
  w.flat['logit_scale'] = np.zeros((), np.float32)
  w.report.initialised.append(('logit_scale', 'VideoPrismClipModel has no learned temperature: 0 (exp(0) = 1, '
                                              'its logits are the cosines)'))
  fields = hf_videoprism.model_fields(cfg, num_frames=run_frames, image_size=run_size, num_classes=None,
                                      table_grid=table)
  fields['attentive_pooler'].update(depth=int(vision['num_auxiliary_layers']), mlp_dim=int(cfg['intermediate_size']))
  fields.update(qkv_bias=bool(qkv_bias), text=text_fields(text))
  return w.result(fields)


# ------------------------------------------------------------------------------------------ vvt -> HF


def check(m) -> None:
  """NotExpressible (one line naming the field) for a resolved video-text model VideoPrismClipModel cannot
  express: its video tower as `hf_videoprism.check` says, its text tower and similarity as the reader writes
  them."""
  hf_videoprism.check(m)
  t = m.text
  p = m.attentive_pooler
  if p.depth and p.mlp_dim != m.mlp_dim:
    raise torch_layout.NotExpressible(f'model.attentive_pooler.mlp_dim={p.mlp_dim}: {HF_CLASS}\'s auxiliary layers '
                                      f'have the encoders\' mlp_dim={m.mlp_dim}')
  wanted = (('family', 'videoprism'), ('causal', True), ('logit_bias', None),
            ('layer_norm_eps', m.layer_norm_eps), ('attention_logit_cap', m.attention_logit_cap))
  for field, value in wanted:
    if t[field] != value:
      raise torch_layout.NotExpressible(f'model.text.{field}={t[field]!r}: {HF_CLASS} needs {value!r}')


def text_config(m) -> dict:
  """The VideoPrismTextConfig fields of a resolved video-text model."""
  t = m.text
  act = {'relu': 'relu', 'gelu': 'gelu_python', 'gelu_tanh': 'gelu_pytorch_tanh'}[t.activation]
  return dict(model_type='videoprism_text_model', vocab_size=int(t.vocab_size), hidden_size=int(t.hidden_size),
              intermediate_size=int(t.mlp_dim), num_hidden_layers=int(t.num_layers),
              num_attention_heads=int(t.num_heads), max_position_embeddings=int(t.max_length), hidden_act=act,
              layer_norm_eps=float(t.layer_norm_eps), apply_l2norm=bool(t.normalize), qkv_bias=bool(m.qkv_bias),
              attn_logit_softcapping=float(t.attention_logit_cap), pad_token_id=0)


def to_hf(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt params (per-layer layout) of a VideoPrism video-text model + its resolved config -> (config.json dict,
  state dict) of a `VideoPrismClipModel`: the inverse of `convert`, every tensor bit-identical (the position
  buffers left to transformers, see the module docstring)."""
  m = model_cfg
  check(m)
  w = torch_layout.TorchState(params, HF_CLASS)
  hf_videoprism.encoders_to_hf(w, m, 'video_model.vision_model', root='video/')
  bias = (True,) * 3
  for i in range(m.attentive_pooler.depth):
    w.separate_block(f'video_model.auxiliary_layers.{i}', f'video/pooler/layers/block_{i}', torch_layout.HF_NEW, bias)
  hf_videoprism.pooler_to_hf(w, 'video_model.head', 'video_model.head_layernorm', root='video/')
  w.copy('text_model.embeddings.token_embedding.weight', 'text/token_embedding/embedding')
  w.copy('text_model.embeddings.cls_emb', 'text/cls')
  for i in range(m.text.num_layers):
    w.separate_block(f'text_model.layers.{i}', f'text/block_{i}', torch_layout.HF_NEW,
                     (True if m.qkv_bias else None,) * 3)
  w.layer_norm('text_model.layernorm', 'text/encoder_norm')
  scale = float(w.take('logit_scale'))
  if scale != 0.0:
    raise torch_layout.NotExpressible(f'the learned logit_scale is {scale:.6g}: {HF_CLASS} has no temperature of '
                                      'its own (its logits are the cosines: logit_scale 0)')
  vision = {**hf_videoprism.vision_config(m), 'num_auxiliary_layers': int(m.attentive_pooler.depth),
            'apply_l2norm': bool(m.text.normalize)}
  hf = dict(model_type='videoprism', architectures=[HF_CLASS], vision_config=vision, text_config=text_config(m))
  return hf, w.result()
