"""Field paths of a run config: one spelling everywhere, dotted strings such as 'optimizer.name'.

The command line (`--config.a.b=VALUE`), sweeps, `configs/common.paper_config` overrides, validation ranges and
choices, and the resume rules all name a field this way.
"""
from __future__ import annotations

import difflib
from typing import Any

import ml_collections

from vvt.config.errors import ConfigError

SECTIONS = (ml_collections.ConfigDict, dict)


def plain(value):
  """A ConfigDict as a dict (e.g. a dict-valued `num_classes`); any other value as it is."""
  if isinstance(value, ml_collections.ConfigDict):
    return value.to_dict()
  return value


def get(config, path: str) -> Any:
  """The value at `path`, or None where a part of it is missing."""
  node = config
  for part in path.split('.'):
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      return None
    node = node[part]
  return node


def hint(key: str, known, prefix: str = '') -> str:
  """' (did you mean PREFIX.X?)' for the known name nearest to `key`, or ''."""
  match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
  return f' (did you mean {prefix}{match[0]}?)' if match else ''


def set_value(config, path: str, value) -> None:
  """Sets the existing field at `path` to `value`; ConfigError naming the field if there is none."""
  parts = path.split('.')
  node = config
  for depth, part in enumerate(parts):
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      prefix = '.'.join(parts[:depth] + [''])
      known = node.keys() if isinstance(node, ml_collections.ConfigDict) else ()
      raise ConfigError(f'unknown config field {prefix + part!r}{hint(part, known, prefix)}')
    if depth < len(parts) - 1:
      node = node[part]
  node[parts[-1]] = value


def flatten(config, prefix: str = '') -> dict:
  """{'a.b': value} for every leaf (sections that are None are leaves; `num_classes` is one, dict or not)."""
  out = {}
  items = config.items() if isinstance(config, SECTIONS) else ()
  for key, value in items:
    path = f'{prefix}{key}'
    if isinstance(value, SECTIONS) and value and path != 'num_classes' and not path.endswith('.num_classes'):
      out.update(flatten(value, path + '.'))
    else:
      value = plain(value)
      out[path] = tuple(value) if isinstance(value, list) else value
  return out
