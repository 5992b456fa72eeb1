"""The `init_from` section of a run config: its fields, choices and checks (no JAX; see image_init.py).

  checkpoint (or path)  image checkpoint file, or a vvt video checkpoint exported by `vvt export` (.safetensors,
  format 'vvt'); format, num_heads, positional_embedding, resize, tubelet (or tubelet_init), temporal_attention,
  reinit_head: documented in vvt/convert/image_init.py.

`source_kind` says what a run may start from (`vvt train --init SOURCE`, the probe task's `task.probe.backbone`)
without reading the weights.
"""
from __future__ import annotations

import dataclasses
import difflib
import os

import ml_collections

from vvt.convert import hf_folder
from vvt.convert import image
from vvt.convert import sources

VIDEO_FORMAT = 'vvt'  # a vvt video model of the same architecture, exported to safetensors (vvt.convert.export)
FIELDS = dict(checkpoint=None, format='auto', num_heads=None, positional_embedding='auto', resize='bilinear',
              tubelet='central_frame', temporal_attention='auto', reinit_head=True)
CHOICES = dict(positional_embedding=('auto', 'repeat', 'separate_time_zero'),
               resize=('bilinear', 'bicubic', 'nearest'), tubelet=('central_frame', 'inflate'),
               temporal_attention=('auto', 'copy_spatial', 'zero'), format=(*image.FORMATS, VIDEO_FORMAT))
ALIASES = {'path': 'checkpoint', 'tubelet_init': 'tubelet'}  # other spellings accepted in configs
PARAMS_FOLDER = 'params'  # a folder of params checkpoints without a config.json (`source_kind(bare_ok=True)`)


@dataclasses.dataclass(frozen=True)
class InitSpec:
  """A checked `init_from` section, every field explicit (`validate`): what `image_init.initialise` reads."""
  checkpoint: str
  format: str
  num_heads: int | None
  positional_embedding: str
  resize: str
  tubelet: str
  temporal_attention: str
  reinit_head: bool


def get_config(**overrides) -> ml_collections.ConfigDict:
  """Default `init_from` section (checkpoint must be set)."""
  c = ml_collections.ConfigDict(dict(FIELDS))
  c.update(overrides)
  return c


def validate(init_from) -> InitSpec:
  """Checks an `init_from` section (a ConfigDict or dict: unknown fields, choices; aliases `path` = checkpoint,
  `tubelet_init` = tubelet) and returns its InitSpec, the defaults filled in. Does not read the checkpoint.
  ValueError: every problem, one line each."""
  opts = dict(init_from.to_dict() if hasattr(init_from, 'to_dict') else init_from)
  problems = []
  for alias, field in ALIASES.items():
    if alias in opts:
      value = opts.pop(alias)
      if field in opts and opts[field] != value:
        problems.append(f'init_from.{alias} and init_from.{field} are the same field and disagree: '
                        f'{value!r} vs {opts[field]!r}')
      opts[field] = value
  for name in sorted(set(opts) - set(FIELDS)):
    match = difflib.get_close_matches(name, list(FIELDS) + list(ALIASES), n=1, cutoff=0.6)
    hint = f' (did you mean init_from.{match[0]}?)' if match else ''
    problems.append(f'unknown config field \'init_from.{name}\'{hint}; known fields of init_from: '
                    f'{", ".join(sorted(FIELDS))}')
  opts = {**FIELDS, **opts}
  if not opts['checkpoint']:
    problems.append('init_from.checkpoint is not set (set it, or --config.init_from=None to train from scratch)')
  for field, choices in CHOICES.items():
    if opts[field] not in choices:
      problems.append(f'init_from.{field} must be one of {choices}, got {opts[field]!r}')
  if problems:
    raise ValueError('\n'.join(problems))
  return InitSpec(**opts)


def source_kind(source: str, what: str = '--init', bare_ok: bool = False) -> str:
  """What SOURCE is, from its names and config.json only: 'run' (a vvt run or converted folder: config.json with
  model and dataset, and checkpoints/), 'file' (a .safetensors file), the converter source of a Hugging Face model
  folder (`sources.of_model_type` of its config.json's model_type: 'hf_videomae', ...) or, with `bare_ok`,
  PARAMS_FOLDER (checkpoints/ without a config.json). ValueError: one line starting with `what SOURCE` (the option
  or field that named it) saying what is wrong."""
  name = f'{what} {source}'
  if os.path.isfile(source):
    if source.endswith('.safetensors'):
      return 'file'
    raise ValueError(f'{name}: expected a vvt run folder, a .safetensors file written by `vvt export`, or a Hugging '
                     'Face model folder (image checkpoints: --config.init_from.checkpoint)')
  if not os.path.isdir(source):
    raise ValueError(f'{name}: no such file or folder (absolute: {os.path.abspath(source)})')
  has_steps = os.path.isdir(os.path.join(source, 'checkpoints'))
  if bare_ok and has_steps and not os.path.exists(hf_folder.config_path(source)):
    return PARAMS_FOLDER
  try:
    values = hf_folder.read_config(source)
  except hf_folder.ConfigFileError as e:
    raise hf_folder.ConfigFileError(f'{what} {e}') from None
  if 'model' in values and 'dataset' in values:
    if not has_steps:
      raise ValueError(f'{name}: the run has no checkpoints/ yet')
    return 'run'
  model_type = values.get('model_type')
  record = sources.of_model_type(model_type)
  if record is None:
    known = ', '.join(t for s in sources.SOURCES.values() for t in s.model_types)
    raise ValueError(f'{name}: config.json has model_type={model_type!r}; vvt converts {known}')
  return record.name
