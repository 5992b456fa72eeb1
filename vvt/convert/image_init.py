"""Initialise any vvt video model from an image ViT checkpoint, with the papers' strategies (`init_from`).

    params, report = initialise(params, init, model)     # params: the model's fresh init

`init` is an `init_options.InitSpec` (`init_options.validate` of an `init_from` section, a ConfigDict or dict),
`model` the model's `vvt.models.spec.ModelSpec`. The fields of `init_from`:
  checkpoint (or path)  path of the image checkpoint (.npz big_vision/AugReg/scenic, .msgpack flax,
                        .safetensors/.bin Hugging Face or timm)
  format                'auto' (from names) | 'big_vision' | 'scenic' | 'flax' | 'hf' | 'timm' |
                        'vvt': a vvt *video* model of the same architecture, written by `vvt export`
                        (a .safetensors file with metadata format=vvt; 'auto' recognises it). See below.
  num_heads             heads of the image model (PyTorch layouts only; default: the video model's)
  positional_embedding  'auto' | 'repeat' (ViViT: the 2D table repeated over time, for a joint table) |
                        'separate_time_zero' (TimeSformer / X-ViT: space table from the image, time table zero)
                        'auto' picks by the model's positional_embedding (joint -> repeat, separable -> zero time)
  resize                'bilinear' | 'bicubic' | 'nearest': 2D interpolation of the patch grid when the model's
                        grid differs from the checkpoint's (class-token row kept); bicubic and nearest as torch's
                        `interpolate` (bicubic A = -0.75, align_corners=False), not jax.image.resize's cubic
  tubelet (or tubelet_init)  'central_frame' (ViViT eq. 9: the image filter at the central time index, zeros
                        elsewhere) | 'inflate' (eq. 8: replicated over t and divided by t)
  temporal_attention    'auto' | 'copy_spatial' (TimeSformer: every extra attention stage = a copy of the image
                        attention and its LayerNorm) | 'zero' (ViViT Model 3: all weights of the extra stage zero,
                        so the block is a residual at initialisation). 'auto': zero for ViViT, copy otherwise.
                        Extra projections (TimeSformer temporal_fc, `{stage}_projection`) always start at zero.
  reinit_head           True (default): the classifier keeps the model's fresh init (new classes);
                        False: the image head is loaded (shapes must match).
Which stage is "the image's" is the scheme's `stage_for_image` (vvt/models/schemes.py): 'space' if the scheme has
one, else 'joint', else its single stage (factorised_dot_product) or its last stage (local_global: global, axial:
height). ViViT Model 2 loads the image ViT into its spatial encoder; its temporal encoder, X-ViT's TA head and
new heads keep their fresh init.

Video checkpoints (format 'vvt', e.g. a Kinetics-400 model to start SSv2 or Epic-Kitchens training from, ViViT
Table 3 "Kinetics 400 initialisation"): every parameter of the model is loaded as is from the same name in the file;
the classifier (`head/output_projection*`) keeps its fresh init when reinit_head (new classes, new heads), else
it is loaded too; a positional table whose patch grid differs (another image size) is resized per frame with
`resize` (class-token row kept). A model of another clip length (the file's config says its own) gets its time
axes resized as the family's reference does (`vvt.convert.retarget`: TimeSformer nearest, ViViT torch bicubic;
a joint table's n_t, a time table, a temporal encoder's table; X-ViT's periodic table kept). Any other shape
difference, and any parameter (classifier aside) that only the
model or only the file has, is an error (all listed together), but for a whole top-level part of the file the model
has none of (a pretraining run's predictor, EMA target encoder or decoder): its tensors are left unused. The
file's config (metadata), when present, must be of the same family and attention scheme. num_heads,
positional_embedding, tubelet and temporal_attention do not apply (nothing is transformed but the grid).

The report lists every model parameter as loaded, transformed (how), or freshly initialised, and the file's
unused tensors. All shape mismatches are collected and raised together, each with both shapes.
"""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np

from vvt.convert import conversion
from vvt.convert import image
from vvt.convert import init_options
from vvt.convert import weight_files
from vvt.models import embedding
from vvt.models import schemes


