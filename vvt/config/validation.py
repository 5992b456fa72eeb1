"""Validation of a run config before any work: names, types, ranges, choices, consistency, files.

`validate(config, purpose=...)` raises one `ConfigError` carrying every problem it finds (`problems`, one line
each naming the field, in a stable order: names, types, choices, ranges, then the checks across fields, the model
(`vvt.models.resolve`) and the `init_from` section), so a command reports them all in one run. It imports neither
JAX nor TensorFlow, so a command reports a bad config at once.

Each command checks only the fields it reads. Every field of a run config belongs to one group (`GROUPS`: the
longest prefix that names it), and each purpose (`PURPOSES`: train, eval, predict, attention, summary) names the
groups it uses, so `vvt eval` and `vvt predict` never refuse a training-only field (the crop range, the
optimiser, the schedule, the loss, the training files, the checkpoint cadence). A check across fields declares the
groups of the fields it reads and runs only where the purpose uses them all. Unknown field names are refused
whatever the purpose (a misspelt field is wrong everywhere).

A problem that makes the checks after it meaningless stops them and says so: an empty `model` or `dataset` section
(nothing else is checked), a section that is not one (its fields' checks are skipped), a field of the wrong type or
out of range (the checks that read it are skipped). A command whose config is validated again later gives its
purpose by `for_command(purpose)`.

`validate` returns the resolved model config (`vvt.models.resolve`, the model's check), from which
`vvt.config.run_spec.resolve` builds the run's ModelSpec, so the model is resolved once. Once the devices are
known, `vvt.config.run_spec.check_devices` checks the resolved run's mesh and batches (`check_batch_split`),
reporting every problem at once as well.
"""
import contextlib
import contextvars
import os

import ml_collections

from vvt import fileio
from vvt.config import dataset
from vvt.config import paths
from vvt.config import schema
from vvt.config import sharding
from vvt.config.errors import ConfigError
from vvt.config.errors import problems_of
from vvt.convert import init_options
from vvt.data import CHOICES
from vvt.data import OPTIONAL_CHOICES
from vvt.data import WHOLE_VIDEO
from vvt.models import axes as logical_axes
from vvt.models import config as model_config
from vvt.models import frame_size
from vvt.tasks import registry as tasks_registry

# Numeric ranges: path -> (lowest, highest, lowest excluded, highest excluded); None = unbounded.
_POSITIVE = (0, None, True, False)
_NON_NEGATIVE = (0, None, False, False)
_RATE = (0, 1, False, True)          # [0, 1)
_PROBABILITY = (0, 1, False, False)  # [0, 1]
RANGES = {
    'num_frames': _POSITIVE,
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
    'dataset.captions': _NON_NEGATIVE,
    'distributed.heartbeat_timeout_seconds': _POSITIVE,
}
CHOICES = {
    'optimizer.name': schema.OPTIMIZERS,
    'schedule.name': schema.SCHEDULES,
    'eval.average': schema.EVAL_AVERAGES,
    'task.name': tuple(tasks_registry.TASKS),
    **{f'dataset.{field}': choices for field, choices in CHOICES.items()},
    **{f'dataset.{field}': choices for field, choices in OPTIONAL_CHOICES.items()},
}
# -1 means "all" / "from the epochs" / "unset" for these.
_MINUS_ONE_OK = ('num_train_steps', 'schedule.warmup_steps', 'mesh.num_devices',
                 'distributed.num_processes', 'distributed.process_id')
# Numeric fields that may also be None (off).
_NONE_OK = ('optimizer.ema_decay',)
# The fields whose values the type check leaves to their own checks.
_OWN_CHECKS = ('model', 'num_classes', 'class_names', 'image_size')



# ----------------------------------------------------------------------------- field groups, purposes

