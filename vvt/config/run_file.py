"""WORKDIR/config.json: a run's saved config, written and read back with its shared fields linked again.

Workdirs may be URLs (`gs://bucket/run`): the file goes through `vvt.fileio`, never `os.path`.
"""
import json

import ml_collections

from vvt import fileio
from vvt import models
from vvt.config import dataset
from vvt.config import schema
from vvt.models import schemes

FILENAME = 'config.json'


def path(workdir: str) -> str:
  """WORKDIR/config.json (a local path or a URL such as gs://bucket/run/config.json)."""
  return fileio.join(workdir, FILENAME)


def _tuples(x):
  """JSON's lists as tuples, in nested dicts too."""
  if isinstance(x, dict):
    return {k: _tuples(v) for k, v in x.items()}
  if isinstance(x, list):
    return tuple(_tuples(v) for v in x)
  return x


def _dataset_section(values: dict) -> ml_collections.ConfigDict:
  """The dataset defaults (their flexible fields kept flexible) with the saved values."""
  d = dataset.get_config()
  for k, v in values.items():
    d[k] = v
  return d


def _with_missing(saved: ml_collections.ConfigDict, defaults: ml_collections.ConfigDict) -> None:
  """Adds to `saved`, in place, the fields of `defaults` it lacks (nested sections too); saved values win."""
  for key, value in defaults.items():
    if key not in saved:
      saved[key] = value
    elif isinstance(value, ml_collections.ConfigDict) and isinstance(saved[key], ml_collections.ConfigDict):
      _with_missing(saved[key], value)


def _model_section(values: dict) -> ml_collections.ConfigDict:
  """The saved model fields, with the defaults of fields added to the model config after the run was saved.

  A field missing from an older config.json means the run had the behaviour its default keeps (new model
  fields default to what the models did before them), so a resume does not see it as a change.
  """
  m = ml_collections.ConfigDict(values)
  family = values.get('family')
  if family in schemes.FAMILIES:
    _with_missing(m, models.get_config(family))
  return m


def from_dict(values: dict) -> ml_collections.ConfigDict:
  """A run config from plain values (a run's config.json), with lists as tuples and links restored."""
  values = _tuples(dict(values))
  c = schema.get_base_config()
  for key, value in values.items():
    if key in ('num_classes', 'class_names'):
      c[key] = value
    elif key == 'dataset' and isinstance(value, dict):
      c.dataset = _dataset_section(value)
    elif key == 'model' and isinstance(value, dict):
      c.model = _model_section(value)
    elif isinstance(value, dict) and key != 'model' and isinstance(c.get(key), ml_collections.ConfigDict):
      c[key] = ml_collections.ConfigDict({**c[key].to_dict(), **value})
    elif isinstance(value, dict):
      c[key] = ml_collections.ConfigDict(value)
    else:
      c[key] = value
  for field in schema.SHARED_FIELDS:
    if field not in values:
      del c[field]
  return schema.link_shared(c)


def as_saved(config) -> ml_collections.ConfigDict:
  """`config` as it would read back from config.json (so a run and its saved config compare alike)."""
  return from_dict(json.loads(config.to_json_best_effort()))


def load_saved(workdir: str):
  """The config saved in `workdir` (links restored by `from_dict`), or None."""
  file = path(workdir)
  if not fileio.exists(file):
    return None
  return from_dict(json.loads(fileio.read_text(file)))


def write(workdir: str, config) -> None:
  """Writes `config` as WORKDIR/config.json (atomically: a temporary file renamed over it)."""
  fileio.atomic_write_text(path(workdir), config.to_json_best_effort(indent=2))
