"""The run config schema: its fields and defaults, and the fields the model and the data share.

A run config is an `ml_collections.ConfigDict`:

  num_frames, image_size, num_classes, class_names
               the shared fields (image_size: an int S for S x S frames, or a pair (H, W)): stated once at
               the top and read by the model and the data,
               whose `model.X` / `dataset.X` are references to them (`link_shared`), so
               `--config.image_size=64` and `--config.model.num_frames=8` both move the whole run
  model        vvt.models.get_config(...)        (checked by vvt.models.resolve)
  dataset      vvt.config.dataset.get_config()   (files, sampling, views, augmentation)
  seed, batch_size (global), num_epochs, num_train_steps (>0 overrides epochs)
  optimizer    name sgd|adamw, momentum, nesterov, b1, b2, eps, weight_decay,
               grad_clip_norm (0 = off), accumulation_steps,
               ema_decay (in [0, 1); 0 or None = off): an exponential moving average of the params, kept in
               the train state and checkpointed; evaluation and export use it when present (vvt.train.ema),
               layer_decay (in (0, 1]; 1 = off): layer-wise learning-rate decay as in BEiT / VideoMAE, block l
               of L (1..L) at lr x decay^(L + 1 - l), embeddings at decay^(L + 1), head 1 (vvt.train.layer_decay)
  schedule     name cosine|step|constant, base_lr, end_lr, warmup_epochs,
               warmup_steps (>=0 overrides epochs), decay_epochs, decay_factor
  task         name: what the run learns and how it is judged (vvt.tasks.registry.TASKS; default
               'classification', which a config.json written before tasks existed also gets)
               probe (task.name='probe', vvt.tasks.probe): base classification|multilabel, head
               linear|attentive, lrs x weight_decays (the grid of probes), num_queries, depth, num_heads,
               layers (the backbone's layers the probes read; (): its own features), combine mean|concat,
               backbone (the frozen backbone's weights: what `vvt train --init` takes; checks in
               vvt.tasks.probe_options)
               zero_shot (task.name='zero_shot', vvt.tasks.zero_shot): templates, the prompts of a class
               name (checks in vvt.tasks.video_text_options)
               jepa (task.name='jepa', vvt.tasks.jepa): pred_depth, pred_width, pred_heads, pred_mlp_ratio
               (the predictor), mask_sets ((num_blocks, spatial scale), ...), aspect_ratio (low, high),
               momentum (start, end) and momentum_scale (the target encoder's EMA ramp), loss_exp,
               eval_mask_seed (checks in vvt.tasks.jepa_options)
  loss         label_smoothing, mixup_alpha, cutmix_alpha, mix_switch_prob
  eval         batch_size (global, views), average logits|softmax, every_steps
               (0 = only at the end), split, raw_params (True: evaluate the raw params even where a
               checkpoint has EMA ones; the final evaluation of a training run reports both)
  checkpoint   every_steps, keep
  log_every_steps
  mesh         axes ({'data': -1, 'fsdp': 8} or (name, size) pairs; -1 = the rest), rules
               ((regex, spec) pairs before the default FSDP strategy), logical_rules ((logical name,
               mesh axes) pairs: what the batch, heads, MLP units ... are sharded over; None = the
               models' DEFAULT_RULES), fsdp_min_size (elements), num_devices (-1 = all):
               vvt.config.sharding, vvt.train.mesh and vvt.train.sharding
  distributed  initialize, coordinator_address, num_processes, process_id, heartbeat_timeout_seconds
               (a process that sends no heartbeat this long is lost: the others exit, naming it)
  profile      steps: the optimiser steps whose `jax.profiler` trace process 0 writes to WORKDIR/tensorboard/
               plugins/profile/ (None = a few early steps, () = none, (A, B) = steps A..B: vvt.train.profile)
  init_from    None or a section (`init_from_config`; fields: vvt.convert.init_options)
  runlocal     True: shrink any config to a few-minute CPU run on the synthetic data (vvt.config.runlocal)
"""
import ml_collections
from ml_collections import config_dict

