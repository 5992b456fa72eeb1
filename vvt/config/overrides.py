"""Command-line overrides of a run config: `--config.a.b=VALUE` (or `--config.a.b VALUE`) for any field.

Overrides reach every field, including fields that are None in the file, whole sections (`--config.init_from=None`),
tuples (`--config.model.tubelet=1,8,8` or `'(1,8,8)'`) and dicts (`--config.num_classes="{'verb': 97, 'noun': 300}"`).
Values are Python literals where they parse as one (`None`/`null`, `True`/`true`, numbers, tuples, dicts); a string
field takes the text as it is. `--config.runlocal=True` first shrinks the config to a few-minute CPU run
(`vvt.config.runlocal`), then the other overrides apply.
"""
from __future__ import annotations

import ast
from typing import Sequence

import ml_collections

from vvt.config import paths
from vvt.config import runlocal
from vvt.config import schema
from vvt.config.errors import ConfigError
from vvt.convert import init_options

_NONE = ('none', 'null')
_TRUE, _FALSE = ('true', 'yes', 'on'), ('false', 'no', 'off')
# Sections that are None by default and whose fields can be set one by one (created from their defaults).
_SECTION_DEFAULTS = {'init_from': schema.init_from_config}
# Other spellings of their fields, set as the field they name.
_SECTION_ALIASES = {'init_from': init_options.ALIASES}


def split_argv(argv: Sequence[str]) -> tuple[str | None, list[tuple[str, str]], list[str]]:
  """(config spec, [(field path, raw value)], the other arguments) from a command line."""
  spec, overrides, rest = None, [], []
  argv = list(argv)
  i = 0
  while i < len(argv):
    arg = argv[i]
    if arg == '--config' or arg.startswith('--config='):
      if arg == '--config':
        if i + 1 >= len(argv):
          raise ConfigError('--config needs a value: FILE[:ARG] or a run\'s config.json')
        spec, i = argv[i + 1], i + 1
      else:
        spec = arg[len('--config='):]
    elif arg.startswith('--config.'):
      path, eq, value = arg[len('--config.'):].partition('=')
      if not eq:
        if i + 1 >= len(argv):
          raise ConfigError(f'--config.{path} needs a value: --config.{path}=VALUE')
        value, i = argv[i + 1], i + 1
      if not path:
        raise ConfigError(f'{arg}: name a field, e.g. --config.batch_size=8')
      overrides.append((path, value))
    else:
      rest.append(arg)
    i += 1
  return spec, overrides, rest


# ----------------------------------------------------------------------------- values


def parse_value(raw: str):
  """A command-line value as a Python literal where it is one, else the text."""
  text = raw.strip()
  if text.lower() in _NONE:
    return None
  if text.lower() in _TRUE:
    return True
  if text.lower() in _FALSE:
    return False
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError, MemoryError, RecursionError):
    return raw


def _describe(value) -> str:
  return ('None' if value is None else 'a section' if isinstance(value, ml_collections.ConfigDict)
          else type(value).__name__)


def _as_tuple(value):
  if isinstance(value, (tuple, list)):
    return tuple(value)
  if isinstance(value, str) and ',' in value:
    return tuple(parse_value(v) for v in value.split(',') if v.strip())
  return (value,)


def coerce(path: str, current, raw: str):
  """The value `raw` gives the field `path` whose value is `current`; ConfigError if it can't."""
  value = parse_value(raw)
  if value is None:
    return None
  if isinstance(current, bool):
    if isinstance(value, bool):
      return value
    if value in (0, 1):
      return bool(value)
    raise ConfigError(f'--config.{path}: expected True or False, got {raw!r}')
  if isinstance(current, int):
    if isinstance(value, int) and not isinstance(value, bool):
      return value
    raise ConfigError(f'--config.{path}: expected an integer, got {raw!r}')
  if isinstance(current, float):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
      return float(value)
    raise ConfigError(f'--config.{path}: expected a number, got {raw!r}')
  if isinstance(current, str):
    return raw
  if isinstance(current, (tuple, list)):
    return _as_tuple(value)
  if isinstance(value, dict):
    return ml_collections.ConfigDict(value)
  if isinstance(value, list):
    return tuple(value)
  return value


