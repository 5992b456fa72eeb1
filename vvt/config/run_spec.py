"""A run config resolved once into frozen, typed specs: what a command hands the code that does the work.

    run = resolve(config)      # a run ConfigDict (loaded, overridden) -> RunSpec; ConfigError naming the field

  run.model        ModelSpec         the resolved model (vvt.models.spec), the one call of `vvt.models.resolve`
  run.data         DataSpec          (vvt.data.spec: files, sampling, views, augmentation, normalisation, on_error,
                                     the class names)
  run.optimizer    OptimizerSpec     run.schedule  ScheduleSpec     run.loss  LossSpec
  run.eval         EvalSpec          run.checkpoint  CheckpointSpec
  run.task         TaskSpec          run.profile  ProfileSpec
  run.mesh         MeshSpec          (vvt.config.sharding: axes, rules, logical rules, fsdp_min_size, num_devices)
  run.distributed  DistributedSpec   run.init_from  InitSpec or None (vvt.convert.init_options)
  run.seed, batch_size, num_epochs, num_train_steps, log_every_steps, num_frames, image_size, class_names
  run.config       the config's JSON values: what WORKDIR/config.json and a checkpoint's meta hold, and what the
                   resume check compares (vvt.config.resume)

The ConfigDict stops here: loading, overrides, validation, the saved config.json and the resume check keep it;
the program builder, the optimiser, the shardings, the data, evaluation, checkpoints and the trainer take their
spec. `resolve` validates the config (`vvt.config.validation`; the model's check is its resolution) and reads
every field once, as it is: the defaults are the schema's (`vvt.config.schema`, `vvt.config.dataset`; a config
file builds on them, and an older config.json gets the fields added since from them, `vvt.config.run_file`), and
a spec never re-defaults one. `check_devices` adds the checks that need the device count (the mesh's axes, the
batch splits), once the devices are known. Each spec type lives in the lowest package that reads it; these
are read by `vvt.train` only.

A new section (a task head, a probe, ...) is one frozen dataclass of its fields (a `_Section` reads the
same-named fields of the section), one RunSpec field and one line in `resolve`; its defaults and checks go to the
schema and `vvt.config.validation`, as the other sections'.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

import ml_collections

from vvt.config import run_file
from vvt.config import schema
from vvt.config import sharding
from vvt.config import validation
from vvt.config.errors import ConfigError
from vvt.config.errors import problems_of
from vvt.convert import init_options
from vvt.data import DataSpec
from vvt.models import frame_size
from vvt.models import spec as model_spec


class _Section:
  """A spec of one section of the config: its same-named fields, each as its field's type (`of`)."""

  @classmethod
  def of(cls, section, **given):
    """The spec of a validated `section` (a ConfigDict); `given` values replace the section's."""
    values = {}
    for field in dataclasses.fields(cls):
      value = given[field.name] if field.name in given else section[field.name]
      kind = {'int': int, 'float': float, 'bool': bool, 'str': str}.get(field.type)
      values[field.name] = kind(value) if kind is not None else value
    return cls(**values)


@dataclasses.dataclass(frozen=True)
class OptimizerSpec(_Section):
  """`config.optimizer` (vvt.train.optimizers; ema_decay: vvt.train.ema; layer_decay: vvt.train.layer_decay)."""
  name: str                  # 'sgd' | 'adamw'
  momentum: float
  nesterov: bool
  b1: float
  b2: float
  eps: float
  weight_decay: float
  grad_clip_norm: float      # 0: off
  accumulation_steps: int    # micro-batches per update
  ema_decay: float           # 0: no EMA of the params (the config's None is 0)
  layer_decay: float         # 1: off

  @classmethod
  def of(cls, section, **given):
    return super().of(section, **{'ema_decay': section.ema_decay or 0.0, **given})


@dataclasses.dataclass(frozen=True)
class ScheduleSpec(_Section):
  """`config.schedule`: the learning rate per optimiser step (vvt.train.optimizers.make_schedule)."""
  name: str                  # 'cosine' | 'step' | 'constant'
  base_lr: float
  end_lr: float
  warmup_epochs: float
  warmup_steps: int          # >= 0 overrides warmup_epochs
  decay_epochs: tuple        # of floats, for 'step'
  decay_factor: float

  @classmethod
  def of(cls, section, **given):
    return super().of(section, **{'decay_epochs': tuple(float(e) for e in section.decay_epochs), **given})


@dataclasses.dataclass(frozen=True)
class LossSpec(_Section):
  """`config.loss`: label smoothing and the mixing of clips (vvt.train.losses)."""
  label_smoothing: float
  mixup_alpha: float         # 0: no mixup
  cutmix_alpha: float        # 0: no cutmix
  mix_switch_prob: float     # cutmix's share when both are on