# The fields of each group: dotted paths; a section stands for all its fields (a field's group is its longest
# prefix's).
GROUPS = {
    'model': ('model', 'num_frames', 'image_size', 'task'),
    'classes': ('num_classes', 'class_names', 'dataset.num_classes', 'dataset.multi_label'),
    # how a video becomes the model's evaluation views (eval, predict, attention)
    'views': ('dataset.num_frames', 'dataset.image_size', 'dataset.stride', 'dataset.sampling',
              'dataset.short_video_policy', 'dataset.fps', 'dataset.num_test_clips', 'dataset.eval_resize',
              'dataset.num_spatial_crops', 'dataset.normalization'),
    # reading the evaluation records
    'eval_data': ('dataset.name', 'dataset.data_dir', 'dataset.eval_files', 'dataset.tfds_name',
                  'dataset.tfds_video_key', 'dataset.tfds_label_keys', 'dataset.frames_key', 'dataset.label_keys',
                  'dataset.video_id_key', 'dataset.cycle_length', 'dataset.prefetch', 'dataset.on_error',
                  'dataset.captions', 'dataset.tokenizer'),  # captions: a video-text task's texts
    # the training data and its augmentation
    'train_data': ('dataset.train_files', 'dataset.tfds_train_split', 'dataset.train_min_resize',
                   'dataset.train_max_resize', 'dataset.horizontal_flip', 'dataset.label_aware_flip',
                   'dataset.color_jitter', 'dataset.color_jitter_prob', 'dataset.randaugment', 'dataset.autoaugment',
                   'dataset.random_erasing', 'dataset.repeated_augmentation', 'dataset.shuffle_buffer',
                   'dataset.cache', 'dataset.seed'),
    'evaluation': ('eval',),  # batch_size, average, split, raw_params
    'training': ('seed', 'batch_size', 'num_epochs', 'num_train_steps', 'optimizer', 'schedule', 'loss',
                 'checkpoint', 'log_every_steps', 'eval.every_steps', 'init_from', 'runlocal', 'profile'),
    'devices': ('mesh', 'distributed'),
}
# The groups each command reads.
PURPOSES = {
    'train': tuple(GROUPS),                                                        # vvt train, sweep, memory, demo
    'eval': ('model', 'classes', 'views', 'eval_data', 'evaluation', 'devices'),   # vvt eval
    'predict': ('model', 'classes', 'views', 'evaluation'),                        # vvt predict (one device)
    'attention': ('model', 'classes', 'views'),                                    # vvt attention
    'summary': ('model', 'classes'),                                               # vvt summary, export --import
}
_GROUP_OF = {prefix: group for group, prefixes in GROUPS.items() for prefix in prefixes}
_PURPOSE = contextvars.ContextVar('vvt_config_purpose', default='train')


def group_of(path: str) -> str | None:
  """The group of the field `path` ('optimizer.name' -> 'training'): its longest prefix's in GROUPS."""
  parts = path.split('.')
  for n in range(len(parts), 0, -1):
    group = _GROUP_OF.get('.'.join(parts[:n]))
    if group is not None:
      return group
  return None


def groups_of(purpose: str | None = None) -> frozenset:
  """The groups `purpose` checks (None: the command's, `for_command`, else 'train')."""
  purpose = purpose or _PURPOSE.get()
  if purpose not in PURPOSES:
    raise ValueError(f'unknown validation purpose {purpose!r}; one of {", ".join(PURPOSES)}')
  return frozenset(PURPOSES[purpose])


@contextlib.contextmanager
def for_command(purpose: str):
  """Within it, `validate` without a purpose checks the fields of `purpose` (e.g. `vvt eval`'s config, which the
  evaluation validates again against the mesh's devices)."""
  groups_of(purpose)
  token = _PURPOSE.set(purpose)
  try:
    yield
  finally:
    _PURPOSE.reset(token)


class _Problems:
  """The problems found so far (one line each, in order) and the fields they make unusable for later checks."""

  def __init__(self, groups: frozenset):
    self.groups, self.lines, self.bad = groups, [], set()
    self.model = None  # the resolved model config, once `_check_model` resolved it

  def add(self, line: str, *fields: str) -> None:
    self.lines.append(line)
    self.bad.update(fields)

  def uses(self, path: str) -> bool:
    """Whether the command reads the field `path`."""
    return group_of(path) in self.groups

  def good(self, *fields: str) -> bool:
    """Whether no problem so far made one of `fields` (or a section above it) unusable."""
    return not any(f == b or f.startswith(b + '.') for f in fields for b in self.bad)

  def runs(self, groups, *fields: str) -> bool:
    """Whether a check reading `fields` of `groups` runs: the command reads the groups and the fields are good."""
    return set(groups) <= self.groups and self.good(*fields)

  def collect(self, check, *args, fields=()):
    """`check(*args)`, or None after adding the lines of the ValueError it raised (marking `fields` bad)."""
    try:
      return check(*args)
    except ValueError as e:
      for line in problems_of(e):
        self.add(line, *fields)
      return None


def schema_config() -> ml_collections.ConfigDict:
  """The full default tree used to check names and types: the run-level defaults and the dataset's."""
  c = schema.get_base_config()
  c.dataset = dataset.get_config()
  return c


