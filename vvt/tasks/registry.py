"""The tasks, by `config.task.name`: the module of each (imported when its task is built, so this list and
`vvt.config`'s validation of the name import neither jax nor flax).

Each module has `from_config(run) -> vvt.tasks.base.Task`: `run` is a run's RunSpec (`vvt.config.run_spec`: its
`task`, `model`, `loss` and `eval` specs), or a run config, whose sections have the same fields. A new task: its
module, one line here, its tests. A task's hooks that read the run config before any heavy import (its `check`
of its own options, ...: `vvt.tasks.base.ConfigHooks`) are in HOOKS: the task's ConfigHooks, or the module without
jax or flax whose `HOOKS` they are.
"""
import importlib

from vvt.tasks import base

TASKS = {
    'classification': 'vvt.tasks.classification',  # softmax cross-entropy, one or several heads, top-1 / top-5
    'multilabel': 'vvt.tasks.multilabel',          # several labels per video, sigmoid cross-entropy, mAP
    'probe': 'vvt.tasks.probe',                    # a grid of probes on a frozen backbone (task.probe)
    'mae': 'vvt.tasks.mae',                        # masked autoencoding pretraining (VideoMAE; task.mae)
    'jepa': 'vvt.tasks.jepa',                      # V-JEPA latent prediction pretraining (task.jepa)
}
DEFAULT = 'classification'
# Each task's `vvt.tasks.base.ConfigHooks`, or the module (no jax, no flax) whose `HOOKS` they are.
HOOKS = {
    'classification': base.ConfigHooks(),
    'multilabel': base.ConfigHooks(multi_hot_labels=base.always),
    'probe': 'vvt.tasks.probe_options',
    'mae': 'vvt.tasks.mae_options',
    'jepa': 'vvt.tasks.jepa_options',
}


def name_of(config) -> str:
  """`run.task.name` of a RunSpec, a run config or its JSON dict (one without a `task` section: classification)."""
  section = config.get('task') if hasattr(config, 'get') else getattr(config, 'task', None)
  if isinstance(section, dict):  # a run config read from its config.json
    return str(section.get('name') or DEFAULT)
  return str(getattr(section, 'name', DEFAULT)) if section is not None else DEFAULT


def task_of(config):
  """The task of a RunSpec or a run config `config` (its `task.name`)."""
  name = name_of(config)
  if name not in TASKS:
    raise ValueError(f'task.name: {name!r} is not one of {", ".join(TASKS)}')
  return importlib.import_module(TASKS[name]).from_config(config)


def hooks_named(name: str) -> base.ConfigHooks:
  """The ConfigHooks of the task `name` (the defaults for an unknown name, which the config's validation of
  `task.name` reports). Imports no jax."""
  hooks = HOOKS.get(name, base.ConfigHooks())
  return importlib.import_module(hooks).HOOKS if isinstance(hooks, str) else hooks


def hooks_of(config) -> base.ConfigHooks:
  """The ConfigHooks of `config`'s task (`hooks_named`)."""
  return hooks_named(name_of(config))


def check_options(config) -> list[str]:
  """The problems of the options of `config`'s task (its `check` hook): one line each naming the field."""
  return list(hooks_of(config).check(config))


def multi_hot_tasks(config) -> tuple:
  """The tasks that would read multi-hot labels with `config`'s other fields (their `multi_hot_labels` hook)."""
  return tuple(n for n in TASKS if hooks_named(n).multi_hot_labels(config))