@dataclasses.dataclass(frozen=True)
class EvalSpec(_Section):
  """`config.eval`: multi-view evaluation (vvt.train.evaluate)."""
  batch_size: int            # global, in views
  average: str               # 'logits' | 'softmax': what is averaged over a video's views
  every_steps: int           # 0: only at the end of training
  split: str
  raw_params: bool           # the raw params where a checkpoint also has EMA ones (vvt.train.ema)


@dataclasses.dataclass(frozen=True)
class CheckpointSpec(_Section):
  """`config.checkpoint`: how often the training state is saved, and how many steps are kept."""
  every_steps: int
  keep: int


@dataclasses.dataclass(frozen=True)
class DistributedSpec(_Section):
  """`config.distributed`: jax.distributed's start (vvt.train.mesh) and the peers' heartbeat (vvt.train.peers)."""
  initialize: bool
  coordinator_address: str
  num_processes: int         # -1: from the environment
  process_id: int            # -1: from the environment
  heartbeat_timeout_seconds: int


def _layers_of(section) -> dict:
  """`task.probe`'s layers and combine; a run's config.json written before they existed: the schema's defaults."""
  default = schema.get_base_config().task.probe
  return {'layers': tuple(int(i) for i in section.get('layers', default.layers)),
          'combine': str(section.get('combine', default.combine))}


@dataclasses.dataclass(frozen=True)
class ProbeSpec(_Section):
  """`config.task.probe`: the grid of probes on a frozen backbone (task.name='probe', vvt.tasks.probe)."""
  base: str                  # the task the probes are trained and judged by: 'classification' | 'multilabel'
  head: str                  # 'linear' | 'attentive'
  lrs: tuple                 # the grid: every lr with every weight decay
  weight_decays: tuple
  num_queries: int           # the attentive probe's pooler
  depth: int
  num_heads: int
  backbone: str              # the frozen backbone's weights: a vvt run or converted folder, or a `vvt export` file
                             # (vvt train writes any other source as one); '': init_from's
  layers: tuple              # the backbone's layers the probes read (): its own features (vvt/models/outputs.py)
  combine: str               # 'mean' | 'concat': how the layers' tokens are combined

  @classmethod
  def of(cls, section, **given):
    return super().of(section, **{'lrs': tuple(float(v) for v in section.lrs),
                                  'weight_decays': tuple(float(v) for v in section.weight_decays),
                                  'backbone': section.backbone or '', **_layers_of(section), **given})


@dataclasses.dataclass(frozen=True)
class ZeroShotSpec(_Section):
  """`config.task.zero_shot` (task.name='zero_shot', vvt.tasks.zero_shot); a run's config.json written before it
  existed: the schema's defaults."""
  templates: tuple           # prompts with one '{}' where the class name goes, a CLIP-style ensemble

  @classmethod
  def of(cls, section, **given):
    default = schema.get_base_config().task.zero_shot
    return super().of(section or default, **{'templates': tuple(
        str(t) for t in (section or default).get('templates', default.templates)), **given})


@dataclasses.dataclass(frozen=True)
class MaeSpec(_Section):
  """`config.task.mae`: masked autoencoding (task.name='mae', vvt.tasks.mae; checks: vvt/tasks/mae_options.py)."""
  mask_ratio: float
  decoder_depth: int
  decoder_width: int
  decoder_heads: int
  norm_pix_loss: bool
  eval_seed: int
  pictures: int
  masking: str               # 'tube' | 'random' (vvt.tasks.masks)

  @classmethod
  def of(cls, section, **given):
    """A run's config.json written before `task.mae` existed: the schema's defaults (before `masking` existed:
    tube masks)."""
    section = schema.get_base_config().task.mae if section is None else section
    return super().of(section, **{'masking': section.get('masking', 'tube'), **given})


@dataclasses.dataclass(frozen=True)
class JepaSpec(_Section):
  """`config.task.jepa`: latent prediction pretraining (task.name='jepa', vvt.tasks.jepa)."""
  pred_depth: int            # the predictor: blocks, width, heads, MLP ratio
  pred_width: int
  pred_heads: int
  pred_mlp_ratio: float
  mask_sets: tuple           # ((num_blocks, spatial scale), ...): one (context, target) pair per set
  aspect_ratio: tuple        # (low, high) of every block's h / w
  momentum: tuple            # (start, end) of the target encoder's EMA momentum
  momentum_scale: float      # the ramp spans num_train_steps x momentum_scale
  loss_exp: float            # mean(|z - h| ^ loss_exp) / loss_exp
  eval_mask_seed: int        # the seed of an evaluation's masks

  @classmethod
  def of(cls, section, **given):
    return super().of(section, **{'mask_sets': tuple((int(n), float(s)) for n, s in section.mask_sets),
                                  'aspect_ratio': tuple(float(v) for v in section.aspect_ratio),
                                  'momentum': tuple(float(v) for v in section.momentum), **given})


def _jepa_of(task_section) -> 'JepaSpec':
  """`task.jepa`; a run's config.json written before it existed: the schema's defaults."""
  section = task_section.get('jepa') if hasattr(task_section, 'get') else None
  return JepaSpec.of(section if section is not None else schema.get_base_config().task.jepa)