def validate(config, num_devices: int | None = None, num_processes: int = 1, purpose: str | None = None,
             *, unset_classes_ok: bool = False):
  """Raises one ConfigError with every problem of a run config (`problems`, one line each naming the field);
  returns the resolved model config (None where `unset_classes_ok` left num_classes unset).

  purpose: 'train' | 'eval' | 'predict' | 'attention' | 'summary' (None: the command's, `for_command`, else
  'train'): only the fields of its groups are checked (`PURPOSES`). Checks unknown fields (with the closest valid
  name), types, choices and ranges, the shared fields, the model (`vvt.models.resolve`), the `init_from` section,
  and cross-field consistency (the mesh's axes over the devices, batch splits over the data axes, processes and
  accumulation steps). `num_devices=None` (not known yet, e.g. when a command loads its config): the mesh and the
  batch are checked against the axes' fixed sizes only. `unset_classes_ok`: an unset num_classes is left to the
  caller (the loader then reports the missing data that would name the classes).
  """
  p = _collect(config, num_devices, num_processes, purpose, unset_classes_ok)
  if p.lines:
    raise ConfigError(*p.lines)
  return p.model


def problems(config, num_devices: int | None = None, num_processes: int = 1, purpose: str | None = None,
             *, unset_classes_ok: bool = False) -> list[str]:
  """Every problem `validate` raises, one line each, in a stable order (empty: valid for `purpose`)."""
  return _collect(config, num_devices, num_processes, purpose, unset_classes_ok).lines


def check(config, num_devices: int | None = None, num_processes: int = 1, purpose: str | None = None,
          *, unset_classes_ok: bool = False) -> tuple[list[str], object]:
  """(`problems`, the resolved model config or None): for a caller that gathers problems of its own before it
  raises them all (`vvt.config.loader`), and then resolves the run with this model (`run_spec.resolve`)."""
  p = _collect(config, num_devices, num_processes, purpose, unset_classes_ok)
  return p.lines, p.model


def _collect(config, num_devices, num_processes, purpose, unset_classes_ok) -> _Problems:
  p = _Problems(groups_of(purpose))
  reference = schema_config()
  _check_names(p, config, reference)
  if _empty_sections(p, config):
    return p
  _check_complete(p, config, reference)
  _check_types(p, config, reference)
  _check_values(p, config)
  _check_image_size(p, config)
  _check_shared(p, config, unset_classes_ok)
  _check_data(p, config)
  shards = _check_mesh(p, config.mesh, num_devices)
  _check_batch(p, config, shards, num_processes)
  _check_schedule(p, config)
  _check_decay_epochs(p, config)
  _check_profile(p, config)
  _check_profile_end(p, config)
  _check_task(p, config)
  _check_task_options(p, config)
  _check_model(p, config)
  _check_init_from(p, config)
  return p


def _check_task(p: _Problems, config):
  """The task and its data agree: multi-hot labels (`dataset.multi_label`, DMVR records) for a multi-label task,
  for it only."""
  if not p.runs(('model', 'classes'), 'task', 'dataset.multi_label'):
    return
  name, data = config.task.name, config.dataset
  reads = tasks_registry.hooks_of(config).multi_hot_labels(config)  # the task's hook (a probe: its base task's)
  multi = bool(data.get('multi_label', False))
  if reads and not multi:
    p.add(f"task.name={name!r} reads several labels per video: set dataset.multi_label=True")
  if multi and not reads:
    p.add(f"dataset.multi_label=True gives multi-hot labels, which task.name={name!r} does not read "
          f"(use one of {', '.join(tasks_registry.multi_hot_tasks(config))})")
  if multi and p.good('dataset.name') and data.name != 'dmvr':
    p.add(f"dataset.multi_label: only dataset.name='dmvr' records carry several labels, not {data.name!r}")
  if multi and p.uses('dataset.label_aware_flip') and data.get('label_aware_flip', False):
    p.add('dataset.label_aware_flip mirrors one label per clip: switch it off with dataset.multi_label')


def _check_task_options(p: _Problems, config):
  """The task's own options: its `check` hook (`vvt.tasks.registry.check_options`; no JAX)."""
  if not p.runs(('model',), 'task', 'task.name') or config.task.name not in tasks_registry.TASKS:
    return
  for line in tasks_registry.check_options(config):
    p.add(line)


# ----------------------------------------------------------------------------- names and types


