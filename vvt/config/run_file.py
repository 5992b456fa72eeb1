"""WORKDIR/config.json: a run's saved config, written and read back with its shared fields linked again.

Workdirs may be URLs (`gs://bucket/run`): the file goes through `vvt.fileio`, never `os.path`.
"""
import json

import ml_collections

from vvt import fileio
from vvt.config import dataset
from vvt.config import schema

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


def from_dict(values: dict) -> ml_collections.ConfigDict:
  """A run config from plain values (a run's config.json), with lists as tuples and links restored."""
  values = _tuples(dict(values))
  c = schema.get_base_config()
  for key, value in values.items():
    if key in ('num_classes', 'class_names'):
      c[key] = value
    elif key == 'dataset' and isinstance(value, dict):
      c.dataset = _dataset_section(value)
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