def _resize_grid(grid: np.ndarray, shape, method: str) -> np.ndarray:
  """(h, w, D) -> (shape[0], shape[1], D) by 2D interpolation with half-pixel centres, no antialiasing: 'bilinear',
  or torch's 'bicubic' (A = -0.75, align_corners=False) and 'nearest' (`vvt.models.embedding.resize_table`)."""
  if method != 'bilinear':
    return embedding.resize_table(np.asarray(grid), tuple(shape), method)
  return np.asarray(jax.image.resize(jnp.asarray(grid, jnp.float32), (*shape, grid.shape[-1]), method='linear',
                                     antialias=False))


def spatial_stage(attention: str) -> str:
  """The stage of scheme `attention` that receives the image ViT's attention (vvt.models.schemes)."""
  return schemes.get(attention).stage_for_image


class _Init:
  """Writes into the flat model params, records the report and the shape mismatches."""

  def __init__(self, params, vit: image.ImageViT):
    self.flat = {k: np.asarray(v) for k, v in weight_files.flatten(params).items()}
    self.vit = vit
    self.used: set[str] = set()
    self.done: set[str] = set()
    self.report = conversion.Report()
    self.mismatches: list[str] = []

  def take(self, name):
    self.used.add(name)
    return self.vit.tensors[name]

  def set(self, target, value, source_names, how=None):
    if target not in self.flat:
      return False
    value = np.asarray(value, np.float32)
    expected = self.flat[target].shape
    if value.shape != expected:
      self.mismatches.append(f'  {target}: model {tuple(expected)}, checkpoint {tuple(value.shape)} '
                             f'(from {", ".join(self.vit.origin.get(s, s) for s in source_names)})')
      return False
    self.flat[target] = value
    self.done.add(target)
    src = ', '.join(self.vit.origin.get(s, s) for s in source_names)
    if how is not None:
      self.report.transformed.append((target, f'{how} of {src}'))
    elif all(' of ' not in self.vit.origin.get(s, s) for s in source_names):
      self.report.loaded.append((target, src))
    else:
      self.report.transformed.append((target, src))
    return True

  def load(self, target, name, how=None, fn=None):
    if name not in self.vit.tensors:
      return False
    v = self.take(name)
    return self.set(target, v if fn is None else fn(v), [name], how)

  def zero(self, target, how):
    if target in self.flat:
      self.flat[target] = np.zeros_like(self.flat[target])
      self.done.add(target)
      self.report.transformed.append((target, how))


def _load_block(init: _Init, target: str, i: int, as_stage: str, how=None):
  b = f'blocks/{i}'
  for p in ('scale', 'bias'):
    init.load(f'{target}/{as_stage}_norm/{p}', f'{b}/norm/{p}', how)
  for part in ('query', 'key', 'value', 'out'):
    for p in ('kernel', 'bias'):
      init.load(f'{target}/{as_stage}_attention/{part}/{p}', f'{b}/attention/{part}/{p}', how)


def _encoder(init: _Init, enc: str, stages, projected, num_layers: int, opts, model):
  vit = init.vit
  if num_layers != vit.num_layers:
    init.mismatches.append(f'  {enc}/layers: model has {num_layers} layers, checkpoint {vit.num_layers}')
    return
  main = spatial_stage(model.attention)
  temporal = opts.temporal_attention
  if temporal == 'auto':
    temporal = 'zero' if model.family == 'vivit' else 'copy_spatial'
  for i in range(num_layers):
    t = f'{enc}/layers/block_{i}'
    _load_block(init, t, i, main)
    for stage, proj in zip(stages, projected, strict=True):
      if stage != main:
        if temporal == 'copy_spatial':
          _load_block(init, t, i, stage, f'copied from the image attention ({main}) for the {stage} stage')
        else:
          _load_block(init, t, i, stage, None)  # LayerNorm from the image, attention weights zero below
          for part in ('query', 'key', 'value', 'out'):
            for p in ('kernel', 'bias'):
              init.zero(f'{t}/{stage}_attention/{part}/{p}', f'zeros ({stage} attention, ViViT sec. 3.4)')
      if proj:
        for p in ('kernel', 'bias'):
          init.zero(f'{t}/{stage}_projection/{p}', f'zeros ({stage} projection, TimeSformer temporal_fc)')
    for p in ('scale', 'bias'):
      init.load(f'{t}/mlp_norm/{p}', f'blocks/{i}/mlp_norm/{p}')
    for dense in ('Dense_0', 'Dense_1'):
      for p in ('kernel', 'bias'):
        init.load(f'{t}/mlp/{dense}/{p}', f'blocks/{i}/mlp/{dense}/{p}')
  for p in ('scale', 'bias'):
    init.load(f'{enc}/encoder_norm/{p}', f'encoder_norm/{p}')


