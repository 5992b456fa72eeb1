"""The JSON files of a Hugging Face model folder, read one way for `vvt convert`, `vvt train --init` and the rest.

  read_config(path)           config.json of a folder (or a config file given as such): a dict of its fields
  normalization(folder)       the mean / std of its preprocessor config (`preprocessor_config.json`, or the
                              `video_preprocessor_config.json` that transformers 5's video processors write)
  weights_file(path, source)  its safetensors weights, for a source that reads no PyTorch pickle

A config.json that is missing, is not JSON, or holds something other than a JSON object is refused with one
`ConfigFileError` line naming the file and what is wrong with it (bad input: `vvt` exits 2), before any weight is
read: a converter never falls back to transformers' default sizes for a folder whose config it could not read.
"""
from __future__ import annotations

import json
import os

from vvt.convert import weight_files

CONFIG_FILE = 'config.json'
# The preprocessor configs, the image processor's first (transformers 4), then the video processor's (5).
PREPROCESSOR_FILES = ('preprocessor_config.json', 'video_preprocessor_config.json')


class ConfigFileError(ValueError):
  """A JSON file of a Hugging Face folder that cannot be used: missing, not JSON, or not an object; the message
  names the file. Bad input (`vvt.cli.common.run` exits 2)."""
  bad_input = True


def _read_object(path: str) -> dict:
  """The JSON object in `path`, or ConfigFileError naming the file and what is wrong."""
  try:
    with open(path, encoding='utf-8') as f:
      text = f.read()
  except UnicodeDecodeError as e:
    raise ConfigFileError(f'{path}: not JSON (not UTF-8 text: {e.reason} at byte {e.start})') from None
  except OSError as e:
    raise ConfigFileError(f'{path}: cannot be read ({e.strerror or e})') from None
  try:
    values = json.loads(text)
  except ValueError as e:
    raise ConfigFileError(f'{path}: not JSON ({e})') from None
  if not isinstance(values, dict):
    raise ConfigFileError(f'{path}: a JSON {type(values).__name__}, not an object of config fields')
  return values


def config_path(path: str) -> str:
  """The config.json of a folder (or `path` itself, a config file)."""
  return os.path.join(path, CONFIG_FILE) if os.path.isdir(path) else path


def read_config(path: str) -> dict:
  """The fields of a Hugging Face config: `path` is a model folder (its config.json) or a config file.
  ConfigFileError naming the file: missing, not JSON, or not a JSON object."""
  file = config_path(path)
  if not os.path.exists(file):
    if os.path.isdir(path):
      raise ConfigFileError(f'{path}: the folder has no {CONFIG_FILE} (a Hugging Face model folder holds the '
                            "model's config.json beside its weights)")
    raise ConfigFileError(f'{file}: no such config file')
  return _read_object(file)


def normalization(folder: str) -> tuple[list, list] | None:
  """(mean, std) of the folder's preprocessor config (`PREPROCESSOR_FILES`, the first the folder has), each three
  numbers; None where it has none, or where the file gives no three-number `image_mean` and `image_std`.
  ConfigFileError naming the file when it is not a JSON object."""
  for name in PREPROCESSOR_FILES:
    path = os.path.join(folder, name)
    if os.path.isfile(path):
      values = _read_object(path)
      mean, std = values.get('image_mean'), values.get('image_std')
      if all(_three_numbers(v) for v in (mean, std)):
        return [float(m) for m in mean], [float(s) for s in std]
      return None
  return None


def _three_numbers(value) -> bool:
  return (isinstance(value, (list, tuple)) and len(value) == 3
          and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value))


def weights_file(checkpoint: str, source: str) -> str:
  """The weight file of a Hugging Face folder or path for a source that reads no pickle (its record's
  `safetensors_only`, `source` naming it): safetensors (or an npz of arrays). A `pytorch_model.bin` (or any PyTorch
  pickle) is refused with one line naming it."""
  if os.path.isdir(checkpoint):
    for name in ('model.safetensors', 'pytorch_model.bin'):
      if os.path.exists(os.path.join(checkpoint, name)):
        return weights_file(os.path.join(checkpoint, name), source)
    raise FileNotFoundError(f'{checkpoint} is a directory without model.safetensors')
  if os.path.exists(checkpoint) and weight_files.format_of(checkpoint) not in ('safetensors', 'npz'):
    raise weight_files.WeightFileError(f'{checkpoint}: {source} reads safetensors only, not a PyTorch pickle '
                                       '(save the model with save_pretrained(..., safe_serialization=True))')
  return checkpoint