def _check_names(p: _Problems, config, reference, prefix=''):
  """Every field of `config` is one of `reference` (the model's own fields are checked by the model)."""
  for key in config.keys():
    path = f'{prefix}{key}'
    if key not in reference:
      section = isinstance(config[key], ml_collections.ConfigDict)
      hint = paths.hint(key, reference.keys(), prefix) or (
          f'; known fields of {prefix.rstrip(".") or "the config"}: {", ".join(sorted(reference.keys()))}')
      p.add(f'unknown config {"section" if section else "field"} {path!r}{hint}'
            + ('; its fields are not checked' if section else ''))
      continue
    ref = reference[key]
    if isinstance(ref, ml_collections.ConfigDict) and ref.keys() and key != 'model':
      if not isinstance(config[key], ml_collections.ConfigDict):
        p.add(f'config field {path!r} must be a section, got {config[key]!r} (the checks of its fields are skipped)',
              path)
        continue
      _check_names(p, config[key], ref, path + '.')


def _check_complete(p: _Problems, config, reference, prefix=''):
  """Every field of the schema is in `config`: the specs read each field as it is, never a default of their own
  (a config file builds on `schema.make_config`; `run_file` gives an older config.json the fields added since)."""
  for key in reference.keys():
    path = f'{prefix}{key}'
    if key not in config:
      p.add(f'config field {path!r} is missing: build the config on vvt.config.schema.make_config, '
            'which sets every field', path)
      continue
    ref = reference[key]
    if isinstance(ref, ml_collections.ConfigDict) and ref.keys() and isinstance(config[key], ml_collections.ConfigDict):
      _check_complete(p, config[key], ref, path + '.')


def _empty_sections(p: _Problems, config) -> bool:
  """An empty model or dataset section: said, and nothing else is checked (every other check reads them)."""
  empty = False
  for section, source in (('model', 'vvt.models.get_config'), ('dataset', 'vvt.config.dataset.get_config')):
    if not isinstance(config.get(section), ml_collections.ConfigDict) or not config[section]:
      p.add(f'config.{section} is empty: set it from {source} (the other checks need it)')
      empty = True
  return empty


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


def _check_types(p: _Problems, config, reference, prefix=''):
  """Each value the command reads has its default's type (ints where ints are expected, floats accept ints, ...)."""
  for key in reference.keys():
    if key not in config or key in _OWN_CHECKS or reference.get_type(key) is object:  # object: a flexible field
      continue
    ref, value, path = reference[key], config[key], f'{prefix}{key}'
    if isinstance(ref, ml_collections.ConfigDict):
      if isinstance(value, ml_collections.ConfigDict):
        _check_types(p, value, ref, path + '.')
    elif p.uses(path) and ref is not None and not _type_ok(ref, value) and not (value is None and path in _NONE_OK):
      p.add(f'config field {path!r} must be {_type_name(ref)}, got {value!r}', path)


# ----------------------------------------------------------------------------- values


def _check_values(p: _Problems, config):
  """Choices and ranges of the fields in CHOICES, RANGES and _MINUS_ONE_OK that the command reads."""
  def read(path):
    return p.uses(path) and p.good(path)
  for path, choices in CHOICES.items():
    value = paths.get(config, path) if read(path) else None
    if value is not None and value not in choices:
      hint = paths.hint(str(value), map(str, choices))
      p.add(f'{path} must be one of {", ".join(map(repr, choices))}, got {value!r}{hint}', path)
  for path in RANGES:
    problem = _range_problem(path, paths.get(config, path)) if read(path) else None
    if problem:
      p.add(problem, path)
  for path in _MINUS_ONE_OK:
    value = paths.get(config, path) if read(path) else None
    if value is not None and (value < -1 or value == 0 and path == 'mesh.num_devices'):
      p.add(f'{path} must be -1 or {"positive" if value == 0 else ">= 0"}, got {value}', path)


def _range_problem(path, value) -> str | None:
  if value is None or (path in _MINUS_ONE_OK and value == -1):
    return None
  lo, hi, lo_open, hi_open = RANGES[path]
  bad = (lo is not None and (value <= lo if lo_open else value < lo)) or (
      hi is not None and (value >= hi if hi_open else value > hi))
  if not bad:
    return None
  interval = (f'{"(" if lo_open else "["}{lo if lo is not None else "-inf"}, '
              f'{hi if hi is not None else "inf"}{")" if hi_open or hi is None else "]"}')
  what = 'positive' if (lo, hi, lo_open) == (0, None, True) else f'in {interval}'
  return f'{path} must be {what}, got {value!r}'


def _num_classes(nc):
  return paths.plain(nc) if hasattr(nc, 'items') else nc