def _posembed(init: _Init, enc: str, kind: str, nt: int, grid, opts):
  vit = init.vit
  target = f'{enc}/posembed/pos_embedding'
  if target not in init.flat or 'pos_embedding' not in vit.tensors:
    return
  strategy = opts.positional_embedding
  if strategy == 'auto':
    strategy = 'repeat' if kind == 'joint' else 'separate_time_zero'
  if (kind == 'joint') != (strategy == 'repeat') and nt > 1:
    raise ValueError(f"init_from.positional_embedding={strategy!r} does not fit the model's {kind!r} positional "
                     "embedding ('repeat' is for a joint table, 'separate_time_zero' for separable/spatial)")
  pos = init.take('pos_embedding')
  gh, gw = vit.grid
  img_grid = pos[0, int(vit.has_cls_row):].reshape(gh, gw, -1)
  how = []
  if (gh, gw) != tuple(grid):
    img_grid = _resize_grid(img_grid, grid, opts.resize)
    how.append(f'{opts.resize} resize of the {gh}x{gw} grid to {grid[0]}x{grid[1]}')
  d = pos.shape[-1]
  patch_rows = img_grid.reshape(-1, d)
  rows = init.flat[target].shape[1]
  n = grid[0] * grid[1]
  table_n = n * (nt if kind == 'joint' else 1)
  extra = rows - table_n
  if kind == 'joint' and nt > 1:
    patch_rows = np.tile(patch_rows, (nt, 1))
    how.append(f'repeated over {nt} temporal indices (ViViT sec. 3.4)')
  if extra == 1:
    if vit.has_cls_row:
      cls_row = pos[:, :1]
    else:
      cls_row = init.flat[target][:, :1]
      how.append('class-token row kept from the fresh init (the image model has none)')
    value = np.concatenate([cls_row, patch_rows[None]], axis=1)
  elif extra == 0:
    value = patch_rows[None]
    if vit.has_cls_row:
      how.append('class-token row dropped (the model has no class token)')
  else:
    init.mismatches.append(f'  {target}: model {init.flat[target].shape} is not [1 +] {table_n} rows')
    return
  init.set(target, value, ['pos_embedding'], '; '.join(how) if how else None)
  time = f'{enc}/posembed/time_embedding'
  if time in init.flat:
    init.zero(time, 'zeros (separate time embedding, TimeSformer / X-ViT)')


def initialise(params, init: init_options.InitSpec, model):
  """Maps the image ViT of `init.checkpoint` into `params` (the fresh params of the video model `model`, a
  `vvt.models.spec.ModelSpec`; same tree).

  Returns (new params as a nested dict of numpy float32 arrays, Report). Raises ValueError listing every shape
  mismatch (model shape, checkpoint shape and the file tensor it came from). The mapping is by layer; a model
  with `scan_layers` gets its stacked layout back.
  """
  from vvt.models import layout
  new, report = _initialise(layout.to_per_layer(params), init, model)
  return jax.tree.map(np.asarray, layout.to_model_layout(new, model)), report


