"""The training config schema: defaults, validation, and the synthetic-data recipe.

A run config is an `ml_collections.ConfigDict`:

  model        vvt.models.get_config(...)        (validated by vvt.models.build)
  dataset      vvt.data.config.get_config()      (files, frames, views, augmentation)
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
"""
import difflib

import ml_collections

FREE_SECTIONS = ('model', 'dataset', 'init_from')

# The synthetic motion dataset used by the demo, the tests and configs/synthetic/.
SYNTHETIC = dict(num_classes=4, train_clips=2048, test_clips=256, num_frames=16,
                 frame_size=64, seed=0)
SYNTHETIC_DIR = 'data/synthetic'


def get_base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
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
  return c


def _unknown(config, reference, prefix=''):
  for key in config.keys():
    path = f'{prefix}{key}'
    if key not in reference:
      close = difflib.get_close_matches(key, list(reference.keys()), n=1)
      hint = f' (did you mean {prefix}{close[0]}?)' if close else ''
      raise ValueError(f'unknown config field {path!r}{hint}; known fields of '
                       f'{prefix.rstrip(".") or "the config"}: '
                       f'{", ".join(sorted(reference.keys()))}')
    if prefix == '' and key in FREE_SECTIONS:
      continue
    ref = reference[key]
    if isinstance(ref, ml_collections.ConfigDict):
      if not isinstance(config[key], ml_collections.ConfigDict):
        raise ValueError(f'config field {path!r} must be a section, got {config[key]!r}')
      _unknown(config[key], ref, path + '.')


def _num_classes(nc):
  return dict(nc) if hasattr(nc, 'items') else int(nc)


