"""One entry point for every video source: `convert(source, checkpoint, model_cfg=None, hf_config=None)`.

Sources: `vvt.convert.sources` (one record each: its reader, sizes, base config, normalisation, export target,
what it refuses).

What the weights do not say (heads of a fused torch qkv, frame size of X-ViT, Model 4 vs Model 1 in scenic,
Model 3's attention order, X-ViT's shift_div and num_segments) is taken from `model_cfg` (a vvt model ConfigDict)
when given. `num_frames` asks for a clip length, `image_size` for a frame size, for every source (the tubelet
must divide them): X-ViT runs at any multiple of its temporal embedding's rows (frame t gets row t mod rows, as the
official code) and resizes its 224-px grid as the official forward, V-JEPA 2 needs nothing (RoPE), VideoPrism
resizes its tables at run time; every other source is converted at the clip its tables say and its learned tables
then resized once as its reference does (`vvt.convert.retarget`: TimeSformer torch nearest, ViViT torch bicubic;
VideoMAE's sine-cosine table is recomputed), the change in the report's notes. Scenic Models 1, 3, 4 (and HF
ViViT without its config) read their clip from the split of their T*N position table (`scenic.read_token_grid`),
by the table's own evidence, else the config's values; only where neither tells do the sizes asked choose it.
"""
from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np

from vvt.convert import conversion
from vvt.convert import hf_folder
from vvt.convert import retarget
from vvt.convert import sources
from vvt.convert import weight_files
from vvt.models import frame_size


def hf_config_of(checkpoint: str, hf_config):
  """The Hugging Face config of `checkpoint`: `hf_config` (a dict, or a config file read by
  `hf_folder.read_config`), else the folder's config.json (refused naming it when missing, not JSON or not an
  object); None for a weight file given without a config (the converter's defaults and the weights decide)."""
  if hf_config is None and os.path.isdir(checkpoint):
    hf_config = checkpoint
  if isinstance(hf_config, str):
    hf_config = hf_folder.read_config(hf_config)
  return hf_config


def convert_state(source: str, state, model_cfg=None, hf_config=None, num_frames: int | None = None,
                  image_size: int | None = None, pretraining: bool = False) -> conversion.Converted:
  """A loaded flat state dict of `source` -> Converted (params, exact model fields, report).

  Sizes the weights determine (frames, frame size, classes, depth, widths) come from the weights; `model_cfg` only
  fills in what they do not say (see the module doc), so a config written for another clip length is no error.
  num_frames / image_size: the clip length and frame size to run at (None: the weights'); see the module doc.
  pretraining: for a pretraining run's config (`conversion.Ask.pretraining`).
  """
  record = sources.get(source)
  ask = conversion.Ask(model_cfg, hf_config, num_frames, image_size, pretraining)
  with weight_files.naming_file(weight_files.path_of(state), 'cannot convert its weights'):  # every converter's errors
    if record.native_sizes or (num_frames is None and image_size is None):
      result = record.convert(state, ask)
    else:
      try:  # the tables read at the sizes they say (or the config's, where they do not), then resized
        result = record.convert(state, dataclasses.replace(ask, num_frames=None, image_size=None))
      except ValueError:  # tables that do not say their split: the sizes asked choose it
        result = record.convert(state, ask)
      result = resized(result, num_frames, image_size)
  for name, value in (('num_frames', num_frames), ('image_size', image_size)):
    got = result.model_fields.get(name)
    if value is not None and (frame_size.parse(got) != frame_size.parse(value) if name == 'image_size'
                              else got != value):
      raise ValueError(f'{source} checkpoint: internal error: converted for {name}={got}, asked {value}')
  return result


