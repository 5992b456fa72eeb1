"""The run config schema: its fields and defaults, the shared fields, and validation.

A run config is an `ml_collections.ConfigDict`:

  num_frames, image_size, num_classes, class_names
               the shared fields: stated once at the top and read by the model and the data,
               whose `model.X` / `dataset.X` are references to them (`link_shared`), so
               `--config.image_size=64` and `--config.model.num_frames=8` both move the whole run
  model        vvt.models.get_config(...)        (checked by vvt.models.resolve)
  dataset      vvt.data.config.get_config()      (files, sampling, views, augmentation)
  seed, batch_size (global), num_epochs, num_train_steps (>0 overrides epochs)
  optimizer    name sgd|adamw, momentum, nesterov, b1, b2, eps, weight_decay,
               grad_clip_norm (0 = off), accumulation_steps
  schedule     name cosine|step|constant, base_lr, end_lr, warmup_epochs,
               warmup_steps (>=0 overrides epochs), decay_epochs, decay_factor
  loss         label_smoothing, mixup_alpha, cutmix_alpha, mix_switch_prob
  eval         batch_size (global, views), average logits|softmax, every_steps
               (0 = only at the end), split
  checkpoint   every_steps, keep
  log_every_steps
  mesh         num_devices (-1 = all)
  distributed  initialize, coordinator_address, num_processes, process_id
  init_from    None or a ConfigDict read by vvt.convert.image_init
  runlocal     True: shrink any config to a few-minute CPU run on the synthetic data (`runlocal`)

`validate(config)` checks all of it (unknown fields with the closest valid name, types, ranges,
choices, cross-field consistency) without importing JAX, so a CLI reports a bad config at once.
"""
import difflib
import os

import ml_collections
from ml_collections import config_dict

SHARED_FIELDS = ('num_frames', 'image_size', 'num_classes')

# The synthetic motion dataset used by `runlocal`, the demo, the tests and configs/synthetic.py.
SYNTHETIC = dict(num_classes=4, train_clips=2048, test_clips=256, num_frames=16,
                 frame_size=64, seed=0)
SYNTHETIC_DIR = 'data/synthetic'


class ConfigError(ValueError):
  """A config field (named in the message) has a bad value or name."""


def _flexible(value):
  """A field whose type may change (int <-> dict of heads, None <-> tuple)."""
  return config_dict.FieldReference(value, field_type=object)


def get_base_config() -> ml_collections.ConfigDict:
  """Every run-level field with its default; `model` and `dataset` are filled by the config file."""
  c = ml_collections.ConfigDict()
  c.num_frames = 16
  c.image_size = 224
  c.num_classes = _flexible(0)       # int, or dict head -> int for multi-head data
  c.class_names = _flexible(None)    # None, or a tuple of names in label order
  c.model = ml_collections.ConfigDict()
  c.dataset = ml_collections.ConfigDict()
  c.seed = 0
  c.batch_size = 64
  c.num_epochs = 1.0
  c.num_train_steps = -1
  c.optimizer = ml_collections.ConfigDict(dict(
      name='sgd', momentum=0.9, nesterov=False, b1=0.9, b2=0.999, eps=1e-8,
      weight_decay=0.0, grad_clip_norm=0.0, accumulation_steps=1))
  c.schedule = ml_collections.ConfigDict(dict(
      name='cosine', base_lr=0.1, end_lr=0.0, warmup_epochs=0.0, warmup_steps=-1,
      decay_epochs=(), decay_factor=0.1))
  c.loss = ml_collections.ConfigDict(dict(
      label_smoothing=0.0, mixup_alpha=0.0, cutmix_alpha=0.0, mix_switch_prob=0.5))
  c.eval = ml_collections.ConfigDict(dict(
      batch_size=64, average='logits', every_steps=0, split='test'))
  c.checkpoint = ml_collections.ConfigDict(dict(every_steps=1000, keep=3))
  c.log_every_steps = 50
  c.mesh = ml_collections.ConfigDict(dict(num_devices=-1))
  c.distributed = ml_collections.ConfigDict(dict(
      initialize=False, coordinator_address='', num_processes=-1, process_id=-1))
  c.init_from = None
  c.runlocal = False
  return c


# ----------------------------------------------------------------------------- shared fields


