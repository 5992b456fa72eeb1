"""Hugging Face VideoMAE -> vvt ViViT Model 1 (spatiotemporal, joint space-time attention) without a class token.

Reads `VideoMAEForVideoClassification` (`videomae.*`, `fc_norm`, `classifier`), the bare `VideoMAEModel` (no
prefix, no head) and `VideoMAEForPreTraining` (`videomae.*`, and its `encoder_to_decoder`, `mask_token` and
`decoder.*` as the `decoder` params of task.name='mae', vvt/tasks/mae_model.py; its head: one output, never read).
A checkpoint without `classifier` gets a new head of `num_classes` (zero, as every fresh vvt head), and with mean
pooling a new final LayerNorm (scale 1, bias 0); the report lists both as freshly initialised. Weights are read
from safetensors only (`hf_folder.weights_file`): a pickled `pytorch_model.bin` is refused, never opened.

Key names (prefix `videomae.` or none), layer i:
  `embeddings.patch_embeddings.projection`      Conv3d (D, 3, tubelet_size, patch_size, patch_size), tokens in
                                                (t, h, w) order as vvt's tubelet embedding
  `encoder.layer.i.layernorm_before`, `layernorm_after`
  `encoder.layer.i.attention.attention.{query,key,value}.weight`, and the biases (the key projection has none)
      in files (save_pretrained, the hub's, VideoMAE's own code): `q_bias`, `v_bias`;
      in transformers 5's in-memory state dict: `query.bias`, `value.bias`
  `encoder.layer.i.attention.output.dense`, `intermediate.dense`, `output.dense`
  `layernorm` (use_mean_pooling=False) | `fc_norm` (use_mean_pooling=True), `classifier`

What the model does and the vvt fields that say it:
  * position: the fixed sine-cosine table of `get_sinusoid_encoding_table` over the T*N token index (Vaswani
    et al.; dim 2i sin, 2i+1 cos of pos / 10000^(2i/D)). It is no weight of the file nor a parameter of
    transformers, and never trained: positional_embedding='sinusoidal', a constant the model rebuilds from the
    grid (vvt.models.embedding.sinusoidal_table, the same formula), so it stays fixed in fine-tuning.
  * attention: q and v biases, no k bias (`qv_bias`, older configs `qkv_bias`): qkv_bias, key_bias=False.
  * no class token: classifier='gap'; use_mean_pooling=True: token mean then `fc_norm`, a torch LayerNorm of
    default eps 1e-5 whatever layer_norm_eps (pooling='mean_then_norm', encoder_norm_eps=1e-5); False: `layernorm`
    (layer_norm_eps) over the tokens, then the first one, the tubelet at t = h = w = 0 (pooling='first_token').
  * `layer_norm_eps` of the blocks (transformers' default 1e-12), `hidden_act` ('gelu': exact erf GELU).
What vvt cannot express is refused with one line naming the config field: another model_type, a hidden_act that
is no GELU, num_channels other than 3, frames or frame size not divisible by the tubelet, non-square frames or
patches, a tubelet or patch size the weights contradict. A missing tensor is named.
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
from vvt.models import frame_size

# transformers' VideoMAEConfig defaults (absent from a diff-only config.json).
HF_DEFAULTS = dict(model_type='videomae', image_size=224, patch_size=16, num_channels=3, num_frames=16,
                   tubelet_size=2, num_attention_heads=12, num_hidden_layers=12, hidden_act='gelu',
                   layer_norm_eps=1e-12, qv_bias=True, use_mean_pooling=True)
FC_NORM_EPS = 1e-5  # nn.LayerNorm(hidden_size): torch's default eps, not the config's layer_norm_eps
_LAYER = re.compile(r'^(?:videomae\.)?encoder\.layer\.(\d+)\.')


def read_config(hf_config: Mapping | None) -> dict:
  """config.json (any generation) over transformers' defaults, its fields checked against what vvt expresses
  (ValueError naming the field)."""
  cfg = {**HF_DEFAULTS, **dict(hf_config or {})}
  if 'qkv_bias' in (hf_config or {}) and 'qv_bias' not in (hf_config or {}):  # transformers < 5 spelling
    cfg['qv_bias'] = cfg['qkv_bias']
  if cfg['model_type'] != 'videomae':
    raise ValueError(f"hf_config.model_type is {cfg['model_type']!r}, not 'videomae'")
  if cfg.get('attention_type', 'joint_space_time') != 'joint_space_time':
    raise ValueError(f"hf_config.attention_type={cfg['attention_type']!r}: VideoMAE attends jointly over space "
                     "and time ('joint_space_time')")
  cfg['patch_size'] = hf_config_reading.square_patch_size(cfg['patch_size'])
  cfg['image_size'] = frame_size.config_value(frame_size.parse(cfg['image_size'], 'hf_config.image_size'))
  conversion.check_hf_sizes(cfg, ('patch_size', 'num_frames', 'tubelet_size', 'num_attention_heads',
                                  'num_hidden_layers'), 'num_channels')
  if cfg['num_frames'] % cfg['tubelet_size']:
    raise ValueError(f"hf_config.num_frames={cfg['num_frames']} is not a multiple of "
                     f"hf_config.tubelet_size={cfg['tubelet_size']} (vvt tokenises whole tubelets only)")
  height, width = frame_size.parse(cfg['image_size'])
  if height % cfg['patch_size'] or width % cfg['patch_size']:
    raise ValueError(f"hf_config.image_size={cfg['image_size']} is not a multiple of "
                     f"hf_config.patch_size={cfg['patch_size']}")
  cfg['gelu_approximate'] = hf_config_reading.gelu_approximate(cfg['hidden_act'])
  return cfg


def _fresh(w: conversion.Writer, name: str, value: np.ndarray, why: str):
  """A parameter the checkpoint does not have: the value vvt's own init gives it, reported as initialised."""
  w.flat[name] = np.asarray(value, np.float32)
  w.report.initialised.append((name, why))


