"""One entry point for every video source: `convert(source, checkpoint, model_cfg=None, hf_config=None)`.

Sources:
  scenic_vivit     scenic ViViT, Models 1-4 (flax params: .npz, .msgpack; '/'-joined names)
  timesformer      official TimeSformer PyTorch checkpoint (.pyth/.pth; divided_space_time, joint_space_time,
                   space_only)
  xvit             official X-ViT PyTorch checkpoint (space-time mixing + TA head)
  hf_timesformer   Hugging Face TimesformerForVideoClassification (folder with config.json, .safetensors, .bin)
  hf_vivit         Hugging Face VivitForVideoClassification (old and new key names)
  hf_videomae      Hugging Face VideoMAEForVideoClassification, bare VideoMAEModel or VideoMAEForPreTraining
                   (a backbone gets a new head of the config's num_classes)
  hf_vjepa2        Hugging Face VJEPA2ForVideoClassification or bare VJEPA2Model (3D RoPE, attentive pooler; the
                   predictor unused; any clip length and frame size divisible by the tubelet)
  hf_videoprism    Hugging Face VideoPrismForVideoClassification, bare VideoPrismVisionModel or the video tower of
                   VideoPrismClipModel (space_then_time; its position tables resized at run time to the clip asked)

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

import os

import jax
import jax.numpy as jnp
import numpy as np

from vvt.convert import common
from vvt.convert import hf_folder
from vvt.convert import hf_videomae
from vvt.convert import hf_videoprism
from vvt.convert import hf_vivit
from vvt.convert import hf_vjepa2
from vvt.convert import retarget
from vvt.convert import scenic
from vvt.convert import timesformer
from vvt.convert import xvit
from vvt.models import frame_size

# Sources that run at another clip length / frame size themselves (X-ViT's periodic time table and resized
# space grid, V-JEPA 2's RoPE, VideoPrism's run-time resize); the others are converted, then `resized`.
NATIVE_SIZES = ('xvit', 'hf_vjepa2', 'hf_videoprism')
SOURCES = ('scenic_vivit', 'timesformer', 'xvit', 'hf_timesformer', 'hf_vivit', 'hf_videomae', 'hf_vjepa2',
           'hf_videoprism')


def _hint(model_cfg, field):
  if model_cfg is None:
    return None
  try:
    import vvt.models
    return vvt.models.resolve(model_cfg)[field]
  except (ValueError, KeyError, AttributeError):
    return model_cfg.get(field) if hasattr(model_cfg, 'get') else None


def _hf_config(checkpoint: str, hf_config):
  """The Hugging Face config of `checkpoint`: `hf_config` (a dict, or a config file read by
  `hf_folder.read_config`), else the folder's config.json (refused naming it when missing, not JSON or not an
  object); None for a weight file given without a config (the converter's defaults and the weights decide)."""
  if hf_config is None and os.path.isdir(checkpoint):
    hf_config = checkpoint
  if isinstance(hf_config, str):
    hf_config = hf_folder.read_config(hf_config)
  return hf_config


def _raw(model_cfg, *path):
  """A field of the config as written (None where unset): X-ViT's num_segments None means "= num_frames"."""
  node = model_cfg
  for p in path:
    if node is None or not hasattr(node, 'get'):
      return None
    node = node.get(p)
  return node


def convert_state(source: str, state, model_cfg=None, hf_config=None, num_frames: int | None = None,
                  image_size: int | None = None) -> common.Converted:
  """A loaded flat state dict of `source` -> Converted (params, exact model fields, report).

  Sizes the weights determine (frames, frame size, classes, depth, widths) come from the weights; `model_cfg` only
  fills in what they do not say (see the module doc), so a config written for another clip length is no error.
  num_frames / image_size: the clip length and frame size to run at (None: the weights'); see the module doc.
  """
  with common.naming_file(common.path_of(state), 'cannot convert its weights'):  # every converter's errors
    if source in NATIVE_SIZES or (num_frames is None and image_size is None):
      result = _convert_state(source, state, model_cfg, hf_config, num_frames, image_size)
    else:
      try:  # the tables read at the sizes they say (or the config's, where they do not), then resized
        result = _convert_state(source, state, model_cfg, hf_config, None, None)
      except ValueError:  # tables that do not say their split: the sizes asked choose it
        result = _convert_state(source, state, model_cfg, hf_config, num_frames, image_size)
      result = resized(result, num_frames, image_size)
  for name, value in (('num_frames', num_frames), ('image_size', image_size)):
    got = result.model_fields.get(name)
    if value is not None and (frame_size.parse(got) != frame_size.parse(value) if name == 'image_size'
                              else got != value):
      raise ValueError(f'{source} checkpoint: internal error: converted for {name}={got}, asked {value}')
  return result


def resized(result: common.Converted, num_frames: int | None, image_size: int | None) -> common.Converted:
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
  return common.Converted(params, out, report)


def _convert_state(source, state, model_cfg, hf_config, num_frames, image_size):
  frames_hint = num_frames or _hint(model_cfg, 'num_frames')
  if source == 'scenic_vivit':
    att = _hint(model_cfg, 'attention')
    two_stage = any(k.startswith('SpatialTransformer/') for k in state)
    # Only Model 4 cannot be told from the names (it looks like Model 1): the config decides that one case.
    # Model 2's tables say its frames and frame size (convert_state checks those asked for); Models 1, 3, 4 read
    # them from the split of their position table, where the config's values only choose among splits its rows
    # leave open and those asked for decide.
    fixed = two_stage and any(k.startswith('TemporalTransformer/') for k in state)
    return scenic.convert(state, attention='factorised_dot_product' if att == 'factorised_dot_product' and
                          not two_stage else None, num_frames=None if fixed else num_frames,
                          image_size=None if two_stage else image_size,
                          frames_hint=_hint(model_cfg, 'num_frames'), size_hint=_hint(model_cfg, 'image_size'),
                          attention_order=_hint(model_cfg, 'attention_order') or 'space_time')
  if source == 'timesformer':
    space_only = timesformer.detect_attention_type(common.strip_prefix(state, ('module.', 'model.'))) == 'space_only'
    return timesformer.convert_official(state, num_heads=_hint(model_cfg, 'num_heads'),
                                        num_frames=frames_hint if space_only else None)
  if source == 'xvit':
    th = _hint(model_cfg, 'temporal_head')
    mixing = _hint(model_cfg, 'mixing')
    return xvit.convert(state, num_heads=_hint(model_cfg, 'num_heads'),
                        head_num_heads=th.get('num_heads') if th else None,
                        image_size=image_size or _hint(model_cfg, 'image_size') or 224,
                        shift_div=(mixing.get('shift_div') if mixing else None) or 8,
                        num_frames=num_frames, num_segments=_raw(model_cfg, 'mixing', 'num_segments'))
  if source == 'hf_timesformer':
    return timesformer.convert_hf(state, hf_config, num_heads=None if hf_config else _hint(model_cfg, 'num_heads'))
  if source == 'hf_vivit':
    return hf_vivit.convert(state, hf_config, num_heads=None if hf_config else _hint(model_cfg, 'num_heads'),
                            num_frames=None if hf_config else frames_hint,
                            image_size=None if hf_config else image_size)
  if source == 'hf_videomae':
    return hf_videomae.convert(state, hf_config, num_heads=None if hf_config else _hint(model_cfg, 'num_heads'),
                               num_frames=None if hf_config else frames_hint,
                               image_size=None if hf_config else image_size or _hint(model_cfg, 'image_size'),
                               num_classes=_hint(model_cfg, 'num_classes'))
  if source in ('hf_vjepa2', 'hf_videoprism'):
    reader = hf_vjepa2 if source == 'hf_vjepa2' else hf_videoprism
    return reader.convert(state, hf_config, num_frames=num_frames, image_size=image_size,
                          num_classes=_hint(model_cfg, 'num_classes'))
  raise ValueError(f'unknown source {source!r}; expected one of {", ".join(SOURCES)}')


def convert(source: str, checkpoint: str, model_cfg=None, hf_config=None, check: bool = True,
            num_frames: int | None = None, image_size: int | None = None) -> common.Converted:
  """Reads `checkpoint` (file, or Hugging Face folder) of `source` and converts it; with `check`, builds the
  vvt model abstractly and verifies every parameter name and shape (clear error listing all differences).
  num_frames / image_size: the clip length and frame size to run at (`vvt convert --num-frames/--image-size`;
  see `convert_state`), checked before the file is read."""
  if num_frames is not None and (not isinstance(num_frames, int) or isinstance(num_frames, bool) or num_frames < 1):
    raise ValueError(f'num_frames must be a positive int, got {num_frames!r}')
  if image_size is not None and frame_size.problem(image_size):
    raise ValueError(frame_size.problem(image_size))
  if source not in SOURCES:
    raise ValueError(f'unknown source {source!r}; expected one of {", ".join(SOURCES)}')
  if source in NATIVE_SIZES and image_size is not None and len(set(frame_size.parse(image_size))) > 1:
    raise ValueError(f'image_size={frame_size.config_value(image_size)}: {source} checkpoints are converted for '
                     'square frames only (an int image_size)')
  hf_config = _hf_config(checkpoint, hf_config) if source.startswith('hf_') else None
  safetensors_only = source in ('hf_videomae', 'hf_vjepa2', 'hf_videoprism')
  state = common.load_state(hf_videomae.weights_file(checkpoint, source) if safetensors_only else checkpoint)
  result = convert_state(source, state, model_cfg, hf_config, num_frames=num_frames, image_size=image_size)
  if check:
    with common.naming_file(checkpoint, 'its weights do not fit the model'):
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
  """Raises ValueError (`common.FitError`) listing every mis-shaped, unexpected or missing parameter against
  `model_cfg`, in that order (compared per layer: a model with `scan_layers` takes the same files)."""
  from vvt.models import layout
  expected = {k: tuple(v.shape) for k, v in common.flatten(layout.to_per_layer(abstract_params(model_cfg))).items()}
  got = {k: tuple(np.shape(v)) for k, v in common.flatten(layout.to_per_layer(params)).items()}
  problems = [f'{k}: model expects {expected[k]}, converted {got[k]}'
              for k in sorted(set(got) & set(expected)) if got[k] != expected[k]]
  problems += [f'{k}: not a parameter of the model (shape {got[k]})' for k in sorted(set(got) - set(expected))]
  problems += [f'{k}: missing (model expects {expected[k]})' for k in sorted(set(expected) - set(got))]
  if problems:
    raise common.FitError('converted parameters do not fit the model', problems)