def link_shared(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Makes `model.X` and `dataset.X` references to the top-level `X` for every shared field.

  The top-level value wins; where it is missing (a config.json written before shared fields
  existed) the model's value is taken. Returns `config`, changed in place.
  """
  for field in SHARED_FIELDS:
    sections = [s for s in ('model', 'dataset')
                if isinstance(config.get(s), ml_collections.ConfigDict)]
    if field not in config:
      source = next((config[s][field] for s in sections if field in config[s]), None)
      config[field] = _flexible(_plain(source)) if field == 'num_classes' else source
    for s in sections:
      config[s][field] = config.get_ref(field)
  return config


def _plain(value):
  if isinstance(value, ml_collections.ConfigDict):
    return value.to_dict()
  return value


def make_config(model: ml_collections.ConfigDict, dataset: ml_collections.ConfigDict,
                class_names=None) -> ml_collections.ConfigDict:
  """A base run config with `model` and `dataset`, their shared fields taken from `model`."""
  c = get_base_config()
  for field in SHARED_FIELDS:
    c[field] = _plain(model[field])
  c.class_names = tuple(class_names) if class_names is not None else None
  c.model = model
  c.dataset = dataset
  return link_shared(c)


def from_dict(values: dict) -> ml_collections.ConfigDict:
  """A run config from plain values (a run's config.json), with lists as tuples and links restored."""
  def tuples(x):
    if isinstance(x, dict):
      return {k: tuples(v) for k, v in x.items()}
    if isinstance(x, list):
      return tuple(tuples(v) for v in x)
    return x
  values = tuples(dict(values))
  c = get_base_config()
  for key, value in values.items():
    if key in ('num_classes', 'class_names'):
      c[key] = value
    elif isinstance(value, dict) and key not in ('model', 'dataset') and isinstance(
        c.get(key), ml_collections.ConfigDict):
      c[key] = ml_collections.ConfigDict({**c[key].to_dict(), **value})
    elif isinstance(value, dict):
      c[key] = ml_collections.ConfigDict(value)
    else:
      c[key] = value
  if 'dataset' in values:  # keep the dataset's flexible fields flexible
    from vvt.data import config as data_config  # pylint: disable=g-import-not-at-top
    d = data_config.get_config()
    for k, v in values['dataset'].items():
      d[k] = v
    c.dataset = d
  missing = [f for f in SHARED_FIELDS if f not in values]
  for f in missing:
    del c[f]
  return link_shared(c)


# ----------------------------------------------------------------------------- validation

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
    'dataset.stride': _POSITIVE, 'dataset.num_test_clips': _POSITIVE,
    'dataset.train_min_resize': _POSITIVE, 'dataset.train_max_resize': _POSITIVE,
    'dataset.eval_resize': _POSITIVE, 'dataset.color_jitter': _PROBABILITY,
    'dataset.color_jitter_prob': _PROBABILITY, 'dataset.random_erasing': _PROBABILITY,
    'dataset.shuffle_buffer': _NON_NEGATIVE, 'dataset.cycle_length': _POSITIVE,
    'dataset.prefetch': _NON_NEGATIVE, 'dataset.seed': _NON_NEGATIVE,
}
CHOICES = {
    'optimizer.name': ('sgd', 'adamw'),
    'schedule.name': ('cosine', 'step', 'constant'),
    'eval.average': ('logits', 'softmax'),
    'dataset.name': ('dmvr', 'tfds'),
    'dataset.sampling': ('stride', 'segment'),
    'dataset.short_video_policy': ('loop', 'pad'),
    'dataset.num_spatial_crops': (1, 3),
    'dataset.normalization': ('imagenet', 'zero_centre'),
    'dataset.on_error': ('raise', 'skip'),
}
# -1 means "all" / "from the epochs" / "unset" for these.
_MINUS_ONE_OK = ('num_train_steps', 'schedule.warmup_steps', 'mesh.num_devices',
                 'distributed.num_processes', 'distributed.process_id')


def schema() -> ml_collections.ConfigDict:
  """The full default tree used to check names and types: base + dataset defaults."""
  from vvt.data import config as data_config  # pylint: disable=g-import-not-at-top
  c = get_base_config()
  c.dataset = data_config.get_config()
  return c


def _unknown(config, reference, prefix=''):
  for key in config.keys():
    path = f'{prefix}{key}'
    if key not in reference:
      hint = _hint(prefix, key, reference) or (f'; known fields of {prefix.rstrip(".") or "the config"}: '
                                               f'{", ".join(sorted(reference.keys()))}')
      raise ConfigError(f'unknown config field {path!r}{hint}')
    ref = reference[key]
    if isinstance(ref, ml_collections.ConfigDict) and ref.keys() and key != 'model':
      if not isinstance(config[key], ml_collections.ConfigDict):
        raise ConfigError(f'config field {path!r} must be a section, got {config[key]!r}')
      _unknown(config[key], ref, path + '.')


def _hint(prefix, key, reference):
  """' (did you mean PREFIX.X?)' for the nearest known name, or ''."""
  match = difflib.get_close_matches(key, list(reference.keys()), n=1, cutoff=0.6)
  return f' (did you mean {prefix}{match[0]}?)' if match else ''


def _is_int(v):
  return isinstance(v, int) and not isinstance(v, bool)


def _type_name(v):
  return 'a number' if isinstance(v, float) else type(v).__name__


def _check_types(config, reference, prefix=''):
  """Each value has its default's type (ints where ints are expected, floats accept ints, ...)."""
  for key in reference.keys():
    if key not in config or key in ('model', 'num_classes', 'class_names'):
      continue
    ref, value, path = reference[key], config[key], f'{prefix}{key}'
    if reference.get_type(key) is object:  # a flexible field (e.g. label_keys: tuple or dict)
      continue
    if isinstance(ref, ml_collections.ConfigDict):
      if isinstance(value, ml_collections.ConfigDict):
        _check_types(value, ref, path + '.')
      continue
    if ref is None:
      continue
    ok = (_is_int(value) if _is_int(ref) else
          isinstance(value, (int, float)) and not isinstance(value, bool) if isinstance(ref, float)
          else isinstance(value, bool) if isinstance(ref, bool)
          else isinstance(value, str) if isinstance(ref, str)
          else isinstance(value, (tuple, list, str)) if isinstance(ref, (tuple, list))
          else True)
    if not ok:
      want = ('an integer' if _is_int(ref) else 'a number' if isinstance(ref, float)
              else 'True or False' if isinstance(ref, bool) else 'a string'
              if isinstance(ref, str) else 'a tuple')
      raise ConfigError(f'config field {path!r} must be {want}, got {value!r}')


def _check_range(path, value):
  if value is None:
    return
  if path in _MINUS_ONE_OK and value == -1:
    return
  lo, hi, lo_open, hi_open = RANGES[path]
  bad = (lo is not None and (value <= lo if lo_open else value < lo)) or (
      hi is not None and (value >= hi if hi_open else value > hi))
  if bad:
    interval = (f'{"(" if lo_open else "["}{lo if lo is not None else "-inf"}, '
                f'{hi if hi is not None else "inf"}{")" if hi_open or hi is None else "]"}')
    what = 'positive' if (lo, hi, lo_open) == (0, None, True) else f'in {interval}'
    raise ConfigError(f'{path} must be {what}, got {value!r}')


def _get(config, path):
  node = config
  for part in path.split('.'):
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      return None
    node = node[part]
  return node


def _num_classes(nc):
  return _plain(nc) if hasattr(nc, 'items') else nc


def _check_num_classes(value):
  items = dict(_plain(value)).items() if hasattr(value, 'items') else [(None, value)]
  if not items:
    raise ConfigError('num_classes is an empty dict: give an int, or a dict head -> int')
  for head, n in items:
    if not _is_int(n) or n < 1:
      where = 'num_classes' if head is None else f'num_classes[{head!r}]'
      raise ConfigError(f'{where} must be a positive integer, got {n!r}')


def validate(config, num_devices: int = 1, num_processes: int = 1) -> None:
  """Raises ConfigError naming the field for anything wrong in a run config, before any work.

  Checks unknown fields (with the closest valid name), types, ranges and choices of every
  run-level and dataset field, the model (`vvt.models.resolve`), the `init_from` section, and
  cross-field consistency (batch splits over devices, processes and accumulation steps).
  """
  _unknown(config, schema())
  for section in ('model', 'dataset'):
    if not isinstance(config.get(section), ml_collections.ConfigDict) or not config[section]:
      raise ConfigError(f'config.{section} is empty: set it from '
                        f'{"vvt.models.get_config" if section == "model" else "vvt.data.config.get_config"}')
  _check_types(config, schema())
  for path, choices in CHOICES.items():
    value = _get(config, path)
    if value is not None and value not in choices:
      raise ConfigError(f'{path} must be one of {", ".join(map(repr, choices))}, got {value!r}{_hint("", str(value), dict.fromkeys(map(str, choices)))}')
  for path in RANGES:
    _check_range(path, _get(config, path))
  for path in _MINUS_ONE_OK:
    value = _get(config, path)
    if value is not None and value < -1 or value == 0 and path in ('mesh.num_devices',):
      raise ConfigError(f'{path} must be -1 or {"positive" if value == 0 else ">= 0"}, got {value}')
  _check_num_classes(config.num_classes)
  m, d = config.model, config.dataset
  for field in SHARED_FIELDS:
    for section, sub in (('model', m), ('dataset', d)):
      if field in sub and _num_classes(sub[field]) != _num_classes(config[field]):
        raise ConfigError(f'{section}.{field}={_num_classes(sub[field])} differs from '
                          f'{field}={_num_classes(config[field])}: set the top-level {field} '
                          f'(model and dataset read it)')
  if d.train_min_resize > d.train_max_resize:
    raise ConfigError(f'dataset.train_min_resize={d.train_min_resize} is larger than '
                      f'dataset.train_max_resize={d.train_max_resize}')
  for field in ('train_min_resize', 'eval_resize'):
    if d[field] < config.image_size:
      raise ConfigError(f'dataset.{field}={d[field]} is smaller than the crop '
                        f'image_size={config.image_size}')
  if config.class_names is not None:
    names, nc = tuple(config.class_names), config.num_classes
    if _is_int(nc) and len(names) != nc:
      raise ConfigError(f'class_names has {len(names)} names but num_classes={nc}')
  bs, accum = config.batch_size, config.optimizer.accumulation_steps
  if bs % accum:
    raise ConfigError(f'batch_size={bs} is not divisible by '
                      f'optimizer.accumulation_steps={accum}')
  if (bs // accum) % num_devices:
    raise ConfigError(f'the micro-batch batch_size/accumulation_steps={bs // accum} '
                      f'is not divisible by the {num_devices} devices of the mesh')
  if bs % num_processes or config.eval.batch_size % num_processes:
    raise ConfigError(f'batch_size={bs} and eval.batch_size={config.eval.batch_size} '
                      f'must be divisible by the {num_processes} processes')
  if config.eval.batch_size % num_devices:
    raise ConfigError(f'eval.batch_size={config.eval.batch_size} must be a multiple of the '
                      f'{num_devices} devices of the mesh')
  if config.num_train_steps <= 0 and config.num_epochs <= 0:
    raise ConfigError('set num_epochs > 0 or num_train_steps > 0')
  if 0 < config.num_train_steps <= config.schedule.warmup_steps:
    raise ConfigError(f'schedule.warmup_steps={config.schedule.warmup_steps} does not fit in '
                      f'num_train_steps={config.num_train_steps}')
  _validate_model(config.model)
  if config.init_from is not None:
    _validate_init_from(config.init_from)


def _validate_model(model):
  import vvt.models.config as model_config  # pylint: disable=g-import-not-at-top
  try:
    model_config.resolve(model)
  except ConfigError:
    raise
  except ValueError as e:
    raise ConfigError(str(e)) from None


def _validate_init_from(init_from):
  if not isinstance(init_from, ml_collections.ConfigDict):
    raise ConfigError(f'init_from must be None or a section, got {init_from!r}')
  from vvt.convert import init_options  # pylint: disable=g-import-not-at-top
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
    if path and '://' not in path and not os.path.exists(path):
      field = 'checkpoint' if init.get('checkpoint') else 'path'
      out.append(f'init_from.{field}: no such file {path!r} (absolute: {os.path.abspath(path)!r}); '
                 'set --config.init_from=None to train from scratch')
  return out


# ----------------------------------------------------------------------------- resume

# Fields that may change when a run resumes: they change how it is watched, not what it learns.
SAFE_ON_RESUME = ('eval.batch_size', 'eval.every_steps', 'eval.split', 'eval.average',
                  'log_every_steps', 'checkpoint.every_steps', 'checkpoint.keep',
                  'dataset.prefetch', 'dataset.cycle_length', 'dataset.data_dir',
                  'dataset.train_files', 'dataset.eval_files', 'dataset.cache',
                  'dataset.num_test_clips', 'dataset.num_spatial_crops', 'dataset.eval_resize',
                  'mesh.num_devices', 'distributed.initialize', 'distributed.coordinator_address',
                  'distributed.num_processes', 'distributed.process_id', 'init_from',
                  'class_names')


def flatten(config, prefix='') -> dict:
  """{'a.b': value} for every leaf (sections that are None are leaves)."""
  out = {}
  items = config.items() if isinstance(config, (ml_collections.ConfigDict, dict)) else ()
  for key, value in items:
    path = f'{prefix}{key}'
    if isinstance(value, (ml_collections.ConfigDict, dict)) and value and path != 'num_classes' \
        and not path.endswith('.num_classes'):
      out.update(flatten(value, path + '.'))
    else:
      value = _plain(value)
      out[path] = tuple(value) if isinstance(value, list) else value
  return out


def differences(old, new) -> list[tuple[str, object, object]]:
  """(field, old value, new value) for every leaf that differs between two configs."""
  a, b = flatten(old), flatten(new)
  missing = object()
  out = []
  for key in sorted(set(a) | set(b)):
    x, y = a.get(key, missing), b.get(key, missing)
    if x != y:
      out.append((key, None if x is missing else x, None if y is missing else y))
  return out


def unsafe_changes(old, new) -> list[tuple[str, object, object]]:
  """The differences that change what a resumed run learns (not in SAFE_ON_RESUME)."""
  return [(k, x, y) for k, x, y in differences(old, new)
          if not any(k == s or k.startswith(s + '.') for s in SAFE_ON_RESUME)]


# ----------------------------------------------------------------------------- runlocal


def apply_runlocal(config, data_dir: str = SYNTHETIC_DIR) -> ml_collections.ConfigDict:
  """Shrinks any run config to a few-minute CPU run on the synthetic motion data (big_vision's
  `runlocal`): same family, scheme, classifier and head layout; a 2-layer width-64 model on
  8 frames of 32^2; 200 steps of batch 8; no init checkpoint. Returns `config`, changed."""
  from vvt.data import synthetic  # pylint: disable=g-import-not-at-top
  m, d = config.model, config.dataset
  n = SYNTHETIC['num_classes']
  config.num_frames, config.image_size = 8, 32
  if hasattr(config.num_classes, 'items'):  # multi-head data: every head reads the one label
    heads = list(_plain(config.num_classes))
    config.num_classes = {h: n for h in heads}
    d.label_keys = {h: 'clip/label/index' for h in heads}
  else:
    config.num_classes = n
    d.label_keys = ('clip/label/index',)
  config.class_names = synthetic.CLASS_NAMES[:n] if not hasattr(config.num_classes, 'items') else None
  tt = 2 if (m.get('tubelet') or (1,))[0] > 1 or 'x' in str(m.get('variant', '')).split('/')[-1] else 1
  m.variant = 'Ti/8' if tt == 1 else 'Ti/8x2'
  m.tubelet = (tt, 8, 8)
  m.hidden_size, m.num_layers, m.num_heads, m.mlp_dim = 64, 2, 4, 128
  for f in ('temporal_num_heads', 'temporal_mlp_dim', 'representation_size'):
    if f in m:
      m[f] = None
  if 'temporal_layers' in m:
    m.temporal_layers = min(int(m.temporal_layers), 1)
  if 'temporal_head' in m:
    m.temporal_head.num_heads = None
    m.temporal_head.mlp_dim = None
  m.dtype = 'float32'
  d.name = 'dmvr'
  d.data_dir = ''
  d.train_files = os.path.join(data_dir, 'train-*-of-*.tfrecord')
  d.eval_files = os.path.join(data_dir, 'test-*-of-*.tfrecord')
  d.stride, d.sampling = 2, 'stride'
  d.train_min_resize, d.train_max_resize, d.eval_resize = 34, 40, 36
  d.shuffle_buffer = 64
  config.batch_size = 8
  config.num_train_steps = 200
  config.optimizer.accumulation_steps = 1
  config.schedule.warmup_steps = 20
  config.schedule.decay_epochs = ()
  config.eval.batch_size = 24
  config.eval.split = 'test'
  config.checkpoint.every_steps = 100
  config.log_every_steps = 50
  config.init_from = None
  config.runlocal = False  # applied
  return config
