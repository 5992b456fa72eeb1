"""Validation of a run config before any work: names, types, ranges, choices, consistency, files.

`validate(config)` raises `ConfigError`, one line naming the field, for unknown fields (with the
closest valid name), values of the wrong type, numbers out of range (`RANGES`), values not among the
choices (`CHOICES`), an impossible batch split, inconsistent shared fields, a bad model (`vvt.models.resolve`)
or `init_from` section. It imports neither JAX nor TensorFlow, so a command reports a bad config at once.
"""
import os

import ml_collections

from vvt import fileio
from vvt.config import dataset
from vvt.config import paths
from vvt.config import schema
from vvt.config import sharding
from vvt.config.errors import ConfigError
from vvt.convert import init_options
from vvt.data import choices as dataset_choices
from vvt.models import axes as logical_axes
from vvt.models import config as model_config

# Numeric ranges: path -> (lowest, highest, lowest excluded, highest excluded); None = unbounded.
_POSITIVE = (0, None, True, False)
_NON_NEGATIVE = (0, None, False, False)
_RATE = (0, 1, False, True)          # [0, 1)
_PROBABILITY = (0, 1, False, False)  # [0, 1]
RANGES = {
    'num_frames': _POSITIVE, 'image_size': _POSITIVE,
    'batch_size': _POSITIVE, 'num_epochs': _NON_NEGATIVE, 'seed': _NON_NEGATIVE,
    'optimizer.momentum': _RATE, 'optimizer.b1': _RATE, 'optimizer.b2': _RATE,
    'optimizer.eps': _POSITIVE, 'optimizer.weight_decay': _NON_NEGATIVE,
    'optimizer.grad_clip_norm': _NON_NEGATIVE, 'optimizer.accumulation_steps': _POSITIVE,
    'schedule.base_lr': _POSITIVE, 'schedule.end_lr': _NON_NEGATIVE,
    'schedule.warmup_epochs': _NON_NEGATIVE, 'schedule.decay_factor': (0, 1, True, False),
    'loss.label_smoothing': _RATE, 'loss.mixup_alpha': _NON_NEGATIVE,
    'loss.cutmix_alpha': _NON_NEGATIVE, 'loss.mix_switch_prob': _PROBABILITY,
    'eval.batch_size': _POSITIVE, 'eval.every_steps': _NON_NEGATIVE,
    'checkpoint.every_steps': _POSITIVE, 'checkpoint.keep': _POSITIVE,
    'log_every_steps': _POSITIVE,
    'dataset.stride': _POSITIVE,
    'dataset.train_min_resize': _POSITIVE, 'dataset.train_max_resize': _POSITIVE,
    'dataset.eval_resize': _POSITIVE, 'dataset.color_jitter': _PROBABILITY,
    'dataset.color_jitter_prob': _PROBABILITY, 'dataset.random_erasing': _PROBABILITY,
    'dataset.shuffle_buffer': _NON_NEGATIVE, 'dataset.cycle_length': _POSITIVE,
    'dataset.prefetch': _NON_NEGATIVE, 'dataset.seed': _NON_NEGATIVE,
    'mesh.fsdp_min_size': _POSITIVE,
    'optimizer.ema_decay': _RATE, 'optimizer.layer_decay': (0, 1, True, False),
    'dataset.repeated_augmentation': _POSITIVE,
    'distributed.heartbeat_timeout_seconds': _POSITIVE,
}
CHOICES = {
    'optimizer.name': schema.OPTIMIZERS,
    'schedule.name': schema.SCHEDULES,
    'eval.average': schema.EVAL_AVERAGES,
    **{f'dataset.{field}': choices for field, choices in dataset_choices.CHOICES.items()},
    **{f'dataset.{field}': choices for field, choices in dataset_choices.OPTIONAL_CHOICES.items()},
}
# -1 means "all" / "from the epochs" / "unset" for these.
_MINUS_ONE_OK = ('num_train_steps', 'schedule.warmup_steps', 'mesh.num_devices',
                 'distributed.num_processes', 'distributed.process_id')
# Numeric fields that may also be None (off).
_NONE_OK = ('optimizer.ema_decay',)
# The fields whose values the type check leaves to their own checks.
_OWN_CHECKS = ('model', 'num_classes', 'class_names')


