"""The tasks, by `config.task.name`: the module of each (imported when its task is built, so this list and
`vvt.config`'s validation of the name import neither jax nor flax).

Each module has `from_config(run) -> vvt.tasks.base.Task`: `run` is a run's RunSpec (`vvt.config.run_spec.resolve`
of the run config: its `task`, `model`, `loss`, `eval` and `schedule` specs), never the ConfigDict: `task_of`
refuses anything else. A new task: its module, one line here, its tests.

The config side of the boundary: a task's hooks that read the run config before any heavy import (its `check` of
its own options, ...: `vvt.tasks.base.ConfigHooks`) are in HOOKS: the task's ConfigHooks, or the module without
jax or flax whose `HOOKS` they are. `name_of`, `hooks_of`, `check_options` and `multi_hot_tasks` take the run
config (a ConfigDict, or its JSON values as config.json holds them): the config's validation and the commands
call them before the config is resolved. Code past the boundary that holds a RunSpec asks `hooks_named(
run.task.name)`.
"""
import dataclasses
import importlib

from vvt.tasks import base
from vvt.tasks import video_text_options

TASKS = {
    'classification': 'vvt.tasks.classification',  # softmax cross-entropy, one or several heads, top-1 / top-5
    'multilabel': 'vvt.tasks.multilabel',          # several labels per video, sigmoid cross-entropy, mAP
    'probe': 'vvt.tasks.probe',                    # a grid of probes on a frozen backbone (task.probe)
    'localization': 'vvt.tasks.localization',      # ActionFormer on feature sequences (task.localization)
    'zero_shot': 'vvt.tasks.zero_shot',            # a video-text model's class prompts, no training (evaluation)
    'retrieval': 'vvt.tasks.retrieval',            # text-video retrieval, contrastive fine-tuning (captions)
    'mae': 'vvt.tasks.mae',                        # masked autoencoding pretraining (VideoMAE; task.mae)
    'jepa': 'vvt.tasks.jepa',                      # V-JEPA latent prediction pretraining (task.jepa)
}
DEFAULT = 'classification'
# Each task's `vvt.tasks.base.ConfigHooks`, or the module (no jax, no flax) whose `HOOKS` they are.
HOOKS = {
    'classification': base.ConfigHooks(check=video_text_options.check_classifier_task('classification')),
    'multilabel': base.ConfigHooks(multi_hot_labels=base.always,
                                   check=video_text_options.check_classifier_task('multilabel')),
    'probe': 'vvt.tasks.probe_options',
    'localization': 'vvt.tasks.localization_options',
    'zero_shot': video_text_options.ZERO_SHOT,
    'retrieval': video_text_options.RETRIEVAL,
    'mae': 'vvt.tasks.mae_options',
    'jepa': 'vvt.tasks.jepa_options',
}


def name_of(config) -> str:
  """`task.name` of a run config or its JSON dict (one without a `task` section: classification). The config
  side of the boundary: a RunSpec's is `run.task.name`."""
  section = config.get('task')
  return str(section.get('name') or DEFAULT) if section is not None else DEFAULT


def task_of(run):
  """The task of the RunSpec `run` (its `task.name`; `vvt.config.run_spec.resolve` validated it). TypeError for
  anything but a RunSpec: a ConfigDict is resolved once, by the command that loads it."""
  if not (dataclasses.is_dataclass(run) and dataclasses.is_dataclass(getattr(run, 'task', None))):
    raise TypeError('vvt.tasks.registry.task_of takes a RunSpec (vvt.config.run_spec.resolve of the run config), '
                    f'not {type(run).__name__}')
  name = run.task.name
  if name not in TASKS:
    raise ValueError(f'task.name: {name!r} is not one of {", ".join(TASKS)}')
  return importlib.import_module(TASKS[name]).from_config(run)


def hooks_named(name: str) -> base.ConfigHooks:
  """The ConfigHooks of the task `name` (the defaults for an unknown name, which the config's validation of
  `task.name` reports). Imports no jax."""
  hooks = HOOKS.get(name, base.ConfigHooks())
  return importlib.import_module(hooks).HOOKS if isinstance(hooks, str) else hooks


def hooks_of(config) -> base.ConfigHooks:
  """The ConfigHooks of the run config `config`'s task (`hooks_named`); config side of the boundary (`name_of`)."""
  return hooks_named(name_of(config))


def check_options(config) -> list[str]:
  """The problems of the options of the run config `config`'s task (its `check` hook): one line each naming the
  field. Called by the config's validation, before any heavy import."""
  return list(hooks_of(config).check(config))


def multi_hot_tasks(config) -> tuple:
  """The tasks that would read multi-hot labels with the run config `config`'s other fields (their
  `multi_hot_labels` hook). Called by the config's validation, before any heavy import."""
  return tuple(n for n in TASKS if hooks_named(n).multi_hot_labels(config))
