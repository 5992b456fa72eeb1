"""The tasks, by `config.task.name`: the module of each (imported when its task is built, so this list and
`vvt.config`'s validation of the name import neither jax nor flax).

Each module has `from_config(run) -> vvt.tasks.base.Task`: `run` is a run's RunSpec (`vvt.config.run_spec`: its
`task`, `model`, `loss` and `eval` specs), or a run config, whose sections have the same fields. A new task: its
module, one line here, its tests. A task with options of its own checks them in a `check` hook
(`vvt.tasks.base.CheckOptions`) of a module without jax or flax, named in CHECKS.
"""
import importlib

from vvt.tasks import base

TASKS = {
    'classification': 'vvt.tasks.classification',  # softmax cross-entropy, one or several heads, top-1 / top-5
    'multilabel': 'vvt.tasks.multilabel',          # several labels per video, sigmoid cross-entropy, mAP
    'probe': 'vvt.tasks.probe',                    # a grid of probes on a frozen backbone (task.probe)
}
DEFAULT = 'classification'
# The module of each task's `check` hook (`vvt.tasks.base.CheckOptions`; imports neither jax nor flax). A task not
# named here has no options of its own to check (`vvt.tasks.base.no_problems`).
CHECKS = {
    'probe': 'vvt.tasks.probe_options',
}


def name_of(config) -> str:
  """`run.task.name` of a RunSpec or a run config (one without a `task` section: classification)."""
  section = config.get('task') if hasattr(config, 'get') else getattr(config, 'task', None)
  return str(getattr(section, 'name', DEFAULT)) if section is not None else DEFAULT


def task_of(config):
  """The task of a RunSpec or a run config `config` (its `task.name`)."""
  name = name_of(config)
  if name not in TASKS:
    raise ValueError(f'task.name: {name!r} is not one of {", ".join(TASKS)}')
  return importlib.import_module(TASKS[name]).from_config(config)


def check_options(config) -> list[str]:
  """The problems of the options of `config`'s task (its `check` hook; [] for an unknown task name, which the
  config's validation of `task.name` reports): one line each naming the field. Imports no jax."""
  name = name_of(config)
  if name not in CHECKS:
    return base.no_problems(config)
  return list(importlib.import_module(CHECKS[name]).check(config))