def validate(config, num_devices: int = 1, num_processes: int = 1) -> None:
  """Clear errors for unknown fields and impossible combinations, before compiling."""
  _unknown(config, get_base_config())
  for section in ('model', 'dataset'):
    if not config[section]:
      raise ValueError(f'config.{section} is empty: set it from '
                       f'{"vvt.models.get_config" if section == "model" else "vvt.data.config.get_config"}')
  m, d = config.model, config.dataset
  for field in ('num_frames', 'image_size'):
    if field in m and field in d and m[field] != d[field]:
      raise ValueError(f'model.{field}={m[field]} differs from dataset.{field}={d[field]}')
  if 'num_classes' in m and 'num_classes' in d and (
      _num_classes(m.num_classes) != _num_classes(d.num_classes)):
    raise ValueError(f'model.num_classes={_num_classes(m.num_classes)} differs from '
                     f'dataset.num_classes={_num_classes(d.num_classes)}')
  bs, accum = int(config.batch_size), int(config.optimizer.accumulation_steps)
  if bs <= 0:
    raise ValueError(f'batch_size must be positive, got {bs}')
  if accum < 1 or bs % accum:
    raise ValueError(f'batch_size={bs} is not divisible by '
                     f'optimizer.accumulation_steps={accum}')
  if (bs // accum) % num_devices:
    raise ValueError(f'the micro-batch batch_size/accumulation_steps={bs // accum} '
                     f'is not divisible by the {num_devices} devices of the mesh')
  if bs % num_processes or config.eval.batch_size % num_processes:
    raise ValueError(f'batch_size={bs} and eval.batch_size={config.eval.batch_size} '
                     f'must be divisible by the {num_processes} processes')
  if config.eval.batch_size <= 0 or config.eval.batch_size % num_devices:
    raise ValueError(f'eval.batch_size={config.eval.batch_size} must be a positive '
                     f'multiple of the {num_devices} devices of the mesh')
  if config.eval.average not in ('logits', 'softmax'):
    raise ValueError(f"eval.average must be 'logits' or 'softmax', got {config.eval.average!r}")
  if config.optimizer.name not in ('sgd', 'adamw'):
    raise ValueError(f"optimizer.name must be 'sgd' or 'adamw', got {config.optimizer.name!r}")
  if config.schedule.name not in ('cosine', 'step', 'constant'):
    raise ValueError(f"schedule.name must be 'cosine', 'step' or 'constant', "
                     f'got {config.schedule.name!r}')
  if not 0.0 <= config.loss.label_smoothing < 1.0:
    raise ValueError(f'loss.label_smoothing must be in [0, 1), got {config.loss.label_smoothing}')
  for f in ('mixup_alpha', 'cutmix_alpha'):
    if config.loss[f] < 0:
      raise ValueError(f'loss.{f} must be >= 0, got {config.loss[f]}')
  if config.num_train_steps <= 0 and config.num_epochs <= 0:
    raise ValueError('set num_epochs > 0 or num_train_steps > 0')


def synthetic_config(attention: str, arg: str | None = None, **model_overrides):
  """A small model of one attention scheme on the synthetic motion dataset.

  `arg` (the config-file argument) optionally names the dataset directory
  (default `data/synthetic`, written by `make demo` / `python -m vvt.train.demo`).
  """
  import vvt.models  # pylint: disable=g-import-not-at-top
  from vvt.data import config as data_config  # pylint: disable=g-import-not-at-top
  data_dir = arg or SYNTHETIC_DIR
  c = get_base_config()
  num_frames, image_size = 8, 32
  model_kw = dict(family='timesformer', attention=attention, variant='Ti/16',
                  num_frames=num_frames, image_size=image_size,
                  num_classes=SYNTHETIC['num_classes'], hidden_size=64,
                  num_layers=2, num_heads=4, mlp_dim=128,
                  # 2x8x8 tubelets (ViViT's tokeniser) for every scheme: with 1-frame patches
                  # no scheme left the chance plateau of this motion-only data within CPU
                  # minutes; a tubelet sees the local motion between two frames.
                  tubelet=(2, 8, 8),
                  # A fixed sine-cosine table tells every token its frame from step 0 (the
                  # papers' learned time table starts at zero: a symmetric start when
                  # training from scratch); GAP works for every scheme (Models 3/4 need it).
                  positional_embedding='sinusoidal', classifier='gap')
  model_kw.update(model_overrides)
  c.model = vvt.models.get_config(**model_kw)
  d = data_config.get_config()
  d.train_files = f'{data_dir}/train-*-of-*.tfrecord'
  d.eval_files = f'{data_dir}/test-*-of-*.tfrecord'
  d.num_classes = SYNTHETIC['num_classes']
  # 8 of the 16 written frames at stride 2: a clip covers the whole video (the
  # class is the order of the frames, see vvt.data.synthetic).
  d.num_frames = num_frames
  d.stride = 2
  d.image_size = image_size
  d.train_min_resize = 34
  d.train_max_resize = 40
  d.eval_resize = 36
  d.num_test_clips = 1
  d.num_spatial_crops = 3
  d.shuffle_buffer = 256
  c.dataset = d
  # Small batches: ~5x more optimiser steps per CPU-second than batch 32 here.
  c.batch_size = 8
  c.num_epochs = 20.0
  c.optimizer.name = 'adamw'
  c.optimizer.weight_decay = 0.05
  c.optimizer.grad_clip_norm = 1.0
  c.schedule.name = 'cosine'
  c.schedule.base_lr = 1e-3
  c.schedule.warmup_epochs = 1.0
  c.eval.batch_size = 64
  c.checkpoint.every_steps = 500
  c.checkpoint.keep = 2
  c.log_every_steps = 250
  return c


def paper_config(model: dict, dataset: dict, **train) -> ml_collections.ConfigDict:
  """A paper-recipe config: model kwargs, dataset overrides, then dotted training fields.

  `train` keys use `__` for nesting, e.g. `optimizer__name='sgd'`.
  """
  import vvt.models  # pylint: disable=g-import-not-at-top
  from vvt.data import config as data_config  # pylint: disable=g-import-not-at-top
  c = get_base_config()
  c.model = vvt.models.get_config(**model)
  d = data_config.get_config()
  for k, v in dataset.items():
    if k not in d:
      raise ValueError(f'unknown dataset config field {k!r}')
    d[k] = v
  d.num_frames = c.model.num_frames
  d.image_size = c.model.image_size
  d.num_classes = c.model.num_classes
  c.dataset = d
  for key, value in train.items():
    *path, leaf = key.split('__')
    node = c
    for p in path:
      node = node[p]
    if leaf not in node:
      raise ValueError(f'unknown config field {".".join(path + [leaf])!r}')
    node[leaf] = value
  return c


def set_num_classes(config, num_classes) -> None:
  """Sets model and dataset num_classes (int, or dict head -> int for multi-head data)."""
  value = dict(num_classes) if hasattr(num_classes, 'items') else int(num_classes)
  model = config.model.to_dict()
  model['num_classes'] = value
  config.model = ml_collections.ConfigDict(model)
  config.dataset.num_classes = value
