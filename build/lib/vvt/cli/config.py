"""The one config loader of every `vvt` command: `--config SPEC` then `--config.a.b=value` overrides.

SPEC is a config file `FILE.py` or `FILE.py:ARG` (its `get_config(ARG)`), a run's saved `config.json`,
or a run directory (its `config.json`). Overrides use one syntax everywhere, `--config.a.b=value` (or
`--config.a.b value`), and reach every field, including fields that are None in the file, whole
sections (`--config.init_from=None`), tuples (`--config.model.tubelet=1,8,8` or `'(1,8,8)'`) and dicts
(`--config.num_classes="{'verb': 97, 'noun': 300}"`). Values are Python literals where they parse as
one (`None`/`null`, `True`/`true`, numbers, tuples, dicts); a string field takes the text as it is.
`--config.runlocal=True` first shrinks the config to a few-minute CPU run (`vvt.train.runlocal`),
then the other overrides apply.

Nothing here imports JAX or TensorFlow: a bad config or a missing file is reported at once.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import sys
from typing import Sequence

import ml_collections

from vvt.train import defaults
from vvt.train import runlocal
from vvt.train import validation
from vvt.train.defaults import ConfigError

_NONE = ('none', 'null')
_TRUE, _FALSE = ('true', 'yes', 'on'), ('false', 'no', 'off')


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


# ----------------------------------------------------------------------------- files


def _split_spec(spec: str) -> tuple[str, str | None]:
  if os.path.exists(spec):
    return spec, None
  for suffix in ('.py:', '.json:'):
    k = spec.find(suffix)
    if k >= 0:
      return spec[:k + len(suffix) - 1], spec[k + len(suffix):]
  return spec, None


def _module_name(path: str) -> tuple[str | None, str]:
  """('configs.kinetics400.vivit_b_fe', ROOT) for a file inside packages; (None, dir) otherwise."""
  path = os.path.abspath(path)
  folder, name = os.path.split(path)
  parts = [os.path.splitext(name)[0]]
  while os.path.exists(os.path.join(folder, '__init__.py')):
    folder, pkg = os.path.split(folder)
    parts.insert(0, pkg)
  return ('.'.join(parts) if len(parts) > 1 else None), folder


def _add_path(folder: str, first: bool = True) -> None:
  """Puts `folder` on sys.path: first (the named config file's own root wins), or last (a fallback)."""
  if not folder:
    return
  if first:
    while folder in sys.path:
      sys.path.remove(folder)
    sys.path.insert(0, folder)
  elif folder not in sys.path:
    sys.path.append(folder)


def _repo_root() -> str:
  """The folder holding the `configs` package beside an editable vvt install (or the cwd)."""
  here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  return here if os.path.exists(os.path.join(here, 'configs', '__init__.py')) else os.getcwd()


def _load_py(path: str, arg: str | None):
  _add_path(_repo_root(), first=False)
  name, root = _module_name(path)
  try:
    if name is not None:
      _add_path(root)
      module = importlib.import_module(name)
      if os.path.abspath(getattr(module, '__file__', '')) != os.path.abspath(path):
        raise ConfigError(f'config file {path}: the module name {name!r} is taken by '
                          f'{module.__file__}')
    else:
      spec = importlib.util.spec_from_file_location(
          'vvt_config_' + os.path.splitext(os.path.basename(path))[0], path)
      module = importlib.util.module_from_spec(spec)
      spec.loader.exec_module(module)
  except ConfigError:
    raise
  except Exception as e:  # a broken config file: one line naming it
    raise ConfigError(f'config file {path}: {type(e).__name__}: {e}') from e
  if not hasattr(module, 'get_config'):
    raise ConfigError(f'config file {path} has no get_config(arg=None) function')
  try:
    config = module.get_config(arg) if arg is not None else module.get_config()
  except (ValueError, KeyError, TypeError) as e:
    raise ConfigError(f'config file {path}{":" + arg if arg else ""}: {e}') from e
  if not isinstance(config, ml_collections.ConfigDict):
    raise ConfigError(f'config file {path}: get_config() returned {type(config).__name__}, '
                      'not an ml_collections.ConfigDict')
  return config


def _load_json(path: str):
  try:
    with open(path) as f:
      values = json.load(f)
  except json.JSONDecodeError as e:
    raise ConfigError(f'config file {path} is not valid JSON: {e}') from None
  if not isinstance(values, dict):
    raise ConfigError(f'config file {path} does not hold a JSON object')
  if 'model' in values and 'dataset' in values:
    return defaults.from_dict(values)
  return ml_collections.ConfigDict(values)


def load_file(spec: str) -> ml_collections.ConfigDict:
  """The config of SPEC (FILE.py[:ARG], config.json, or a run directory), without overrides."""
  path, arg = _split_spec(spec)
  if not os.path.exists(path) and not os.path.isabs(path) and path.startswith('configs' + os.sep):
    beside = os.path.join(_repo_root(), path)  # vvt's own configs/, from any working directory
    path = beside if os.path.exists(beside) else path
  if os.path.isdir(path):
    path = os.path.join(path, 'config.json')
    if not os.path.exists(path):
      raise ConfigError(f'--config {spec}: the directory has no config.json')
  if not os.path.exists(path):
    raise ConfigError(f'config file not found: {path} (absolute: {os.path.abspath(path)})')
  if path.endswith('.json'):
    if arg:
      raise ConfigError(f'--config {spec}: a JSON config takes no :ARG')
    return _load_json(path)
  if not path.endswith('.py'):
    raise ConfigError(f'--config {spec}: expected FILE.py[:ARG], a config.json or a run directory')
  return _load_py(path, arg)


# ----------------------------------------------------------------------------- overrides


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
    if isinstance(value, (tuple, list)):
      return tuple(value)
    if isinstance(value, str) and ',' in value:
      return tuple(parse_value(v) for v in value.split(',') if v.strip())
    return (value,)
  if isinstance(value, dict):
    return ml_collections.ConfigDict(value)
  if isinstance(value, list):
    return tuple(value)
  return value


# Sections that are None by default and whose fields can be set one by one (created from these).
def _section_defaults(path: str):
  if path == 'init_from':
    from vvt.convert import init_options  # pylint: disable=g-import-not-at-top
    return init_options.get_config()
  return None


def _hint(key, node, prefix) -> str:
  import difflib  # pylint: disable=g-import-not-at-top
  match = difflib.get_close_matches(key, list(node.keys()), n=1, cutoff=0.6)
  return f' (did you mean --config.{prefix}{match[0]}?)' if match else ''


def set_field(config: ml_collections.ConfigDict, path: str, raw: str) -> None:
  """Sets `config.<path>` from a command-line value (see `coerce`), naming the field on error."""
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
  leaf = parts[-1]
  if not isinstance(node, ml_collections.ConfigDict):
    raise ConfigError(f'--config.{path}: config.{prefix.rstrip(".")} is {_describe(node)}, not a section')
  schema = _section_defaults(prefix.rstrip('.'))
  if leaf not in node and schema is not None and leaf in schema:  # a field the file left at its default
    node[leaf] = schema[leaf]
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


def apply_overrides(config, overrides: Sequence[tuple[str, str]]) -> ml_collections.ConfigDict:
  """Applies (path, raw value) pairs in order; `runlocal=True` among them is applied first."""
  overrides = list(overrides)
  if any(path == 'runlocal' and parse_value(raw) is True for path, raw in overrides):
    overrides = [(p, r) for p, r in overrides if p != 'runlocal']
    runlocal.apply(config)
  for path, raw in overrides:
    set_field(config, path, raw)
  return config


def is_run_config(config) -> bool:
  return 'model' in config and 'dataset' in config


def load(spec: str | None, overrides: Sequence[tuple[str, str]] = (), *, validate: bool = True,
         files: Sequence[str] = ('train_files', 'eval_files'), init: bool = True
         ) -> ml_collections.ConfigDict:
  """Loads SPEC, applies the overrides, then (for a run config) validates every field and checks
  that the files it needs exist: the dataset `files` fields and, with `init`, the init checkpoint.

  Raises ConfigError with one line naming the field or file.
  """
  if not spec:
    raise ConfigError('missing --config FILE[:ARG] (or a run\'s config.json)')
  config = load_file(spec)
  local = config.get('runlocal') is True or any(
      p == 'runlocal' and parse_value(r) is True for p, r in overrides)
  if config.get('runlocal') is True:
    runlocal.apply(config)
  apply_overrides(config, overrides)
  if not is_run_config(config):
    return config
  if validate:
    validation.validate(config)
  if local and files and str(config.dataset.train_files).startswith(defaults.SYNTHETIC_DIR):
    ensure_synthetic(defaults.SYNTHETIC_DIR)
  problems = (validation.missing_files(config) if init else []) + (
      _missing_data(config, files) if files else [])
  if problems:
    raise ConfigError(problems[0])
  return config


def _missing_data(config, fields) -> list[str]:
  from vvt.data import patterns  # pylint: disable=g-import-not-at-top
  return patterns.missing_files(config.dataset, tuple(fields))


def ensure_synthetic(data_dir: str, log=None) -> bool:
  """Writes the synthetic motion dataset (`defaults.SYNTHETIC`) to `data_dir` unless it is there."""
  if os.path.exists(os.path.join(data_dir, 'manifest.json')):
    return False
  log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
  log(f'[vvt] writing the synthetic motion dataset to {data_dir} (once, ~20 s)')
  from vvt.data import synthetic  # pylint: disable=g-import-not-at-top
  synthetic.write_synthetic(data_dir, **defaults.SYNTHETIC)
  return True