from vvt.config import sharding
from vvt.config.paths import plain
from vvt.convert import init_options
from vvt.data import SYNTHETIC_CLASS_NAMES as ALL_SYNTHETIC_CLASS_NAMES
from vvt.tasks import localization_options
from vvt.tasks import registry as tasks_registry

SHARED_FIELDS = ('num_frames', 'image_size', 'num_classes')
SECTIONS_WITH_SHARED_FIELDS = ('model', 'dataset')

# The choices of the run-level choice fields (the dataset's: vvt.data.choices, the model's: vvt.models.config).
OPTIMIZERS = ('sgd', 'adamw')                 # optimizer.name
SCHEDULES = ('cosine', 'step', 'constant')    # schedule.name
EVAL_AVERAGES = ('logits', 'softmax')         # eval.average: what is averaged over a video's views

# The synthetic motion dataset used by `runlocal`, the demo, the tests and configs/synthetic.py.
SYNTHETIC = dict(num_classes=4, train_clips=2048, test_clips=256, num_frames=16,
                 frame_size=64, seed=0)
SYNTHETIC_DIR = 'data/synthetic'
SYNTHETIC_CLASS_NAMES = ALL_SYNTHETIC_CLASS_NAMES[:SYNTHETIC['num_classes']]


def flexible(value):
  """A field whose type may change (int <-> dict of heads, None <-> tuple, tuple <-> dict)."""
  return config_dict.FieldReference(value, field_type=object)


def task_section() -> ml_collections.ConfigDict:
  """`config.task` with its defaults: the task's name and each task's own options (checked by its `check` hook)."""
  section = ml_collections.ConfigDict(dict(name=tasks_registry.DEFAULT, probe=dict(
      base='classification', head='linear',   # task.name='probe' (vvt.tasks.probe): the probes' task and head
      lrs=(1e-3,), weight_decays=(0.0,),      # the grid of probes: every lr with every weight decay
      num_queries=1, depth=0, num_heads=4,    # the attentive probe's pooler
      layers=(), combine='mean',              # the backbone's layers read (vvt/models/outputs.py), how combined
      backbone='')))                          # the backbone's weights: what `vvt train --init` takes
  # task.name='localization' (vvt.tasks.localization): ActionFormer on feature sequences, ActionFormer's THUMOS14
  # settings (vvt.tasks.localization_options, docs/recipes.md)
  section.localization = ml_collections.ConfigDict(dict(localization_options.DEFAULTS))
  section.zero_shot = ml_collections.ConfigDict(dict(  # task.name='zero_shot' (vvt.tasks.zero_shot)
      templates=('a video of {}.',)))                 # prompts of a class name ({}), their embeddings averaged
  section.mae = ml_collections.ConfigDict(dict(  # task.name='mae' (vvt.tasks.mae, vvt/tasks/mae_options.py)
      mask_ratio=0.9, decoder_depth=4, decoder_width=384, decoder_heads=6,  # VideoMAE ViT-B's decoder
      norm_pix_loss=True, eval_seed=0, pictures=2,
      masking='tube'))                           # VideoMAE's tube masks, or 'random' (each token on its own)
  section.jepa = ml_collections.ConfigDict(dict(  # task.name='jepa' (vvt.tasks.jepa; V-JEPA's ViT-L/16 config)
      pred_depth=12, pred_width=384, pred_heads=12, pred_mlp_ratio=4.0,   # the predictor
      mask_sets=((8, 0.15), (2, 0.7)), aspect_ratio=(0.75, 1.5),         # short- and long-range multi-block masks
      momentum=(0.998, 1.0), momentum_scale=1.25,                        # the target encoder's EMA ramp
      loss_exp=1.0, eval_mask_seed=0))
  return section