def resized(result: conversion.Converted, num_frames: int | None, image_size: int | None) -> conversion.Converted:
  """A conversion moved to another clip length / frame size (`vvt.convert.retarget`): the resized tables reported
  as transformed (how, and from which file tensor), the clip change as a note of the report."""
  import vvt.models
  model = vvt.models.resolve(vvt.models.get_config(**result.model_fields))
  params, fields, notes = retarget.retarget(result.params, model, num_frames, image_size)
  if (fields['num_frames'], frame_size.parse(fields['image_size'])) == (model.num_frames,
                                                                       frame_size.parse(model.image_size)):
    return result
  report = result.report
  for name, how in notes:
    loaded = dict(report.loaded)
    if name in loaded:
      report.loaded = [(a, b) for a, b in report.loaded if a != name]
      report.transformed.append((name, f'{how} of {loaded[name]}'))
    else:
      report.transformed = [(a, f'{how} of ({b})' if a == name else b) for a, b in report.transformed]
  report.notes.append(f'clip {retarget.describe(model, fields)}: '
                      + ('no position table to resize' if not notes else f'{len(notes)} position table(s) resized'))
  out = dict(result.model_fields, num_frames=fields['num_frames'], image_size=fields['image_size'])
  if fields.get('time_embedding_rows') != model.time_embedding_rows:
    out['time_embedding_rows'] = fields['time_embedding_rows']
  return conversion.Converted(params, out, report)


def convert(source: str, checkpoint: str, model_cfg=None, hf_config=None, check: bool = True,
            num_frames: int | None = None, image_size: int | None = None,
            pretraining: bool = False) -> conversion.Converted:
  """Reads `checkpoint` (file, or Hugging Face folder) of `source` and converts it; with `check`, builds the
  vvt model abstractly and verifies every parameter name and shape (clear error listing all differences).
  num_frames / image_size: the clip length and frame size to run at (`vvt convert --num-frames/--image-size`;
  see `convert_state`), checked before the file is read; pretraining: for a pretraining run's config (its task's
  own modules kept: `conversion.Ask.pretraining`)."""
  if num_frames is not None and (not isinstance(num_frames, int) or isinstance(num_frames, bool) or num_frames < 1):
    raise ValueError(f'num_frames must be a positive int, got {num_frames!r}')
  if image_size is not None and frame_size.problem(image_size):
    raise ValueError(frame_size.problem(image_size))
  record = sources.get(source)
  if record.native_sizes and image_size is not None and len(set(frame_size.parse(image_size))) > 1:
    raise ValueError(f'image_size={frame_size.config_value(image_size)}: {source} checkpoints are converted for '
                     'square frames only (an int image_size)')
  hf_config = hf_config_of(checkpoint, hf_config) if record.hf_folder else None
  state = weight_files.load_state(hf_folder.weights_file(checkpoint, source) if record.safetensors_only
                                  else checkpoint)
  result = convert_state(source, state, model_cfg, hf_config, num_frames=num_frames, image_size=image_size,
                         pretraining=pretraining)
  if check:
    with weight_files.naming_file(checkpoint, 'its weights do not fit the model'):
      check_params(result.params, result.model_config())
  return result


def abstract_params(model_cfg):
  """Shapes of the params of `model_cfg` without allocating them."""
  import vvt.models
  cfg = vvt.models.resolve(model_cfg)
  module = vvt.models.build(cfg)
  video = jax.ShapeDtypeStruct((1, cfg.num_frames, *frame_size.parse(cfg.image_size), 3), jnp.float32)
  return jax.eval_shape(lambda v: module.init(jax.random.key(0), v), video)['params']


def check_params(params, model_cfg) -> None:
  """Raises ValueError (`weight_files.FitError`) listing every mis-shaped, unexpected or missing parameter against
  `model_cfg`, in that order (compared per layer: a model with `scan_layers` takes the same files)."""
  from vvt.models import layout
  from vvt.tasks import jepa_options
  from vvt.tasks import mae_options
  # a pretraining checkpoint's decoder (task.name='mae') or predictor (task.name='jepa') belongs to the task, not to
  # the model: the run checks it
  params = {k: v for k, v in params.items() if k not in (mae_options.DECODER, jepa_options.PREDICTOR)}
  expected = {k: tuple(v.shape)
              for k, v in weight_files.flatten(layout.to_per_layer(abstract_params(model_cfg))).items()}
  got = {k: tuple(np.shape(v)) for k, v in weight_files.flatten(layout.to_per_layer(params)).items()}
  problems = [f'{k}: model expects {expected[k]}, converted {got[k]}'
              for k in sorted(set(got) & set(expected)) if got[k] != expected[k]]
  problems += [f'{k}: not a parameter of the model (shape {got[k]})' for k in sorted(set(got) - set(expected))]
  problems += [f'{k}: missing (model expects {expected[k]})' for k in sorted(set(expected) - set(got))]
  if problems:
    raise weight_files.FitError('converted parameters do not fit the model', problems)
