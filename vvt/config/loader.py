"""The one config loader of every `vvt` command: `--config SPEC` then `--config.a.b=value` overrides.

SPEC is a config file `FILE.py` or `FILE.py:ARG` (its `get_config(ARG)`), a run's saved `config.json`,
or a run directory (its `config.json`; a run directory or config.json may be a URL such as gs://bucket/run).
The overrides (`vvt.config.overrides`) use one syntax everywhere, `--config.a.b=value`, and reach every field.
A run config is then validated (`vvt.config.validation`) and the files it needs are checked; `load_run` gives
the commands that run it its RunSpec (`vvt.config.run_spec`), the config resolved once.

Nothing here imports JAX or TensorFlow: a bad config or a missing file is reported at once.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from typing import Sequence

import ml_collections

from vvt import fileio
from vvt.config import labels
from vvt.config import overrides as overrides_lib
from vvt.config import run_file
from vvt.config import run_spec
from vvt.config import runlocal
from vvt.config import schema
from vvt.config import validation
from vvt.config.errors import ConfigError
from vvt.data import batch_memory_problem
from vvt.data import clip_problems
from vvt.data import list_problems
from vvt.data import missing_files
from vvt.data import unlabelled_problems
from vvt.data import write_synthetic
from vvt.tasks import registry as tasks_registry

# ----------------------------------------------------------------------------- config files (FILE.py[:ARG])


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


def _import_file(path: str):
  """The module of the config file `path`: by its package name where it sits in packages, else on its own."""
  _add_path(_repo_root(), first=False)
  name, root = _module_name(path)
  if name is None:
    spec = importlib.util.spec_from_file_location(
        'vvt_config_' + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
  _add_path(root)
  module = importlib.import_module(name)
  if os.path.abspath(getattr(module, '__file__', '')) != os.path.abspath(path):
    raise ConfigError(f'config file {path}: the module name {name!r} is taken by {module.__file__}')
  return module


def _load_py(path: str, arg: str | None):
  try:
    module = _import_file(path)
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


# ----------------------------------------------------------------------------- config.json and run directories


def _is_dir(path: str) -> bool:
  """A local folder, or a URL of a run directory (one that holds a config.json)."""
  if fileio.is_url(path):
    return not path.endswith(('.json', '.py')) and fileio.exists(run_file.path(path))
  return os.path.isdir(path)


def _load_json(path: str):
  try:
    values = json.loads(fileio.read_text(path))
  except json.JSONDecodeError as e:
    raise ConfigError(f'config file {path} is not valid JSON: {e}') from None
  if not isinstance(values, dict):
    raise ConfigError(f'config file {path} does not hold a JSON object')
  if is_run_config(values):
    return run_file.from_dict(values)
  return ml_collections.ConfigDict(values)


def _file_path(spec: str) -> tuple[str, str | None]:
  """(the existing file SPEC names, its ARG): vvt's own configs/ from any directory, a run dir's config.json."""
  path, arg = _split_spec(spec)
  if not os.path.exists(path) and not os.path.isabs(path) and path.startswith('configs' + os.sep):
    beside = os.path.join(_repo_root(), path)  # vvt's own configs/, from any working directory
    path = beside if os.path.exists(beside) else path
  if _is_dir(path):
    path = run_file.path(path)
    if not fileio.exists(path):
      raise ConfigError(f'--config {spec}: the directory has no config.json')
  if not fileio.exists(path):
    raise ConfigError(f'config file not found: {path} (absolute: {fileio.abspath(path)})')
  return path, arg


def load_file(spec: str) -> ml_collections.ConfigDict:
  """The config of SPEC (FILE.py[:ARG], config.json, or a run directory), without overrides."""
  path, arg = _file_path(spec)
  if path.endswith('.json'):
    if arg:
      raise ConfigError(f'--config {spec}: a JSON config takes no :ARG')
    return _load_json(path)
  if not path.endswith('.py'):
    raise ConfigError(f'--config {spec}: expected FILE.py[:ARG], a config.json or a run directory')
  return _load_py(path, arg)


# ----------------------------------------------------------------------------- the loader


def is_run_config(config) -> bool:
  return 'model' in config and 'dataset' in config


# The dataset files each purpose reads (vvt.config.validation.PURPOSES); only training reads `init_from`.
FILES = {'train': ('train_files', 'eval_files'), 'eval': ('eval_files',)}


def load(spec: str | None, overrides: Sequence[tuple[str, str]] = (), *, validate: bool = True,
         purpose: str = 'train', files: Sequence[str] | None = None, init: bool | None = None,
         adapt=None, finish=None) -> ml_collections.ConfigDict:
  """Loads SPEC, applies the overrides, then (for a run config) validates the fields `purpose` reads ('train',
  'eval', 'predict', 'attention', 'summary': `vvt.config.validation.PURPOSES`) and checks that the files it needs
  exist: the dataset `files` fields (default: the purpose's, `FILES`) and, with `init` (default: for training),
  the init checkpoint. `adapt(config)`, where given, changes a run config before the overrides apply (`vvt train
  --init`: the checkpoint's model and preprocessing, which the command line still overrides); `finish(config)`,
  where given, changes a valid run config before it is resolved (`vvt train --init`: whether the checkpoint's
  classifier is kept, once the data named the classes); it changes no field that the validation checked.

  Raises one ConfigError with every problem found (bad overrides, classes that disagree with the data, invalid
  fields, missing files), one line each naming the field or file.
  """
  return _load(spec, overrides, validate, purpose, files, init, adapt, finish)[0]


def load_run(spec: str | None, overrides: Sequence[tuple[str, str]] = (), *, purpose: str = 'train',
             files: Sequence[str] | None = None, init: bool | None = None, adapt=None,
             finish=None) -> run_spec.RunSpec:
  """As `load`, for a command that runs the config: its RunSpec (`vvt.config.run_spec`: validated for `purpose`
  and resolved once, the model's `vvt.models.resolve` included). ConfigError for a config that is not a run
  config."""
  _, run = _load(spec, overrides, True, purpose, files, init, adapt, finish)
  if run is None:
    raise ConfigError(f'--config {spec}: not a run config (it has no model and dataset sections)')
  return run


def _load(spec, overrides, validate, purpose, files, init, adapt, finish=None
          ) -> tuple[ml_collections.ConfigDict, run_spec.RunSpec | None]:
  """(config, its RunSpec when it is a validated run config, else None): see `load`."""
  if not spec:
    raise ConfigError('missing --config FILE[:ARG] (or a run\'s config.json)')
  files = FILES.get(purpose, ()) if files is None else tuple(files)
  init = purpose == 'train' if init is None else init
  config = load_file(spec)
  local = config.get('runlocal') is True or overrides_lib.asks_runlocal(overrides)
  if config.get('runlocal') is True:
    runlocal.apply(config)
  if adapt is not None and is_run_config(config):
    adapt(config)
  problems = []
  overrides_lib.apply_overrides(config, overrides, problems)
  if not is_run_config(config):
    if problems:
      raise ConfigError(*problems)
    return config, None
  # unset num_classes / class_names from the data's manifest; training refuses set ones that disagree
  try:
    labels.resolve(config, check='train_files' in files)
  except ConfigError as e:
    problems.extend(e.problems)
  # no data: say that, not that it names no classes
  no_classes = not config.get('num_classes') and bool(files) and bool(
      _missing_data(config, files) or _unlabelled(config, files))
  model = None
  if validate:  # validation: every field the purpose reads, one line each; the model resolved once
    lines, model = validation.check(config, purpose=purpose, unset_classes_ok=no_classes)
    problems += lines
  synthetic_run = local and files and str(config.dataset.train_files).startswith(schema.SYNTHETIC_DIR)
  if synthetic_run and not problems:
    ensure_synthetic(schema.SYNTHETIC_DIR)
  problems += validation.missing_files(config) if init else []
  if files and not (synthetic_run and problems):  # the synthetic data is written once the config is valid
    problems += _missing_data(config, files)
    problems += _data_problems(config, files, valid=not problems)
  if problems:
    raise ConfigError(*problems)
  if finish is not None:
    finish(config)
  run = run_spec.resolve(config, purpose=purpose, model=model) if validate else None
  return config, run


def _missing_data(config, fields) -> list[str]:
  return missing_files(config.dataset, tuple(fields))


def _label_reason(config) -> str:
  """Why a run of `config` reads labels ('' when it reads none: `validation.label_free`)."""
  if validation.label_free(config):
    return ''
  if not config.get('num_classes') or tasks_registry.hooks_of(config).reads_labels:
    return f'task.name={config.task.name!r} reads labels'
  return f'num_classes={config.num_classes} makes this run read labels (0 leaves it unset)'


def _unlabelled(config, fields) -> list[str]:
  """One line per unlabelled data file of `fields` when the run reads labels (`vvt.data.unlabelled_problems`)."""
  return unlabelled_problems(config.dataset, fields, _label_reason(config))


def _data_problems(config, fields, valid: bool) -> list[str]:
  """What the data refuses before any work (`vvt.data.preflight`): its video lists whenever they exist; a split
  whose every video is shorter than a clip, and a batch of decoded clips larger than the host's memory, once the
  config is otherwise valid."""
  data = config.dataset
  out = list_problems(data, fields) + _unlabelled(config, fields)
  if not valid or out:
    return out
  out += clip_problems(data, fields)
  processes = max(int(config.distributed.num_processes), 1)
  batches = {'train_files': (config.batch_size, 'a training batch (batch_size)'),
             'eval_files': (config.eval.batch_size, 'an evaluation batch (eval.batch_size)')}
  lines = (batch_memory_problem(data, max(int(batches[f][0]) // processes, 1), batches[f][1])
           for f in fields if f in batches)
  return out + [line for line in lines if line]


def ensure_synthetic(data_dir: str, log=None) -> bool:
  """Writes the synthetic motion dataset (`schema.SYNTHETIC`) to `data_dir` unless it is there."""
  if os.path.exists(os.path.join(data_dir, 'manifest.json')):
    return False
  log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
  log(f'[vvt] writing the synthetic motion dataset to {data_dir} (once, ~20 s)')
  write_synthetic(data_dir, **schema.SYNTHETIC)
  return True
