"""Specs for the tests, built as a command builds them: code past the config boundary (the tasks, the program, the
steps, the data pipeline, evaluation, the trainer) takes a RunSpec or one of its specs, never the ConfigDict.

    run = specs.run_spec(config)               # vvt.config.run_spec.resolve: validated, every field read once
    task = specs.task_for(config)              # the run's task: vvt.tasks.registry.task_of(its RunSpec)
    opt = specs.optimizer_spec(name='adamw')   # a section's spec: the schema's defaults with `fields` set
    data = specs.data_spec(num_frames=4)       # a DataSpec: the dataset section's defaults with `fields` set
"""
from vvt.config import dataset
from vvt.config import run_spec as run_spec_lib
from vvt.config import schema


def run_spec(config, purpose=None) -> run_spec_lib.RunSpec:
  """The RunSpec of the run config `config`, resolved once as a command resolves it (a ConfigError names every
  problem of the config for `purpose`)."""
  return run_spec_lib.resolve(config, purpose)


def task_for(config, purpose=None):
  """The task of the run config `config` (`vvt.tasks.registry.task_of` of its RunSpec)."""
  from vvt.tasks import registry
  return registry.task_of(run_spec(config, purpose))


def _section(name: str, fields: dict):
  section = schema.get_base_config()[name]
  section.update(fields)
  return section


def optimizer_spec(**fields) -> run_spec_lib.OptimizerSpec:
  """The OptimizerSpec of the schema's optimizer section with `fields` set."""
  return run_spec_lib.OptimizerSpec.of(_section('optimizer', fields))


def schedule_spec(**fields) -> run_spec_lib.ScheduleSpec:
  """The ScheduleSpec of the schema's schedule section with `fields` set."""
  return run_spec_lib.ScheduleSpec.of(_section('schedule', fields))


def data_spec(class_names=None, **fields):
  """The DataSpec of the dataset section's defaults (`vvt.config.dataset`) with `fields` set."""
  from vvt.data import DataSpec
  section = dataset.get_config()
  section.update(fields)
  return DataSpec.of(section, class_names=class_names)