def _check_num_classes(value):
  items = dict(paths.plain(value)).items() if hasattr(value, 'items') else [(None, value)]
  if not items:
    raise ConfigError('num_classes is an empty dict: give an int, or a dict head -> int')
  if value in (0, None):
    raise ConfigError('num_classes is not set and the data names no classes (no manifest.json or classes.txt '
                      'beside the training files, as `vvt data convert --classes` writes): set --config.num_classes=N')
  bad = []
  for head, n in items:
    if not _is_int(n) or n < 1:
      where = 'num_classes' if head is None else f'num_classes[{head!r}]'
      bad.append(f'{where} must be a positive integer, got {n!r}')
  if bad:
    raise ConfigError(*bad)


def label_free(config) -> bool:
  """Whether `config` leaves num_classes unset for a task that reads no labels (its `reads_labels` hook False)."""
  return config.get('num_classes') in (0, None) and not tasks_registry.hooks_of(config).reads_labels


def run_model_config(config):
  """The model config a run of `config` builds: its own, or with a one-output head where `label_free`."""
  if not label_free(config):
    return config.model
  model = ml_collections.ConfigDict(config.model.to_dict())
  model.num_classes = 1
  return model


def _check_shared(p: _Problems, config, unset_classes_ok: bool):
  """The shared fields: valid, and read (not overwritten) by the model and the data."""
  if p.runs(('classes',)) and not label_free(config):
    if unset_classes_ok and config.num_classes in (0, None):
      p.bad.add('num_classes')  # the caller says why (no data); the model is checked without its head's size
    else:
      p.collect(_check_num_classes, config.num_classes, fields=('num_classes',))
  for field in schema.SHARED_FIELDS:
    for section in schema.SECTIONS_WITH_SHARED_FIELDS:
      path, sub = f'{section}.{field}', config[section]
      if field in sub and p.uses(path) and p.good(field, path) and _num_classes(sub[field]) != _num_classes(
          config[field]):
        p.add(f'{path}={_num_classes(sub[field])} differs from {field}={_num_classes(config[field])}: set the '
              f'top-level {field} (model and dataset read it)', path)
  names, nc = config.class_names, config.num_classes
  if p.runs(('classes',), 'num_classes') and names is not None and _is_int(nc) and len(tuple(names)) != nc:
    p.add(f'class_names has {len(tuple(names))} names but num_classes={nc}', 'class_names')


def _check_data(p: _Problems, config):
  """The dataset's fields across each other and the crop: the training ones, and the evaluation views'."""
  d, size = config.dataset, config.image_size
  ra = d.get('randaugment')
  if p.runs(('train_data',)) and ra is not None and hasattr(ra, 'get') and not 0 <= float(ra.get('magnitude', 9)) <= 10:
    p.add(f'dataset.randaugment.magnitude must be in [0, 10] (vvt\'s RandAugment scale, where 10 is the '
          f'strongest), got {ra.get("magnitude")}', 'dataset.randaugment')
  clips = d.get('num_test_clips')
  if p.runs(('views',), 'dataset.num_test_clips', 'dataset.sampling'):
    if clips == WHOLE_VIDEO:
      if d.sampling != 'stride':
        p.add(f"dataset.num_test_clips='all' tiles each video with clips of dataset.stride: it needs "
              f"dataset.sampling='stride', got {d.sampling!r}", 'dataset.num_test_clips')
    elif not _is_int(clips) or clips < 1:
      p.add(f"dataset.num_test_clips must be a positive integer or 'all', got {clips!r}", 'dataset.num_test_clips')
  fps = d.get('fps')
  if p.runs(('views',)) and fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float))
                                                 or fps <= 0):
    p.add(f'dataset.fps must be a positive number of frames per second, or None, got {fps!r}', 'dataset.fps')
  if p.runs(('train_data',)) and d.get('autoaugment') is not None and ra is not None:
    p.add(f'dataset.autoaugment={d.autoaugment!r} and dataset.randaugment are both set: choose one')
  if p.runs(('train_data',), 'dataset.horizontal_flip') and d.get('label_aware_flip') and not d.horizontal_flip:
    p.add('dataset.label_aware_flip needs dataset.horizontal_flip=True (it swaps the labels of flipped clips)')
  lo, hi = 'dataset.train_min_resize', 'dataset.train_max_resize'
  if p.runs(('train_data',), lo, hi) and d.train_min_resize > d.train_max_resize:
    p.add(f'{lo}={d.train_min_resize} is larger than {hi}={d.train_max_resize}')
  for field, group in ((lo, 'train_data'), ('dataset.eval_resize', 'views')):
    value = paths.get(config, field)
    if p.runs((group, 'model'), field, 'image_size') and value < max(frame_size.parse(size)):
      p.add(_crop_misfit(field, value, size))