def schema_config() -> ml_collections.ConfigDict:
  """The full default tree used to check names and types: the run-level defaults and the dataset's."""
  c = schema.get_base_config()
  c.dataset = dataset.get_config()
  return c


def validate(config, num_devices: int | None = None, num_processes: int = 1) -> None:
  """Raises ConfigError naming the field for anything wrong in a run config, before any work.

  Checks unknown fields (with the closest valid name), types, choices and ranges of every run-level
  and dataset field, the shared fields, the model (`vvt.models.resolve`), the `init_from` section,
  and cross-field consistency (the mesh's axes over the devices, batch splits over the data axes,
  processes and accumulation steps). `num_devices=None` (not known yet, e.g. when a command loads
  its config): the mesh and the batch are checked against the axes' fixed sizes only.
  """
  reference = schema_config()
  _check_names(config, reference)
  _check_sections(config)
  _check_types(config, reference)
  _check_values(config)
  _check_shared(config)
  _check_data(config.dataset, config.image_size)
  _check_batch(config, _check_mesh(config.mesh, num_devices), num_processes)
  _check_schedule(config)
  _validate_model(config.model)
  if config.init_from is not None:
    _validate_init_from(config.init_from)


# ----------------------------------------------------------------------------- names and types


def _check_names(config, reference, prefix=''):
  """Every field of `config` is one of `reference` (the model's own fields are checked by the model)."""
  for key in config.keys():
    path = f'{prefix}{key}'
    if key not in reference:
      hint = paths.hint(key, reference.keys(), prefix) or (
          f'; known fields of {prefix.rstrip(".") or "the config"}: {", ".join(sorted(reference.keys()))}')
      raise ConfigError(f'unknown config field {path!r}{hint}')
    ref = reference[key]
    if isinstance(ref, ml_collections.ConfigDict) and ref.keys() and key != 'model':
      if not isinstance(config[key], ml_collections.ConfigDict):
        raise ConfigError(f'config field {path!r} must be a section, got {config[key]!r}')
      _check_names(config[key], ref, path + '.')


def _check_sections(config):
  for section, source in (('model', 'vvt.models.get_config'), ('dataset', 'vvt.config.dataset.get_config')):
    if not isinstance(config.get(section), ml_collections.ConfigDict) or not config[section]:
      raise ConfigError(f'config.{section} is empty: set it from {source}')


def _is_int(v):
  return isinstance(v, int) and not isinstance(v, bool)


def _type_ok(ref, value) -> bool:
  """`value` has the type of the default `ref` (floats accept ints; tuples accept lists and strings)."""
  if _is_int(ref):
    return _is_int(value)
  if isinstance(ref, float):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if isinstance(ref, bool):
    return isinstance(value, bool)
  if isinstance(ref, str):
    return isinstance(value, str)
  if isinstance(ref, (tuple, list)):
    return isinstance(value, (tuple, list, str))
  return True


def _type_name(ref) -> str:
  return ('an integer' if _is_int(ref) else 'a number' if isinstance(ref, float)
          else 'True or False' if isinstance(ref, bool) else 'a string' if isinstance(ref, str) else 'a tuple')


def _check_types(config, reference, prefix=''):
  """Each value has its default's type (ints where ints are expected, floats accept ints, ...)."""
  for key in reference.keys():
    if key not in config or key in _OWN_CHECKS or reference.get_type(key) is object:  # object: a flexible field
      continue
    ref, value, path = reference[key], config[key], f'{prefix}{key}'
    if isinstance(ref, ml_collections.ConfigDict):
      if isinstance(value, ml_collections.ConfigDict):
        _check_types(value, ref, path + '.')
    elif ref is not None and not _type_ok(ref, value) and not (value is None and path in _NONE_OK):
      raise ConfigError(f'config field {path!r} must be {_type_name(ref)}, got {value!r}')


# ----------------------------------------------------------------------------- values


def _check_values(config):
  """Choices and ranges of the fields in CHOICES, RANGES and _MINUS_ONE_OK."""
  for path, choices in CHOICES.items():
    value = paths.get(config, path)
    if value is not None and value not in choices:
      hint = paths.hint(str(value), map(str, choices))
      raise ConfigError(f'{path} must be one of {", ".join(map(repr, choices))}, got {value!r}{hint}')
  for path in RANGES:
    _check_range(path, paths.get(config, path))
  for path in _MINUS_ONE_OK:
    value = paths.get(config, path)
    if value is not None and (value < -1 or value == 0 and path == 'mesh.num_devices'):
      raise ConfigError(f'{path} must be -1 or {"positive" if value == 0 else ">= 0"}, got {value}')