# ----------------------------------------------------------------------------- fields


def _section_defaults(path: str):
  make = _SECTION_DEFAULTS.get(path)
  return make() if make else None


def _hint(key, node, prefix) -> str:
  return paths.hint(key, node.keys(), '--config.' + prefix)


def _section(config: ml_collections.ConfigDict, path: str) -> tuple[ml_collections.ConfigDict, str]:
  """(the section holding the field `path`, its prefix 'a.b.'): None sections made from their defaults."""
  parts = path.split('.')
  node, prefix = config, ''
  for part in parts[:-1]:
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      where = prefix.rstrip('.') or 'the config'
      raise ConfigError(f'--config.{path}: unknown config field {prefix + part!r}'
                        f'{_hint(part, node, prefix) if isinstance(node, ml_collections.ConfigDict) else ""}'
                        f'; {where} has no field {part!r}')
    child = node[part]
    if child is None:
      child = _section_defaults(prefix + part)
      if child is None:
        raise ConfigError(f'--config.{path}: config.{prefix + part} is None; set it whole, e.g. '
                          f"--config.{prefix + part}=\"{{'{parts[len(prefix.split('.')) - 1]}': ...}}\"")
      node[part] = child
    elif isinstance(child, dict) and not isinstance(child, ml_collections.ConfigDict):
      child = ml_collections.ConfigDict(child)
      node[part] = child
    node, prefix = child, prefix + part + '.'
  if not isinstance(node, ml_collections.ConfigDict):
    raise ConfigError(f'--config.{path}: config.{prefix.rstrip(".")} is {_describe(node)}, not a section')
  return node, prefix


def set_field(config: ml_collections.ConfigDict, path: str, raw: str) -> None:
  """Sets `config.<path>` from a command-line value (see `coerce`), naming the field on error."""
  node, prefix = _section(config, path)
  leaf = path.split('.')[-1]
  defaults = _section_defaults(prefix.rstrip('.'))
  alias = _SECTION_ALIASES.get(prefix.rstrip('.'), {}).get(leaf)
  if alias is not None and leaf not in node:  # `init_from.path` sets `init_from.checkpoint`
    leaf = alias
  if leaf not in node and defaults is not None and leaf in defaults:  # a field the file left at its default
    node[leaf] = defaults[leaf]
  if leaf not in node:
    hint = _hint(leaf, node, prefix) or (f'; known fields of {prefix.rstrip(".") or "the config"}: '
                                         f'{", ".join(sorted(node.keys()))}')
    raise ConfigError(f'--config.{path}: unknown config field {path!r}{hint}')
  if node.get_type(leaf) is object:  # a flexible field: int or dict (num_classes), tuple or dict (label_keys)
    value = parse_value(raw)
    value = tuple(value) if isinstance(value, list) else value
  else:
    value = coerce(path, node[leaf], raw)
  try:
    node[leaf] = value
  except (TypeError, ValueError) as e:
    raise ConfigError(f'--config.{path}: cannot set {raw!r}: {e}') from None


def asks_runlocal(overrides: Sequence[tuple[str, str]]) -> bool:
  """Whether the overrides hold `runlocal=True`."""
  return any(path == 'runlocal' and parse_value(raw) is True for path, raw in overrides)


def apply_overrides(config, overrides: Sequence[tuple[str, str]], problems: list | None = None
                    ) -> ml_collections.ConfigDict:
  """Applies (path, raw value) pairs in order; `runlocal=True` among them is applied first.

  Every override is tried: those that fail are skipped, and their one-line problems raised together as one
  ConfigError at the end, or added to `problems` where given (the loader reports them with the config's own)."""
  overrides = list(overrides)
  if asks_runlocal(overrides):
    overrides = [(p, r) for p, r in overrides if p != 'runlocal']
    runlocal.apply(config)
  found = []
  for path, raw in overrides:
    try:
      set_field(config, path, raw)
    except ConfigError as e:
      found.extend(e.problems)
  if problems is not None:
    problems.extend(found)
  elif found:
    raise ConfigError(*found)
  return config
