"""Readers of image ViT checkpoints into one canonical flat layout (flax shapes), used by `image_init`.

Formats (detected from the names when format='auto'):
  big_vision / AugReg `.npz` and scenic / flax trees (`.npz`, `.msgpack`): `embedding/kernel` (p, p, C, D), `cls`,
      `Transformer/posembed_input/pos_embedding` (or big_vision's top-level `pos_embedding`),
      `Transformer/encoderblock_i/{LayerNorm_a, MultiHeadDotProductAttention_b, LayerNorm_c, MlpBlock_d}` (the two
      LayerNorms in index order: before attention, before the MLP; AugReg numbers them 0, 1, 2, 3, big_vision and
      scenic 0, 0, 1, 0), scanned big_vision blocks `Transformer/encoderblock/...` (leading layer axis),
      `Transformer/encoder_norm`, `pre_logits`, `head`.
  Hugging Face ViT `.safetensors`/`.bin` (old `encoder.layer.i.attention.attention.query` and new
      `layers.i.attention.q_proj` names, with or without the `vit.` prefix), and timm (`blocks.i.attn.qkv`, ...).

Canonical names: embedding/kernel (p,p,C,D), embedding/bias, cls (1,1,D), pos_embedding (1,[1+]G*G,D),
blocks/i/{norm, mlp_norm}/{scale,bias}, blocks/i/attention/{query,key,value}/{kernel (D,H,d_h), bias (H,d_h)},
blocks/i/attention/out/{kernel (H,d_h,D), bias}, blocks/i/mlp/Dense_{0,1}/{kernel,bias}, encoder_norm/{scale,bias},
pre_logits/{kernel,bias}, head/{kernel,bias}.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np

from vvt.convert import conversion
from vvt.convert import torch_layout
from vvt.convert import weight_files

FORMATS = ('auto', 'big_vision', 'scenic', 'flax', 'hf', 'timm')


@dataclasses.dataclass
class ImageViT:
  tensors: dict        # canonical name -> float32 array
  origin: dict         # canonical name -> where it came from ('file key' or 'how of file key')
  unused: list         # file keys not read
  format: str
  path: str = ''

  @property
  def num_layers(self):
    return len({k.split('/')[1] for k in self.tensors if k.startswith('blocks/')})

  @property
  def has_cls_row(self):
    rows = self.tensors['pos_embedding'].shape[1]
    return rows != int(np.sqrt(rows)) ** 2

  @property
  def grid(self):
    rows = self.tensors['pos_embedding'].shape[1] - int(self.has_cls_row)
    g = int(round(np.sqrt(rows)))
    if g * g != rows:
      raise ValueError(f'{self.path}: positional embedding has {rows} patch rows, not a square grid')
    return g, g


def detect_format(state) -> str:
  keys = list(state)
  if any(k.startswith(('Transformer/', 'embedding/')) for k in keys):
    return 'flax'
  if any('embeddings.patch_embeddings' in k for k in keys):
    return 'hf'
  if any(k.startswith('patch_embed.') or '.patch_embed.' in k for k in keys):
    return 'timm'
  raise ValueError('cannot tell the image checkpoint format from its names (expected big_vision/scenic '
                   "'embedding/kernel', HF 'embeddings.patch_embeddings...', or timm 'patch_embed.proj...'); "
                   f'first names: {", ".join(keys[:5])}')


def _flax_block(w: conversion.Writer, i: int, key: str):
  src = w.src
  sub = sorted({k[len(key) + 1:].split('/')[0] for k in src.keys() if k.startswith(key + '/')})
  norms = sorted((s for s in sub if s.startswith('LayerNorm_')), key=lambda s: int(s.split('_')[1]))
  attns = [s for s in sub if s.startswith('MultiHeadDotProductAttention')]
  mlps = [s for s in sub if s.startswith('MlpBlock')]
  if len(norms) != 2 or len(attns) != 1 or len(mlps) != 1:
    raise ValueError(f'{src.origin}: {key} has sub-modules {sub}; expected two LayerNorm_*, one '
                     'MultiHeadDotProductAttention_* and one MlpBlock_*')
  for name, ln in (('norm', norms[0]), ('mlp_norm', norms[1])):
    for p in ('scale', 'bias'):
      w.copy(f'blocks/{i}/{name}/{p}', f'{key}/{ln}/{p}')
  for part in ('query', 'key', 'value', 'out'):
    for p in ('kernel', 'bias'):
      k = f'{key}/{attns[0]}/{part}/{p}'
      if k in src:
        w.copy(f'blocks/{i}/attention/{part}/{p}', k)
  for dense in ('Dense_0', 'Dense_1'):
    for p in ('kernel', 'bias'):
      w.copy(f'blocks/{i}/mlp/{dense}/{p}', f'{key}/{mlps[0]}/{dense}/{p}')


def _read_flax(state, origin) -> conversion.Writer:
  state = dict(state)
  # big_vision scan: Transformer/encoderblock/<...> with a leading layer axis -> encoderblock_i.
  scanned = [k for k in state if k.startswith('Transformer/encoderblock/')]
  if scanned:
    depth = state[scanned[0]].shape[0]
    for k in scanned:
      v = state.pop(k)
      for i in range(depth):
        state[k.replace('Transformer/encoderblock/', f'Transformer/encoderblock_{i}/')] = v[i]
  src = conversion.Source(state, origin)
  w = conversion.Writer(src)
  w.copy('embedding/kernel', 'embedding/kernel')
  w.copy('embedding/bias', 'embedding/bias')
  if 'cls' in src:
    w.copy('cls', 'cls')
  pos = 'Transformer/posembed_input/pos_embedding' if 'Transformer/posembed_input/pos_embedding' in src \
      else 'pos_embedding'
  w.copy('pos_embedding', pos)
  layers = sorted({int(m.group(1)) for k in src.keys() if (m := re.match(r'^Transformer/encoderblock_(\d+)/', k))})
  if not layers or layers != list(range(len(layers))):
    raise ValueError(f'{origin}: Transformer/encoderblock_i missing or not numbered 0..n-1: {layers}')
  for i in layers:
    _flax_block(w, i, f'Transformer/encoderblock_{i}')
  for p in ('scale', 'bias'):
    w.copy(f'encoder_norm/{p}', f'Transformer/encoder_norm/{p}')
  for opt in ('pre_logits', 'head'):
    if f'{opt}/kernel' in src:
      w.copy(f'{opt}/kernel', f'{opt}/kernel')
      w.copy(f'{opt}/bias', f'{opt}/bias')
  return w


_HF_OLD, _HF_NEW = torch_layout.HF_OLD, torch_layout.HF_NEW


def _read_torch(state, fmt, num_heads, origin) -> conversion.Writer:
  state = conversion.strip_prefix(state, ('module.',))
  if fmt == 'hf':
    prefix = 'vit.' if any(k.startswith('vit.') for k in state) else ''
  else:
    prefix = ''
  src = conversion.Source(state, origin)
  w = conversion.Writer(src)
  if fmt == 'hf':
    emb = f'{prefix}embeddings.'
    kernel = src.take(f'{emb}patch_embeddings.projection.weight')
    w.put('embedding/kernel', kernel.transpose(2, 3, 1, 0), f'{emb}patch_embeddings.projection.weight',
          'Conv2d (D,C,h,w) -> (h,w,C,D)')
    w.copy('embedding/bias', f'{emb}patch_embeddings.projection.bias')
    w.copy('cls', f'{emb}cls_token')
    w.copy('pos_embedding', f'{emb}position_embeddings')
    layers = sorted({int(m.group(2)) for k in state
                     if (m := re.match(rf'^{re.escape(prefix)}(encoder\.layer|layers)\.(\d+)\.', k))})
  else:
    kernel = src.take('patch_embed.proj.weight')
    w.put('embedding/kernel', kernel.transpose(2, 3, 1, 0), 'patch_embed.proj.weight', 'Conv2d (D,C,h,w) -> (h,w,C,D)')
    w.copy('embedding/bias', 'patch_embed.proj.bias')
    if 'cls_token' in src:
      w.copy('cls', 'cls_token')
    w.copy('pos_embedding', 'pos_embed')
    layers = sorted({int(m.group(1)) for k in state if (m := re.match(r'^blocks\.(\d+)\.', k))})
  if not layers or layers != list(range(len(layers))):
    raise ValueError(f'{origin}: transformer layers missing or not numbered 0..n-1: {layers}')
  d = kernel.shape[0]
  num_heads = num_heads or max(d // 64, 1)
  for i in layers:
    n = f'blocks/{i}'
    if fmt == 'hf':
      base = f'{prefix}layers.{i}' if f'{prefix}layers.{i}.layernorm_before.weight' in src \
          else f'{prefix}encoder.layer.{i}'
      names = _HF_NEW if f'{base}.{_HF_NEW["q"]}.weight' in src else _HF_OLD
      torch_layout.torch_separate_block(w, n, base, num_heads, names, norm='norm', attention='attention')
    else:
      torch_layout.torch_vit_block(w, n, f'blocks.{i}', num_heads, norm='norm', attention='attention')
  if fmt == 'hf':
    torch_layout.torch_layer_norm(w, 'encoder_norm', f'{prefix}layernorm')
    if 'classifier.weight' in src:
      torch_layout.torch_dense(w, 'head', 'classifier')
  else:
    torch_layout.torch_layer_norm(w, 'encoder_norm', 'norm')
    if 'head.weight' in src:
      torch_layout.torch_dense(w, 'head', 'head')
  return w


def read(path_or_state, format: str = 'auto', num_heads: int | None = None) -> ImageViT:
  """An image ViT checkpoint (path or flat state dict) -> ImageViT in canonical names.

  num_heads: only needed for PyTorch layouts (heads are not stored there); default hidden_size // 64.
  Any error on the file's contents (unknown layout, missing or malformed tensors) names the file.
  """
  if format not in FORMATS:
    raise ValueError(f'init_from.format must be one of {FORMATS}, got {format!r}')
  path = path_or_state if isinstance(path_or_state, str) else '<state dict>'
  state = weight_files.load_state(path_or_state) if isinstance(path_or_state, str) else dict(path_or_state)
  origin = f'image checkpoint {path}'
  with weight_files.naming_file(path if isinstance(path_or_state, str) else None, 'cannot read it as an image ViT'):
    fmt = detect_format(state) if format == 'auto' else format
    fmt = 'flax' if fmt in ('big_vision', 'scenic') else fmt
    w = _read_flax(state, origin) if fmt == 'flax' else _read_torch(state, fmt, num_heads, origin)
  origin_of = {name: key for name, key in w.report.loaded}
  origin_of.update({name: how for name, how in w.report.transformed})
  return ImageViT(w.flat, origin_of, w.src.unused(), fmt, path)