def _check_image_size(p: _Problems, config):
  """image_size: an int (square frames) or a pair (H, W) of positive ints."""
  line = frame_size.problem(config.image_size) if p.uses('image_size') and p.good('image_size') else None
  if line:
    p.add(line, 'image_size')


def _crop_misfit(field: str, value: int, size) -> str:
  """The line of a shorter side resized to `value`, too small for the crop `size` (an int or (H, W))."""
  h, w = frame_size.parse(size)
  if h == w:
    return f'{field}={value} is smaller than the crop image_size={h}'
  return (f'{field}={value} is smaller than the longer side {max(h, w)} of the crop image_size={(h, w)} (the '
          'frame\'s shorter side is resized to it, and the crop must fit either way round)')


# ----------------------------------------------------------------------------- mesh, batch, schedule


def _check_mesh(p: _Problems, mesh_cfg, num_devices):
  """`mesh.axes`, `mesh.rules` and `mesh.logical_rules` well formed and, with `num_devices`, dividing the devices.

  Returns (number of batch shards, what they are) for the batch checks, None where the mesh is not checked or
  is wrong: the batch's mesh axes are those of the logical rules' `batch`.
  """
  if not p.runs(('devices',), 'mesh'):
    return None
  axes = p.collect(sharding.axes_of, mesh_cfg.axes, fields=('mesh.axes',))
  if axes is not None and num_devices is not None:
    axes = p.collect(sharding.resolve_axes, axes, num_devices, fields=('mesh.axes',))
  p.collect(_check_rules, mesh_cfg.rules, fields=('mesh.rules',))
  logical = p.collect(sharding.check_logical_rules, mesh_cfg.get('logical_rules'), fields=('mesh.logical_rules',))
  if axes is None or logical is None:
    return None
  return batch_shards(axes, logical)


def batch_shards(axes, logical_rules) -> tuple[int, str]:
  """(number of batch shards, what they are) of mesh `axes` ((name, size) pairs; -1 counts 1) under the
  complete `logical_rules`."""
  batch_axes = logical_axes.batch_axes(logical_rules)
  data = [(k, v) for k, v in axes if k in batch_axes and v != -1]
  what = ' x '.join(f'{k}={v}' for k, v in data) or 'data=1'
  return sharding.data_size(data, logical_rules), f'data axes of the mesh ({what})'


def _check_rules(rules):
  if rules is None:
    return
  if not isinstance(rules, (tuple, list)):
    raise ConfigError(f"mesh.rules must be a tuple of (regex, spec) pairs, e.g. "
                      f"((r'head/', 'replicate'),), got {rules!r}")
  sharding.check_rules(rules)


def _check_batch(p: _Problems, config, shards, num_processes):
  """The training batch over accumulation steps, repeated augmentation, batch shards and processes; the
  evaluation batch over the batch shards and processes."""
  _batch_problems(p, config.batch_size, paths.get(config, 'optimizer.accumulation_steps'),
                  paths.get(config, 'eval.batch_size'), int(config.dataset.get('repeated_augmentation', 1)),
                  shards, num_processes)


def check_batch_split(bs: int, accum: int, eval_bs: int, repeats: int, shards: tuple[int, str],
                      num_processes: int) -> None:
  """The global batch `bs` (of `accum` micro-batches, `repeats` augmented copies of each video) and the eval batch
  `eval_bs` split over the batch shards (`batch_shards`) and the processes: one ConfigError with every problem."""
  p = _Problems(groups_of('train'))
  _batch_problems(p, bs, accum, eval_bs, repeats, shards, num_processes)
  if p.lines:
    raise ConfigError(*p.lines)


