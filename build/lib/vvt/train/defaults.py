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
  mesh         axes ({'data': -1, 'fsdp': 8} or (name, size) pairs; -1 = the rest), rules
               ((regex, spec) pairs before the default FSDP strategy), fsdp_min_size (elements),
               num_devices (-1 = all): vvt.train.mesh and vvt.train.sharding
  distributed  initialize, coordinator_address, num_processes, process_id
  init_from    None or a ConfigDict read by vvt.convert.image_init
  runlocal     True: shrink any config to a few-minute CPU run on the synthetic data (vvt.train.runlocal)

Beside it: `vvt.train.validation` (every field checked before any work), `vvt.train.run_config`
(the saved config.json and what may change on resume), `vvt.train.runlocal` (any config as a CPU run).
"""
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
  c.mesh = ml_collections.ConfigDict(dict(
      axes=_flexible((('data', -1),)),  # dict or (name, size) pairs in mesh order: vvt.train.mesh
      rules=_flexible(()),              # ((regex, spec), ...) first match wins: vvt.train.sharding
      fsdp_min_size=2 ** 18,            # parameters with fewer elements stay replicated
      num_devices=-1))                  # use the first N devices (-1 = all)
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
      config[field] = _flexible(plain(source)) if field == 'num_classes' else source
    for s in sections:
      config[s][field] = config.get_ref(field)
  return config


def plain(value):
  if isinstance(value, ml_collections.ConfigDict):
    return value.to_dict()
  return value


def make_config(model: ml_collections.ConfigDict, dataset: ml_collections.ConfigDict,
                class_names=None) -> ml_collections.ConfigDict:
  """A base run config with `model` and `dataset`, their shared fields taken from `model`."""
  c = get_base_config()
  for field in SHARED_FIELDS:
    c[field] = plain(model[field])
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