def _initialise(params, opts: init_options.InitSpec, model):
  if video_format(opts.checkpoint, opts.format):
    return _from_video(params, opts, model)
  vit = image.read(opts.checkpoint, opts.format, opts.num_heads or model.num_heads)
  init = _Init(jax.device_get(params), vit)
  nt, nh, nw = model.grid

  # Tokeniser: the image filter (p, p, C, D) -> tubelet (t, h, w, C, D).
  if 'embedding/kernel' in vit.tensors:
    k = init.take('embedding/kernel')
    t = model.tubelet[0]
    if t == 1:
      init.set('embedding/conv/kernel', k[None], ['embedding/kernel'], 'added a time axis of length 1')
    elif opts.tubelet == 'inflate':
      init.set('embedding/conv/kernel', np.repeat(k[None], t, axis=0) / t, ['embedding/kernel'],
               f'inflated: replicated over t={t} and divided by {t} (ViViT eq. 8)')
    else:
      kernel = np.zeros((t, *k.shape), np.float32)
      kernel[t // 2] = k
      init.set('embedding/conv/kernel', kernel, ['embedding/kernel'],
               f'central frame: index {t // 2} of {t}, zeros elsewhere (ViViT eq. 9)')
    init.load('embedding/conv/bias', 'embedding/bias')

  if schemes.get(model.attention).two_encoders:  # ViViT Model 2, VideoPrism: the image ViT is the spatial encoder
    enc, stages, projected, pos_kind, pos_nt = 'spatial_encoder', ('joint',), (False,), 'joint', 1
  else:
    enc, stages, projected, pos_kind, pos_nt = 'encoder', model.stages, model.projected, model.positional_embedding, nt
  init.load(f'{enc}/cls', 'cls')
  _posembed(init, enc, pos_kind if pos_kind in ('joint', 'separable', 'spatial') else 'none', pos_nt, (nh, nw), opts)
  _encoder(init, enc, stages, projected, model.num_layers, opts, model)
  if not opts.reinit_head:
    if isinstance(model.num_classes, int):
      init.load('head/output_projection/kernel', 'head/kernel')
      init.load('head/output_projection/bias', 'head/bias')
      init.load('head/pre_logits/kernel', 'pre_logits/kernel')
      init.load('head/pre_logits/bias', 'pre_logits/bias')
    if 'head/kernel' not in vit.tensors:
      raise ValueError(f'init_from.reinit_head=False but {vit.path} has no classifier head')

  if init.mismatches:
    raise weight_files.FitError(f'image checkpoint {vit.path} does not fit the model', init.mismatches, 'mismatch(es)')
  init.report.initialised = [(k, "kept the model's fresh initialisation") for k in sorted(init.flat)
                             if k not in init.done]
  unused_canonical = sorted(set(vit.tensors) - init.used)
  init.report.unused = sorted(set(vit.unused) | {vit.origin.get(n, n).split(' of ')[-1] for n in unused_canonical})
  return weight_files.unflatten(init.flat), init.report


# ----------------------------------------------------------------------------- vvt video checkpoints


def video_format(path: str, fmt: str = 'auto') -> bool:
  """True when `path` is to be read as a vvt video checkpoint: format 'vvt', or 'auto' and a .safetensors file
  whose metadata says format=vvt (what `vvt export` writes)."""
  if fmt == init_options.VIDEO_FORMAT:
    return True
  if fmt != 'auto' or not str(path).endswith('.safetensors') or not os.path.exists(path):
    return False
  from safetensors import safe_open
  with weight_files.naming_file(path, 'not a readable safetensors file'):
    with safe_open(path, framework='numpy') as f:
      return (f.metadata() or {}).get('format') == init_options.VIDEO_FORMAT


def _source_model(metadata) -> dict:
  """The model section of the config stored in an exported file's metadata ({} when absent)."""
  try:
    values = json.loads(metadata.get('config') or '{}')
  except (TypeError, ValueError):
    return {}
  model = values.get('model', values) if isinstance(values, dict) else {}
  return model if isinstance(model, dict) else {}


def _is_classifier(name: str) -> bool:
  return name.startswith('head/output_projection')


def _pos_table_resized(target, value, expected, model, method):
  """A positional table of another patch grid resized to the model's, or None when that is not the difference.

  The model's table is [class-token row +] F x (n_h * n_w) rows (F = n_t for a joint table of a single encoder,
  else 1); the file's has the same class-token rows and F, on a g x g grid."""
  if not target.endswith('posembed/pos_embedding') or target.startswith(('temporal_encoder/', 'temporal_head/')):
    return None
  nt, nh, nw = model.grid
  frames = nt if (not schemes.get(model.attention).two_encoders and model.positional_embedding == 'joint') else 1
  extra = expected[1] - frames * nh * nw
  if extra not in (0, 1) or value.shape[0] != 1 or value.shape[2] != expected[2]:
    return None
  rows = value.shape[1] - extra
  g = int(round(np.sqrt(max(rows // frames, 0))))
  if rows <= 0 or rows % frames or g * g != rows // frames or (g, g) == (nh, nw):
    return None
  grids = value[0, extra:].reshape(frames, g, g, -1)
  resized = np.stack([_resize_grid(grid, (nh, nw), method) for grid in grids]).reshape(1, frames * nh * nw, -1)
  how = f'{method} resize of the {g}x{g} grid to {nh}x{nw}' + (f' (each of {frames} frames)' if frames > 1 else '')
  return np.concatenate([value[:, :extra], resized], axis=1), how


def _other_clip_length(src: dict, model: dict, cfg, report: conversion.Report) -> tuple[dict, dict]:
  """(the file's flat params with their time axes resized to the clip length of `cfg` (the model initialised, its
  ModelSpec; `retarget`, at the file's own frame size: its patch grids are `resize`d after), {name: how} of those
  resized), when the file's model fields `model` say another clip length; else (src, {})."""
  from vvt.convert import retarget
  import vvt.models
  if not model.get('num_frames') or model['num_frames'] == cfg.num_frames or not model.get('image_size'):
    return src, {}
  source = vvt.models.resolve(vvt.models.get_config(**model))
  src, fields, notes = retarget.retarget(src, source, num_frames=cfg.num_frames)
  report.notes.append(f'clip {retarget.describe(source, fields)}: ' + ('; '.join(f'{n} {how}' for n, how in notes)
                                                                      or 'no position table to resize'))
  return src, dict(notes)


def _from_video(params, opts, model):
  """`initialise` for a vvt video checkpoint (format 'vvt'): load every matching parameter (see the docstring)."""
  from vvt.convert import export
  path = opts.checkpoint
  with weight_files.naming_file(path, 'not a readable safetensors file'):
    source, metadata = export.from_safetensors(path)
  src = {k: weight_files.float_parameter(f'video checkpoint {path}', k, v)
         for k, v in weight_files.flatten(source).items()}
  source_model = _source_model(metadata)
  for field in ('family', 'attention'):
    if source_model.get(field) not in (None, getattr(model, field)):
      found = f'{source_model.get("family")}/{source_model.get("attention")}'
      raise ValueError(f'video checkpoint {path} is a {found} model; init_from format '
                       f'{init_options.VIDEO_FORMAT!r} needs the same architecture as the model '
                       f'({model.family}/{model.attention})')
  flat = {k: np.asarray(v) for k, v in weight_files.flatten(jax.device_get(params)).items()}
  report, mismatches, used = conversion.Report(), [], set()
  src, timed = _other_clip_length(src, source_model, model, report)
  for target in sorted(flat):
    if opts.reinit_head and _is_classifier(target):
      report.initialised.append((target, 'new classifier (reinit_head)'))
      continue
    if target not in src:
      mismatches.append(f'  {target}: in the model, not in the checkpoint')
      continue
    value, expected = src[target], flat[target].shape
    used.add(target)
    timing = f'{timed[target]}; ' if target in timed else ''
    if value.shape == expected:
      flat[target] = value
      if timing:
        report.transformed.append((target, f'{timed[target]} of {target}'))
      else:
        report.loaded.append((target, f'{target} of {os.path.basename(path)}'))
      continue
    resized = _pos_table_resized(target, value, expected, model, opts.resize)
    if resized is not None and resized[0].shape == expected:
      flat[target] = resized[0]
      report.transformed.append((target, f'{timing}{resized[1]} of {target}'))
    else:
      mismatches.append(f'  {target}: model {tuple(expected)}, checkpoint {tuple(value.shape)}')
  parts = {name.split('/')[0] for name in flat}  # a part the model has none of (a pretraining run's predictor,
  # EMA target encoder or decoder beside its encoder) is left unused, as the classifier of another run
  mismatches += [f'  {name}: in the checkpoint, not in the model' for name in sorted(set(src) - set(flat))
                 if not _is_classifier(name) and name.split('/')[0] in parts]
  if mismatches:
    raise weight_files.FitError(f'video checkpoint {path} does not fit the model', mismatches, 'mismatch(es)')
  report.unused = sorted(set(src) - used)
  return weight_files.unflatten(flat), report