@dataclasses.dataclass(frozen=True)
class TaskSpec(_Section):
  """`config.task`: what the run learns and how it is judged (vvt.tasks.registry.task_of reads the RunSpec)."""
  name: str                  # a name of vvt.tasks.registry.TASKS
  probe: ProbeSpec           # task.name='probe' only
  zero_shot: ZeroShotSpec    # task.name='zero_shot' only
  localization: Any = None   # task.name='localization': its LocalizationSpec (vvt.tasks.localization_options)
  mae: MaeSpec = None        # task.name='mae' only
  jepa: JepaSpec = None      # task.name='jepa' only

  @classmethod
  def of(cls, section, **given):
    from vvt.tasks.localization_options import LocalizationSpec
    return super().of(section, **{'probe': ProbeSpec.of(section.probe),
                                  'zero_shot': ZeroShotSpec.of(section.get('zero_shot')),
                                  'localization': LocalizationSpec.of(section.get('localization')),
                                  'mae': MaeSpec.of(section.get('mae')), 'jepa': _jepa_of(section), **given})


@dataclasses.dataclass(frozen=True)
class ProfileSpec(_Section):
  """`config.profile`: the optimiser steps traced (vvt.train.profile)."""
  steps: Optional[tuple]     # None: a few early steps; (): none; (A, B): steps A..B

  @classmethod
  def of(cls, section, **given):
    steps = section.steps
    return super().of(section, **{'steps': None if steps is None else tuple(int(s) for s in steps), **given})


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """A run config, resolved (see the module doc)."""
  model: model_spec.ModelSpec
  data: DataSpec             # the dataset section and the run's class names (vvt.data.spec)
  optimizer: OptimizerSpec
  schedule: ScheduleSpec
  loss: LossSpec
  eval: EvalSpec
  checkpoint: CheckpointSpec
  task: TaskSpec
  profile: ProfileSpec
  mesh: sharding.MeshSpec
  distributed: DistributedSpec
  init_from: Optional[init_options.InitSpec]
  seed: int
  batch_size: int            # global
  num_epochs: float
  num_train_steps: int       # > 0 overrides num_epochs
  log_every_steps: int
  num_frames: int            # the shared fields: the model's and the data's
  image_size: tuple[int, int]  # (H, W) of a frame
  class_names: Optional[tuple]  # names in label order (None: the dataset's, if it has them)
  config: str = dataclasses.field(repr=False, compare=False)  # the config as JSON text, as config.json holds it

  @property
  def config_values(self) -> dict:
    """The config's JSON values (a fresh dict each time): a checkpoint's meta, the resume check."""
    return json.loads(self.config)


def resolve(config: ml_collections.ConfigDict, purpose: Optional[str] = None, *, model=None) -> RunSpec:
  """The RunSpec of run config `config`: validated for `purpose` (`vvt.config.validation`: one ConfigError with
  every problem, one line each naming the field), then every field read once. The model is resolved there, once
  (`vvt.models.resolve`, the model's check); `model`: a caller that validated the config already gives the
  resolved model it got (`validation.check`), and the config is not validated again."""
  if model is None:
    model = validation.validate(config, purpose=purpose)
  return RunSpec(
      model=model_spec.spec_of(model),
      data=DataSpec.of(config.dataset, class_names=config.class_names),
      optimizer=OptimizerSpec.of(config.optimizer),
      schedule=ScheduleSpec.of(config.schedule),
      loss=LossSpec.of(config.loss),
      eval=EvalSpec.of(config.eval),
      checkpoint=CheckpointSpec.of(config.checkpoint),
      task=TaskSpec.of(config.task),
      profile=ProfileSpec.of(config.profile),
      mesh=sharding.mesh_spec(config.mesh),
      distributed=DistributedSpec.of(config.distributed),
      init_from=None if config.init_from is None else init_options.validate(config.init_from),
      seed=int(config.seed), batch_size=int(config.batch_size), num_epochs=float(config.num_epochs),
      num_train_steps=int(config.num_train_steps), log_every_steps=int(config.log_every_steps),
      num_frames=int(config.num_frames), image_size=frame_size.parse(config.image_size),
      class_names=None if config.class_names is None else tuple(config.class_names),
      config=run_file.as_json(config))


def check_devices(run: RunSpec, num_devices: int, num_processes: int = 1) -> None:
  """What `resolve` could not check before the devices were known: the mesh's axes over `num_devices` and the
  batches over the batch shards and `num_processes` processes. One ConfigError with every problem, one line each
  naming the field."""
  try:
    axes = sharding.resolve_axes(run.mesh.axes, num_devices)
  except ValueError as e:
    raise ConfigError(*problems_of(e)) from None
  validation.check_batch_split(run.batch_size, run.optimizer.accumulation_steps, run.eval.batch_size,
                               int(run.data.repeated_augmentation),
                               validation.batch_shards(axes, run.mesh.logical_rules), num_processes)