def _check_range(path, value):
  if value is None or (path in _MINUS_ONE_OK and value == -1):
    return
  lo, hi, lo_open, hi_open = RANGES[path]
  bad = (lo is not None and (value <= lo if lo_open else value < lo)) or (
      hi is not None and (value >= hi if hi_open else value > hi))
  if bad:
    interval = (f'{"(" if lo_open else "["}{lo if lo is not None else "-inf"}, '
                f'{hi if hi is not None else "inf"}{")" if hi_open or hi is None else "]"}')
    what = 'positive' if (lo, hi, lo_open) == (0, None, True) else f'in {interval}'
    raise ConfigError(f'{path} must be {what}, got {value!r}')


def _num_classes(nc):
  return paths.plain(nc) if hasattr(nc, 'items') else nc


def _check_num_classes(value):
  items = dict(paths.plain(value)).items() if hasattr(value, 'items') else [(None, value)]
  if not items:
    raise ConfigError('num_classes is an empty dict: give an int, or a dict head -> int')
  if value in (0, None):
    raise ConfigError('num_classes is not set and the data names no classes (no manifest.json or classes.txt '
                      'beside the training files, as `vvt data convert --classes` writes): set --config.num_classes=N')
  for head, n in items:
    if not _is_int(n) or n < 1:
      where = 'num_classes' if head is None else f'num_classes[{head!r}]'
      raise ConfigError(f'{where} must be a positive integer, got {n!r}')


def _check_shared(config):
  """The shared fields: valid, and read (not overwritten) by the model and the data."""
  _check_num_classes(config.num_classes)
  for field in schema.SHARED_FIELDS:
    for section in schema.SECTIONS_WITH_SHARED_FIELDS:
      sub = config[section]
      if field in sub and _num_classes(sub[field]) != _num_classes(config[field]):
        raise ConfigError(f'{section}.{field}={_num_classes(sub[field])} differs from '
                          f'{field}={_num_classes(config[field])}: set the top-level {field} '
                          f'(model and dataset read it)')
  if config.class_names is not None:
    names, nc = tuple(config.class_names), config.num_classes
    if _is_int(nc) and len(names) != nc:
      raise ConfigError(f'class_names has {len(names)} names but num_classes={nc}')


def _check_data(d, image_size):
  ra = d.get('randaugment')
  if ra is not None and hasattr(ra, 'get') and not 0 <= float(ra.get('magnitude', 9)) <= 10:
    raise ConfigError(f'dataset.randaugment.magnitude must be in [0, 10] (vvt\'s RandAugment scale, '
                      f'where 10 is the strongest), got {ra.get("magnitude")}')
  _check_recipe_fields(d)
  if d.train_min_resize > d.train_max_resize:
    raise ConfigError(f'dataset.train_min_resize={d.train_min_resize} is larger than '
                      f'dataset.train_max_resize={d.train_max_resize}')
  for field in ('train_min_resize', 'eval_resize'):
    if d[field] < image_size:
      raise ConfigError(f'dataset.{field}={d[field]} is smaller than the crop image_size={image_size}')


def _check_recipe_fields(d):
  """dataset.fps, num_test_clips, autoaugment (not with randaugment) and label_aware_flip (needs the flip)."""
  clips = d.get('num_test_clips')
  if clips == dataset_choices.WHOLE_VIDEO:
    if d.sampling != 'stride':
      raise ConfigError(f"dataset.num_test_clips='all' tiles each video with clips of dataset.stride: it needs "
                        f"dataset.sampling='stride', got {d.sampling!r}")
  elif not _is_int(clips) or clips < 1:
    raise ConfigError(f"dataset.num_test_clips must be a positive integer or 'all', got {clips!r}")
  fps = d.get('fps')
  if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0):
    raise ConfigError(f'dataset.fps must be a positive number of frames per second, or None, got {fps!r}')
  if d.get('autoaugment') is not None and d.get('randaugment') is not None:
    raise ConfigError(f'dataset.autoaugment={d.autoaugment!r} and dataset.randaugment are both set: choose one')
  if d.get('label_aware_flip') and not d.horizontal_flip:
    raise ConfigError('dataset.label_aware_flip needs dataset.horizontal_flip=True (it swaps the labels of '
                      'flipped clips)')


