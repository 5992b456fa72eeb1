"""The tasks, by `config.task.name`: the module of each (imported when its task is built, so this list and
`vvt.config`'s validation of the name import neither jax nor flax).

Each module has `from_config(config) -> vvt.tasks.base.Task` (the run config's `task` section and what else of
the run config the task reads). A new task: its module, one line here, its tests.
"""
import importlib

TASKS = {
    'classification': 'vvt.tasks.classification',  # softmax cross-entropy, one or several heads, top-1 / top-5
    'multilabel': 'vvt.tasks.multilabel',          # several labels per video, sigmoid cross-entropy, mAP
    'probe': 'vvt.tasks.probe',                    # a grid of probes on a frozen backbone (task.probe)
}
DEFAULT = 'classification'


def name_of(config) -> str:
  """`config.task.name` (a config without a `task` section: classification)."""
  section = config.get('task') if hasattr(config, 'get') else None
  return str(section.get('name', DEFAULT)) if section is not None else DEFAULT


def task_of(config):
  """The task of run config `config` (`config.task.name`)."""
  name = name_of(config)
  if name not in TASKS:
    raise ValueError(f'task.name: {name!r} is not one of {", ".join(TASKS)}')
  return importlib.import_module(TASKS[name]).from_config(config)
