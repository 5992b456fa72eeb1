"""Weights of one clip length / frame size -> another: the learned position tables resized as each reference does.

    params, fields, notes = retarget(params, model_fields, num_frames=16, image_size=None)

The model then attends over the whole new clip (its grid is the new one; nothing is read periodically). Per table
(`vvt.models.embedding.resize_table`, float64, once):
  TimeSformer  torch `interpolate(mode='nearest')`, as its official and Hugging Face forwards: the time table
               (1, T0, D) -> (1, T, D), frame t reads row floor(t * T0 / T); the space table's patch grid likewise.
  ViViT and the others with learned tables (scenic Models 1-4, HF ViViT, X-ViT's space table, any 'joint' or
  'separable' table): torch `interpolate(mode='bicubic', align_corners=False)` (Keys, A = -0.75), as HF ViViT's
  `interpolate_pos_encoding`: the patch grid of each frame, and with the same 1D kernel the time axis (a joint
  table's n_t, a temporal encoder's table); a class-token row is kept as it is.
  No table to resize: sinusoidal tables (VideoMAE) are recomputed by the model, RoPE (V-JEPA 2) has none, tables
  with `pos_table_grid` (VideoPrism) are resized at run time, X-ViT's periodic time table (time_embedding_rows < n_t)
  keeps its rows where they divide the new n_t.
The tubelet must divide the new clip and frame size.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from vvt.convert import weight_files
from vvt.models import embedding
from vvt.models import frame_size


def kernel_of(model) -> str:
  """The interpolation the family's reference uses: 'nearest' (TimeSformer) or 'bicubic'."""
  return 'nearest' if model['family'] == 'timesformer' else 'bicubic'


def _grids(model, num_frames, image_size):
  """((n_t, n_h, n_w) of the model now, of `num_frames` x `image_size` = (H, W)); ValueError where the tubelet does
  not divide the new clip."""
  tt, th, tw = model['tubelet']
  (h0, w0), (h, w) = frame_size.parse(model['image_size']), image_size
  if num_frames % tt or h % th or w % tw:
    name, value = ('num_frames', num_frames) if num_frames % tt else (
        'image_size', frame_size.config_value(image_size))
    raise ValueError(f'{name}={value} is not a multiple of the tubelet {tuple(model["tubelet"])} '
                     f'(the tokeniser needs whole tubelets)')
  return (model['num_frames'] // tt, h0 // th, w0 // tw), (num_frames // tt, h // th, w // tw)


def _resize_rows(value, old_axes, new_axes, kernel):
  """(1, extra + prod(old_axes), D) -> (1, extra + prod(new_axes), D), the extra (class-token) row kept."""
  extra = value.shape[1] - math.prod(old_axes)
  if extra not in (0, 1):
    return None
  grid = np.asarray(value[0, extra:]).reshape(*old_axes, value.shape[-1])
  resized = embedding.resize_table(grid, new_axes, kernel).reshape(1, -1, value.shape[-1])
  return np.concatenate([np.asarray(value[:, :extra], np.float32), resized], axis=1)


def _plan(name, model, old, new):
  """(axes of the table now, axes wanted) for the position table `name`, or None when it has nothing to resize."""
  (nt0, nh0, nw0), (nt, nh, nw) = old, new
  kind = model.get('positional_embedding')
  if model.get('pos_table_grid') is not None or kind in ('sinusoidal', 'rope', 'none'):
    return None
  if name.startswith(('spatial_encoder/',)):
    return (nh0, nw0), (nh, nw)
  if name.startswith(('temporal_encoder/',)):
    return (nt0,), (nt,)
  if name.endswith('posembed/time_embedding'):
    return None  # handled by `retarget` (periodic tables)
  if kind == 'joint':
    return (nt0, nh0, nw0), (nt, nh, nw)
  return (nh0, nw0), (nh, nw)  # separable / spatial: the space table


def retarget(params, model_fields: dict, num_frames: int | None = None, image_size=None):
  """Params of a model of `model_fields` (a dict or resolved config: family, attention, tubelet, num_frames,
  image_size, positional_embedding, ...) -> (params for `num_frames` x `image_size` (an int S for S x S frames, a
  pair (H, W); None: unchanged), the model fields for them (image_size as a config holds it: an int where square),
  notes [(param name, how)]). `params` nested or flat; returned in the same form. A patch grid resized to another
  shape (n_h, n_w) -> (n_h', n_w') takes the kernel along each axis, as torch's 2D interpolation of it does."""
  model = dict(model_fields)
  num_frames = num_frames or model['num_frames']
  image_size = frame_size.parse(image_size or model['image_size'])
  old, new = _grids(model, num_frames, image_size)
  fields = {**model, 'num_frames': int(num_frames), 'image_size': frame_size.config_value(image_size)}
  nested = any(isinstance(v, Mapping) for v in params.values())
  flat = dict(weight_files.flatten(params)) if nested else dict(params)
  notes = []
  if old == new:
    return params, fields, notes
  kernel = kernel_of(model)
  how_kernel = {'nearest': "torch nearest (floor(i * old / new))",
                'bicubic': 'torch bicubic (A=-0.75, align_corners=False)'}[kernel]
  for name in sorted(flat):
    if name.endswith('posembed/time_embedding') and not name.startswith('temporal_encoder/'):
      rows = int(np.shape(flat[name])[1])
      if rows != old[0] or model['family'] == 'xvit':  # periodic (X-ViT): frame t reads row t mod rows
        if new[0] % rows:
          raise ValueError(f'{name}: the {rows} rows of a periodic time table (frame t reads row t mod {rows}) '
                           f'do not divide the {new[0]} temporal indices of {num_frames} frames')
        fields['time_embedding_rows'] = rows
        continue
      value = np.asarray(flat[name])
      flat[name] = embedding.resize_table(value[0], (new[0],), kernel)[None]
      fields['time_embedding_rows'] = None
      notes.append((name, f'time table {rows} -> {new[0]} rows, {how_kernel}'))
      continue
    if not name.endswith('posembed/pos_embedding'):
      continue
    plan = _plan(name, model, old, new)
    if plan is None or plan[0] == plan[1]:
      continue
    value = np.asarray(flat[name])
    resized = _resize_rows(value, *plan, kernel)
    if resized is None:
      raise ValueError(f'{name}: {value.shape[1]} rows are not [class token +] {" x ".join(map(str, plan[0]))} '
                       'tokens of the model')
    flat[name] = resized
    notes.append((name, f'grid {"x".join(map(str, plan[0]))} -> {"x".join(map(str, plan[1]))}, {how_kernel}'))
  return (weight_files.unflatten(flat) if nested else flat), fields, notes


def describe(model_fields: dict, fields: dict) -> str:
  """One line: the clip and frame size before and after."""
  return (f'{model_fields["num_frames"]} frames of {frame_size.label(model_fields["image_size"])}px -> '
          f'{fields["num_frames"]} frames of {frame_size.label(fields["image_size"])}px')
