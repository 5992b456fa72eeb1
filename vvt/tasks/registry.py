"""The tasks, by `config.task.name`: the module of each (imported when its task is built, so this list and
`vvt.config`'s validation of the name import neither jax nor flax).

Each module has `from_config(run) -> vvt.tasks.base.Task`: `run` is a run's RunSpec (`vvt.config.run_spec`: its
`task`, `model`, `loss` and `eval` specs), or a run config, whose sections have the same fields. A new task: its
module, one line here, its tests.
"""
import importlib

TASKS = {
    'classification': 'vvt.tasks.classification',  # softmax cross-entropy, one or several heads, top-1 / top-5
    'multilabel': 'vvt.tasks.multilabel',          # several labels per video, sigmoid cross-entropy, mAP
    'probe': 'vvt.tasks.probe',                    # a grid of probes on a frozen backbone (task.probe)
}
DEFAULT = 'classification'


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