def get_base_config() -> ml_collections.ConfigDict:
  """Every run-level field with its default; `model` and `dataset` are filled by the config file."""
  c = ml_collections.ConfigDict()
  c.num_frames = 16
  c.image_size = flexible(224)      # int (square frames) or (H, W)
  c.num_classes = flexible(0)       # int, or dict head -> int for multi-head data
  c.class_names = flexible(None)    # None, or a tuple of names in label order
  c.model = ml_collections.ConfigDict()
  c.dataset = ml_collections.ConfigDict()
  c.seed = 0
  c.batch_size = 64
  c.num_epochs = 1.0
  c.num_train_steps = -1
  c.optimizer = ml_collections.ConfigDict(dict(
      name='sgd', momentum=0.9, nesterov=False, b1=0.9, b2=0.999, eps=1e-8,
      weight_decay=0.0, grad_clip_norm=0.0, accumulation_steps=1,
      ema_decay=0.0,      # EMA of the params: 0 or None = off (vvt.train.ema)
      layer_decay=1.0))   # layer-wise lr decay: 1 = off (vvt.train.layer_decay)
  c.schedule = ml_collections.ConfigDict(dict(
      name='cosine', base_lr=0.1, end_lr=0.0, warmup_epochs=0.0, warmup_steps=-1,
      decay_epochs=(), decay_factor=0.1))
  c.task = task_section()
  c.loss = ml_collections.ConfigDict(dict(
      label_smoothing=0.0, mixup_alpha=0.0, cutmix_alpha=0.0, mix_switch_prob=0.5))
  c.eval = ml_collections.ConfigDict(dict(
      batch_size=64, average='logits', every_steps=0, split='test',
      raw_params=False))  # True: the raw params, not the EMA ones, where a checkpoint has both
  c.checkpoint = ml_collections.ConfigDict(dict(every_steps=1000, keep=3))
  c.log_every_steps = 50
  c.mesh = ml_collections.ConfigDict(dict(
      axes=flexible(sharding.DEFAULT_AXES),   # dict or (name, size) pairs in mesh order: vvt.config.sharding
      rules=flexible(()),                     # ((regex, spec), ...) first match wins: vvt.config.sharding
      logical_rules=flexible(None),           # (('batch', ('data',)), ('heads', ()), ...) over vvt.models.axes'
                                              # DEFAULT_RULES (None: those): vvt.config.sharding
      fsdp_min_size=sharding.DEFAULT_MIN_SIZE,  # parameters with fewer elements stay replicated
      num_devices=-1))                        # use the first N devices (-1 = all)
  c.distributed = ml_collections.ConfigDict(dict(
      initialize=False, coordinator_address='', num_processes=-1, process_id=-1,
      heartbeat_timeout_seconds=100))      # a process silent this long is lost: every other one exits
  c.profile = ml_collections.ConfigDict(dict(
      steps=flexible(None)))   # None: a few early steps traced on process 0; (): none; (A, B): steps A..B
  c.init_from = None
  c.runlocal = False
  return c


def init_from_config(**fields) -> ml_collections.ConfigDict:
  """An `init_from` section: its defaults (vvt.convert.init_options, which reads it) with `fields` set."""
  return init_options.get_config(**fields)


# ----------------------------------------------------------------------------- shared fields


def link_shared(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Makes `model.X` and `dataset.X` references to the top-level `X` for every shared field.

  The top-level value wins; where it is missing (a config.json written before shared fields
  existed) the model's value is taken. Returns `config`, changed in place.
  """
  for field in SHARED_FIELDS:
    sections = [s for s in SECTIONS_WITH_SHARED_FIELDS if isinstance(config.get(s), ml_collections.ConfigDict)]
    if field not in config:
      source = next((config[s][field] for s in sections if field in config[s]), None)
      config[field] = flexible(plain(source)) if field == 'num_classes' else source
    for s in sections:
      config[s][field] = config.get_ref(field)
  return config


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