# ----------------------------------------------------------------------------- mesh, batch, schedule


def _check_mesh(mesh_cfg, num_devices):
  """`mesh.axes`, `mesh.rules` and `mesh.logical_rules` well formed and, with `num_devices`, dividing the devices.

  Returns (number of batch shards, what they are) for the batch checks: the batch's mesh axes are those of the
  logical rules' `batch`.
  """
  axes = sharding.axes_of(mesh_cfg.axes)
  if num_devices is not None:
    axes = sharding.resolve_axes(axes, num_devices)
  _check_rules(mesh_cfg.rules)
  logical = sharding.logical_rules_of(mesh_cfg)
  batch_axes = logical_axes.batch_axes(logical)
  data = [(k, v) for k, v in axes if k in batch_axes and v != -1]
  what = ' x '.join(f'{k}={v}' for k, v in data) or 'data=1'
  return sharding.data_size(data, logical), f'data axes of the mesh ({what})'


def _check_rules(rules):
  if rules is None:
    return
  if not isinstance(rules, (tuple, list)):
    raise ConfigError(f"mesh.rules must be a tuple of (regex, spec) pairs, e.g. "
                      f"((r'head/', 'replicate'),), got {rules!r}")
  sharding.check_rules(rules)


def _check_batch(config, shards, num_processes):
  n, what = shards
  bs, accum, eval_bs = config.batch_size, config.optimizer.accumulation_steps, config.eval.batch_size
  if bs % accum:
    raise ConfigError(f'batch_size={bs} is not divisible by optimizer.accumulation_steps={accum}')
  _check_repeats(bs, int(config.dataset.get('repeated_augmentation', 1)), num_processes)
  if (bs // accum) % n:
    raise ConfigError(f'the micro-batch batch_size/accumulation_steps={bs // accum} '
                      f'is not divisible by the {n} batch shards of the {what}')
  if bs % num_processes or eval_bs % num_processes:
    raise ConfigError(f'batch_size={bs} and eval.batch_size={eval_bs} '
                      f'must be divisible by the {num_processes} processes')
  if eval_bs % n:
    raise ConfigError(f'eval.batch_size={eval_bs} must be a multiple of the {n} batch shards of the {what}')


def _check_repeats(bs, repeats, num_processes):
  """dataset.repeated_augmentation: every process's part of the batch holds whole groups of N copies."""
  if repeats > 1 and bs % repeats:
    raise ConfigError(f'batch_size={bs} is not divisible by dataset.repeated_augmentation={repeats}')
  if repeats > 1 and bs % num_processes == 0 and (bs // num_processes) % repeats:
    raise ConfigError(f'the per-process batch batch_size/processes={bs // num_processes} is not divisible by '
                      f'dataset.repeated_augmentation={repeats}')


def _check_schedule(config):
  if config.num_train_steps <= 0 and config.num_epochs <= 0:
    raise ConfigError('set num_epochs > 0 or num_train_steps > 0')
  if 0 < config.num_train_steps <= config.schedule.warmup_steps:
    raise ConfigError(f'schedule.warmup_steps={config.schedule.warmup_steps} does not fit in '
                      f'num_train_steps={config.num_train_steps}')


# ----------------------------------------------------------------------------- model, init_from, files


def _validate_model(model):
  try:
    model_config.resolve(model)
  except ConfigError:
    raise
  except ValueError as e:
    raise ConfigError(str(e)) from None


def _validate_init_from(init_from):
  if not isinstance(init_from, ml_collections.ConfigDict):
    raise ConfigError(f'init_from must be None or a section, got {init_from!r}')
  try:
    init_options.validate(init_from)
  except ValueError as e:
    raise ConfigError(str(e)) from None


def missing_files(config) -> list[str]:
  """Files the run needs that do not exist: one line each, naming the field (no JAX, no TF)."""
  out = []
  init = config.get('init_from')
  if isinstance(init, ml_collections.ConfigDict):
    path = init.get('checkpoint') or init.get('path')
    if path and not fileio.is_url(path) and not os.path.exists(path):
      field = 'checkpoint' if init.get('checkpoint') else 'path'
      out.append(f'init_from.{field}: no such file {path!r} (absolute: {os.path.abspath(path)!r}); '
                 'set --config.init_from=None to train from scratch')
  return out