def _attention(w: conversion.Writer, name: str, key: str, num_heads: int, qv_bias: bool, file_names: bool):
  """query / key / value Linear(D, D) (no key bias) + output dense -> vvt attention `name`."""
  for part, torch_name in (('query', 'query'), ('key', 'key'), ('value', 'value')):
    weight = w.src.matrix(f'{key}.attention.{torch_name}.weight')
    d_out, d = weight.shape
    if d_out % num_heads:
      raise weight_files.WeightFileError(f'{w.src.origin}: {key}.attention.{torch_name}: {d_out} features are not '
                                   f'divisible by num_attention_heads={num_heads}')
    w.put(f'{name}/{part}/kernel', weight.T.reshape(d, num_heads, d_out // num_heads),
          f'{key}.attention.{torch_name}.weight', 'transposed, split into heads')
    if qv_bias and part != 'key':
      bias_key = f'{key}.attention.{part[0]}_bias' if file_names else f'{key}.attention.{torch_name}.bias'
      w.put(f'{name}/{part}/bias', w.src.take(bias_key).reshape(num_heads, d_out // num_heads), bias_key,
            'split into heads')
  torch_layout.torch_attention_out(w, f'{name}/out', f'{key}.output.dense', num_heads)


def _layer(w: conversion.Writer, n: str, key: str, heads: int, qv_bias: bool, file_names: bool):
  """One transformers VideoMAELayer `key` -> the vvt joint-attention block `n`."""
  torch_layout.torch_layer_norm(w, f'{n}/joint_norm', f'{key}.layernorm_before')
  _attention(w, f'{n}/joint_attention', f'{key}.attention', heads, qv_bias, file_names)
  torch_layout.torch_layer_norm(w, f'{n}/mlp_norm', f'{key}.layernorm_after')
  torch_layout.torch_dense(w, f'{n}/mlp/Dense_0', f'{key}.intermediate.dense')
  torch_layout.torch_dense(w, f'{n}/mlp/Dense_1', f'{key}.output.dense')


def _decoder(w: conversion.Writer, cfg: dict, qv_bias: bool, file_names: bool):
  """VideoMAEForPreTraining's `encoder_to_decoder`, `mask_token` and `decoder` -> the vvt `decoder` params of
  task.name='mae' (vvt/tasks/mae_model.py; its sizes: task.mae.decoder_depth, decoder_width, decoder_heads)."""
  torch_layout.torch_dense(w, 'decoder/encoder_to_decoder', 'encoder_to_decoder', bias=False)
  w.copy('decoder/mask_token', 'mask_token')
  for i in range(int(cfg['decoder_num_hidden_layers'])):
    _layer(w, f'decoder/layers/block_{i}', f'decoder.decoder_layers.{i}', int(cfg['decoder_num_attention_heads']),
           qv_bias, file_names)
  torch_layout.torch_layer_norm(w, 'decoder/norm', 'decoder.norm')
  torch_layout.torch_dense(w, 'decoder/head', 'decoder.head')


def _head(w: conversion.Writer, p: str, cfg: dict, hidden: int, num_classes):
  """The final LayerNorm (`fc_norm` or `layernorm`) and the classifier, or fresh ones; returns the classes."""
  norm = 'fc_norm' if cfg['use_mean_pooling'] else f'{p}layernorm'
  if f'{norm}.weight' in w.src or not cfg['use_mean_pooling']:
    torch_layout.torch_layer_norm(w, 'encoder/encoder_norm', norm)
  else:
    _fresh(w, 'encoder/encoder_norm/scale', np.ones(hidden), 'new fc_norm (the checkpoint has none)')
    _fresh(w, 'encoder/encoder_norm/bias', np.zeros(hidden), 'new fc_norm (the checkpoint has none)')
  if 'classifier.weight' in w.src:
    torch_layout.torch_dense(w, 'head/output_projection', 'classifier')
    return int(w.src.state['classifier.weight'].shape[0])
  if num_classes is None:
    raise ValueError('the VideoMAE checkpoint has no classifier: give the number of classes of the new head '
                     '(model.num_classes of the config)')
  heads = {'': num_classes} if isinstance(num_classes, int) else {f'_{k}': v for k, v in dict(num_classes).items()}
  for suffix, n in heads.items():
    _fresh(w, f'head/output_projection{suffix}/kernel', np.zeros((hidden, int(n))), 'new classifier (backbone only)')
    _fresh(w, f'head/output_projection{suffix}/bias', np.zeros(int(n)), 'new classifier (backbone only)')
  return num_classes


@weight_files.names_its_file
def convert(state: Mapping[str, np.ndarray], hf_config: Mapping | None = None, *, num_heads: int | None = None,
            num_frames: int | None = None, image_size: int | None = None, num_classes=None) -> conversion.Converted:
  """HF VideoMAE state dict (+ config.json dict) -> vvt params + the exact model fields.

  num_heads / num_frames / image_size fill in where no config is given (else transformers' defaults);
  num_classes: the classes of a new head where the checkpoint has no classifier (a backbone)."""
  cfg = read_config(hf_config)
  if not hf_config:
    cfg.update({k: v for k, v in dict(num_attention_heads=num_heads, num_frames=num_frames,
                                      image_size=image_size).items() if v is not None})
    cfg = read_config(cfg)
  heads = cfg['num_attention_heads']
  tt, th = int(cfg['tubelet_size']), int(cfg['patch_size'])
  w, p, hidden = tubelet_checkpoint.open_checkpoint(state, 'VideoMAE', 'videomae.',
                                                    'embeddings.patch_embeddings.projection', 'num_channels',
                                                    tubelet_size=tt, patch_size=th)
  file_names = not any(k.endswith('.attention.attention.query.bias') for k in state)  # q_bias, v_bias
  for i in range(cfg['num_hidden_layers']):
    _layer(w, f'encoder/layers/block_{i}', f'{p}encoder.layer.{i}', heads, bool(cfg['qv_bias']), file_names)
  if 'decoder.head.weight' in state:  # VideoMAEForPreTraining's whole decoder: kept (task.name='mae')
    _decoder(w, {**HF_DECODER_DEFAULTS, **dict(hf_config or {})}, bool(cfg['qv_bias']), file_names)
  conversion.check_layer_count((int(m.group(1)) for k in state if (m := _LAYER.match(k))), cfg['num_hidden_layers'],
                               'num_hidden_layers')
  if num_classes is None and 'decoder.head.weight' in state:
    num_classes = 1  # a pretraining checkpoint: the one-output head of task.name='mae', never read
  classes = _head(w, p, cfg, hidden, num_classes)
  mean = bool(cfg['use_mean_pooling'])
  fields = dict(
      family='vivit', attention='spatiotemporal', variant=conversion.variant_name(hidden, th, tt),
      tubelet=(tt, th, th), num_frames=int(cfg['num_frames']), image_size=cfg['image_size'],
      num_classes=classes, hidden_size=int(hidden), num_layers=int(cfg['num_hidden_layers']), num_heads=int(heads),
      mlp_dim=int(w.flat['encoder/layers/block_0/mlp/Dense_0/kernel'].shape[1]),
      classifier='gap', class_token=None, pooling='mean_then_norm' if mean else 'first_token',
      positional_embedding='sinusoidal', time_embedding_rows=None, representation_size=None,
      temporal_projection=False, layer_norm_eps=float(cfg['layer_norm_eps']),
      encoder_norm_eps=FC_NORM_EPS if mean else float(cfg['layer_norm_eps']),
      gelu_approximate=cfg['gelu_approximate'], qkv_bias=bool(cfg['qv_bias']), key_bias=False)
  return w.result(fields)


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source hf_videomae`: config.json's sizes, else the vvt config's and those asked; a backbone's
  new head has the config's classes."""
  num_classes = ask.hint('num_classes')
  if ask.hf_config:
    return convert(state, ask.hf_config, num_classes=num_classes)
  return convert(state, ask.hf_config, num_heads=ask.hint('num_heads'), num_frames=ask.frames_hint,
                 image_size=ask.image_size or ask.hint('image_size'), num_classes=num_classes)


# ------------------------------------------------------------------------------ vvt -> Hugging Face

HF_CLASS = 'VideoMAEForVideoClassification'
# VideoMAEConfig fields the classifier does not use, at transformers' defaults (save_pretrained writes them all).
HF_DECODER_DEFAULTS = dict(decoder_num_attention_heads=6, decoder_hidden_size=384, decoder_num_hidden_layers=4,
                           decoder_intermediate_size=1536, norm_pix_loss=True)


def to_hf(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt joint space-time attention without a class token -> Hugging Face VideoMAEForVideoClassification: (config
  dict, state dict in the names save_pretrained writes: `q_bias`, `v_bias`). The inverse of `convert`.

  model_cfg: the resolved model config. What the class expresses (else NotExpressible naming the field):
  classifier='gap' with pooling 'mean_then_norm' (fc_norm, whose eps is torch's 1e-5: encoder_norm_eps=1e-5) or
  'first_token' (the final LayerNorm with layer_norm_eps), the fixed sine-cosine table
  (positional_embedding='sinusoidal'), square tubelets (t, p, p), exact or tanh GELU, q and v biases or none. A
  vvt key bias is left out: it adds the same q.b_k to every logit of a query's row, so attention never sees it."""
  m = model_cfg
  to_hf_check(m, HF_CLASS)
  mean = m.pooling == 'mean_then_norm'
  w = torch_layout.TorchState(params, HF_CLASS)
  _write_encoder(w, m)
  w.layer_norm('fc_norm' if mean else 'videomae.layernorm', 'encoder/encoder_norm')
  w.dense('classifier', 'head/output_projection')
  return dict(_encoder_config(m, HF_CLASS), **HF_DECODER_DEFAULTS), w.result()


def to_hf_check(m, hf_class: str) -> None:
  """NotExpressible (one line naming the field) for a resolved model config VideoMAE's `hf_class` cannot express
  (see `to_hf`)."""
  torch_layout.require(m, 'attention', ('spatiotemporal', 'joint'), hf_class)
  torch_layout.require(m, 'classifier', 'gap', hf_class)
  torch_layout.require(m, 'positional_embedding', 'sinusoidal', hf_class, 'its fixed sine-cosine table')
  torch_layout.require(m, 'pooling', ('mean_then_norm', 'first_token'), hf_class,
                       'use_mean_pooling True or False: the mean of the tokens normalised, or the first token')
  _, th, tw = m.tubelet
  if th != tw:
    raise torch_layout.NotExpressible(f'model.tubelet={tuple(m.tubelet)}: {hf_class} needs square patches (t, p, p)')
  mean = m.pooling == 'mean_then_norm'
  torch_layout.require(m, 'encoder_norm_eps', FC_NORM_EPS if mean else m.layer_norm_eps, hf_class,
                       "fc_norm has torch's eps 1e-5" if mean else 'its final LayerNorm has layer_norm_eps')


def _write_layer(w: torch_layout.TorchState, key: str, name: str, m) -> None:
  """The vvt joint-attention block `name` -> the VideoMAELayer tensors `key.*` (q and v biases; a key bias left
  out, see `to_hf`)."""
  attention = f'{name}/joint_attention'
  w.layer_norm(f'{key}.layernorm_before', f'{name}/joint_norm')
  for part in ('query', 'key', 'value'):
    weight, bias = w.projection(attention, part, True if m.qkv_bias and part != 'key' else None)
    w.put(f'{key}.attention.attention.{part}.weight', weight)
    if bias is not None:
      w.put(f'{key}.attention.attention.{part[0]}_bias', bias)
  if m.qkv_bias and m.key_bias:
    w.drop(f'{attention}/key/bias')  # softmax is blind to it (to_hf's docstring)
  w.attention_out(f'{key}.attention.output.dense', f'{attention}/out')
  w.layer_norm(f'{key}.layernorm_after', f'{name}/mlp_norm')
  w.dense(f'{key}.intermediate.dense', f'{name}/mlp/Dense_0')
  w.dense(f'{key}.output.dense', f'{name}/mlp/Dense_1')


def _write_encoder(w: torch_layout.TorchState, m) -> None:
  """The tokeniser and blocks of resolved model config `m` -> `videomae.embeddings.*`, `videomae.encoder.*`."""
  w.patch_embedding('videomae.embeddings.patch_embeddings.projection', 'embedding/conv')
  for i in range(m.num_layers):
    _write_layer(w, f'videomae.encoder.layer.{i}', f'encoder/layers/block_{i}', m)


def _encoder_config(m, hf_class: str) -> dict:
  """The config.json fields of the encoder of resolved model config `m`."""
  tt, th, _ = m.tubelet
  return dict(
      model_type='videomae', architectures=[hf_class], image_size=torch_layout.hf_image_size(m, hf_class, True),
      patch_size=int(th), num_channels=3, num_frames=int(m.num_frames), tubelet_size=int(tt),
      hidden_size=int(m.hidden_size), num_hidden_layers=int(m.num_layers), num_attention_heads=int(m.num_heads),
      intermediate_size=int(m.mlp_dim), hidden_act=torch_layout.hf_activation(m.gelu_approximate),
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.02,
      layer_norm_eps=float(m.layer_norm_eps), qv_bias=bool(m.qkv_bias), use_mean_pooling=m.pooling == 'mean_then_norm')


# ------------------------------------------------------------------------------ the pretraining model

PRETRAINING_CLASS = 'VideoMAEForPreTraining'


def _decoder_shape(decoder: Mapping) -> dict:
  """The VideoMAEConfig decoder fields of vvt `decoder` params (vvt/tasks/mae_model.py)."""
  layers = decoder['layers']
  query = layers['block_0']['joint_attention']['query']['kernel']  # (D', heads, D' / heads)
  return dict(decoder_hidden_size=int(np.shape(query)[0]), decoder_num_hidden_layers=len(layers),
              decoder_num_attention_heads=int(np.shape(query)[1]),
              decoder_intermediate_size=int(np.shape(layers['block_0']['mlp']['Dense_0']['kernel'])[1]))


def to_hf_pretraining(params, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """vvt params of a masked-autoencoding run (task.name='mae': the encoder's and `decoder`; per-layer layout) + its
  resolved model config -> (config.json dict, state dict) of a `VideoMAEForPreTraining`, the inverse of `convert`
  of one (tensors bit-identical). Its encoder has no fc_norm: with pooling='mean_then_norm' the model's final
  LayerNorm is left out (the decoder reads the blocks' tokens, as transformers'), with 'first_token' it is
  `videomae.layernorm`. norm_pix_loss is written True (VideoMAE's, and task.mae's default; an export of a run
writes the run's, `hf_export.write_pretraining`). NotExpressible (one
  line naming the field) for a model VideoMAE cannot express, or params without a decoder."""
  m = model_cfg
  to_hf_check(m, PRETRAINING_CLASS)
  if 'decoder' not in params:
    raise torch_layout.NotExpressible(f'{PRETRAINING_CLASS}: the params hold no decoder (task.name=\'mae\')')
  w = torch_layout.TorchState({k: params[k] for k in ('embedding', 'encoder', 'decoder')}, PRETRAINING_CLASS)
  _write_encoder(w, m)
  if m.pooling == 'mean_then_norm':
    w.drop('encoder/encoder_norm/scale')
    w.drop('encoder/encoder_norm/bias')
  else:
    w.layer_norm('videomae.layernorm', 'encoder/encoder_norm')
  w.put('encoder_to_decoder.weight', np.asarray(w.take('decoder/encoder_to_decoder/kernel')).T)
  w.copy('mask_token', 'decoder/mask_token')
  shape = _decoder_shape(params['decoder'])
  for i in range(shape['decoder_num_hidden_layers']):
    _write_layer(w, f'decoder.decoder_layers.{i}', f'decoder/layers/block_{i}', m)
  w.layer_norm('decoder.norm', 'decoder/norm')
  w.dense('decoder.head', 'decoder/head')
  return dict(_encoder_config(m, PRETRAINING_CLASS), **shape, norm_pix_loss=True), w.result()