def _batch_problems(p: _Problems, bs, accum, eval_bs, repeats, shards, num_processes):
  batch = 'batch_size'
  if p.runs(('training',), batch, 'optimizer.accumulation_steps'):
    if bs % accum:
      p.add(f'batch_size={bs} is not divisible by optimizer.accumulation_steps={accum}')
    elif shards is not None and (bs // accum) % shards[0]:
      p.add(f'the micro-batch batch_size/accumulation_steps={bs // accum} '
            f'is not divisible by the {shards[0]} batch shards of the {shards[1]}')
  if p.runs(('training', 'train_data'), batch, 'dataset.repeated_augmentation'):
    _check_repeats(p, bs, repeats, num_processes)
  if p.runs(('training',), batch) and bs % num_processes:
    p.add(f'batch_size={bs} must be divisible by the {num_processes} processes')
  if p.runs(('evaluation',), 'eval.batch_size') and eval_bs % num_processes:
    p.add(f'eval.batch_size={eval_bs} must be divisible by the {num_processes} processes')
  if p.runs(('evaluation',), 'eval.batch_size') and shards is not None and eval_bs % shards[0]:
    p.add(f'eval.batch_size={eval_bs} must be a multiple of the {shards[0]} batch shards of the {shards[1]}')


def _check_repeats(p: _Problems, bs, repeats, num_processes):
  """dataset.repeated_augmentation: every process's part of the batch holds whole groups of N copies."""
  if repeats > 1 and bs % repeats:
    p.add(f'batch_size={bs} is not divisible by dataset.repeated_augmentation={repeats}')
  elif repeats > 1 and bs % num_processes == 0 and (bs // num_processes) % repeats:
    p.add(f'the per-process batch batch_size/processes={bs // num_processes} is not divisible by '
          f'dataset.repeated_augmentation={repeats}')


def _check_schedule(p: _Problems, config):
  steps, warmup = config.num_train_steps, config.schedule.warmup_steps
  if p.runs(('training',), 'num_train_steps', 'num_epochs') and steps <= 0 and config.num_epochs <= 0:
    p.add('set num_epochs > 0 or num_train_steps > 0')
  if p.runs(('training',), 'num_train_steps', 'schedule.warmup_steps') and 0 < steps <= warmup:
    p.add(f'schedule.warmup_steps={warmup} does not fit in num_train_steps={steps}')


def _number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_decay_epochs(p: _Problems, config):
  """A step schedule's `decay_epochs` increase, and in a run of `num_epochs` each lies before its end (a decay at or
  after it never happens); another schedule (cosine, constant) has no decays, and `decay_epochs` set with it is
  refused rather than ignored. In a run of `num_train_steps` (a recipe shortened for a trial) the epochs become steps
  only on the training set, and a decay after its end is a warning (`decay_past_end`, `vvt.train.trainer`)."""
  fields = ('schedule.name', 'schedule.decay_epochs', 'num_train_steps', 'num_epochs')
  if not p.runs(('training',), *fields):
    return
  epochs = tuple(config.schedule.decay_epochs or ())
  if config.schedule.name != 'step':
    if epochs:
      p.add(f'schedule.decay_epochs={epochs!r} is read by the step schedule only: schedule.name='
            f'{config.schedule.name!r} ignores it; set schedule.name=\'step\' for those decays, or '
            'schedule.decay_epochs=() for none', 'schedule.decay_epochs')
    _check_decay_factor_unread(p, config)
    return
  if not all(_number(e) for e in epochs):
    p.add(f'schedule.decay_epochs must be numbers (epochs), got {epochs!r}', 'schedule.decay_epochs')
    return
  if list(epochs) != sorted(epochs):
    p.add(f'schedule.decay_epochs must be increasing, got {epochs!r}', 'schedule.decay_epochs')
  late = [e for e in epochs if e >= config.num_epochs]
  if config.num_train_steps <= 0 and late:
    p.add(f'schedule.decay_epochs={epochs!r}: {", ".join(str(e) for e in late)} not before the end of the run '
          f'(num_epochs={config.num_epochs}), so that decay never happens: give epochs below num_epochs '
          f'(or () for none)', 'schedule.decay_epochs')


def _check_decay_factor_unread(p: _Problems, config):
  """A `decay_factor` other than the schema's default with a schedule that has no decays (cosine, constant)
  would be ignored: refused, naming the field and the schedule (the default says nothing of what the user set)."""
  factor, default = config.schedule.get('decay_factor'), schema.get_base_config().schedule.decay_factor
  if p.runs(('training',), 'schedule.decay_factor') and _number(factor) and factor != default:
    p.add(f'schedule.decay_factor={factor} is read by the step schedule only: schedule.name='
          f'{config.schedule.name!r} ignores it; set schedule.name=\'step\' (with schedule.decay_epochs), or leave '
          f'schedule.decay_factor at {default}', 'schedule.decay_factor')


def decay_past_end(decay_epochs, boundaries, total_steps: int, epoch_steps: int) -> str:
  """'' when every step decay (`boundaries`: the optimiser steps of `decay_epochs`) happens within a run of
  `total_steps` (the steps 0 .. total_steps - 1), else one line naming `schedule.decay_epochs` and the decays that
  never happen: the warning of a run whose `num_train_steps` ends it before them (a recipe shortened for a trial)."""
  late = [e for e, b in zip(decay_epochs, boundaries, strict=True) if b >= total_steps]
  if not late:
    return ''
  return (f'schedule.decay_epochs={tuple(decay_epochs)!r}: {", ".join(str(e) for e in late)} not before the end of '
          f'the run ({total_steps} steps of {epoch_steps} per epoch), so that decay never happens')


def profile_past_end(steps, total_steps: int, what: str = '') -> str:
  """'' when the traced steps `steps` (`profile.steps`: None, () or (A, B)) start within a run of `total_steps`,
  else the problem's line naming `profile.steps` (`what`: how the run's length was given)."""
  if not steps or steps[0] <= total_steps:
    return ''
  return (f'profile.steps={tuple(steps)!r} starts after the run\'s last step {total_steps}{what}, so no trace '
          f'would be written: give steps within the run (or () for no trace)')


def _check_profile_end(p: _Problems, config):
  """`profile.steps` start within a run of `num_train_steps` (a run of epochs: `vvt.train.trainer` checks them
  once the training set is counted)."""
  if not p.runs(('training',), 'profile', 'num_train_steps') or config.num_train_steps <= 0:
    return
  steps = config.profile.get('steps')
  line = profile_past_end(steps, config.num_train_steps, f' (num_train_steps={config.num_train_steps})')
  if line:
    p.add(line, 'profile')


def _check_profile(p: _Problems, config):
  """profile.steps: None (a few early steps), () (none) or (A, B), optimiser steps 1 <= A <= B."""
  profile = config.get('profile')
  if not p.runs(('training',), 'profile'):
    return
  steps = None if profile is None else profile.get('steps')
  if steps is None or (isinstance(steps, (tuple, list)) and len(steps) == 0):
    return
  if not (isinstance(steps, (tuple, list)) and len(steps) == 2 and all(_is_int(s) for s in steps)
          and 1 <= steps[0] <= steps[1]):
    p.add(f'profile.steps must be None (a few early steps), () (no trace) or A,B with '
          f'1 <= A <= B (optimiser steps), got {steps!r}', 'profile')


# ----------------------------------------------------------------------------- model, init_from, files


def _check_model(p: _Problems, config):
  """The model (`vvt.models.resolve`: every problem it finds). Where the top-level num_classes is not usable
  (reported above), the model is checked with a one-class head; with a bad num_frames or image_size (also
  reported above) its sizes mean nothing and it is not checked."""
  if not p.runs(('model',), 'model', 'num_frames', 'image_size'):
    return
  model = config.model
  if not p.good('num_classes'):
    model = ml_collections.ConfigDict(model.to_dict())
    model.num_classes = 1
  model = run_model_config(config) if model is config.model else model  # a pretraining run: a one-output head
  resolved = p.collect(model_config.resolve, model, fields=('model',))
  if p.good('num_classes'):
    p.model = resolved


def _check_init_from(p: _Problems, config):
  init_from = config.init_from
  if not p.runs(('training',), 'init_from') or init_from is None:
    return
  if not isinstance(init_from, ml_collections.ConfigDict):
    p.add(f'init_from must be None or a section, got {init_from!r}')
    return
  p.collect(init_options.validate, init_from)


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
  return out + _backbone_problems(config)


def _backbone_problems(config) -> list[str]:
  """What a training run starts from: the task's `start_problems` hook (a probe run needs a backbone), and the
  field of its frozen backbone (`backbone_field`), where set, names something a run starts from
  (`init_options.source_kind`: a vvt run or converted folder, a `vvt export` file, a Hugging Face model folder),
  read from its names and config.json only."""
  hooks = tasks_registry.hooks_of(config)
  problems = list(hooks.start_problems(config))
  if problems or not hooks.backbone_field:
    return problems
  backbone = field_value(config, hooks.backbone_field)
  if not backbone or not isinstance(backbone, str) or fileio.is_url(backbone):
    return []
  try:
    init_options.source_kind(backbone, hooks.backbone_field, bare_ok=True)
  except ValueError as e:
    return [str(e)]
  return []


def field_value(config, path: str):
  """The value of the dotted field `path` ('task.probe.backbone') of a ConfigDict, None where a part is missing."""
  for part in path.split('.'):
    config = config.get(part) if hasattr(config, 'get') else None
  return config
