"""A run config resolved once into frozen, typed specs (vvt.config.run_spec): every schema field has its spec field
and nothing else, values are read as they are (never re-defaulted), and a bad config is one line naming the field."""
import dataclasses
import json
import sys
import types

import pytest

from tests.conftest import REPO
from vvt.config import dataset as dataset_config
from vvt.config import run_file
from vvt.config import run_spec
from vvt.config import schema
from vvt.config import sharding
from vvt.config.errors import ConfigError
from vvt.convert import init_options
from vvt.data import spec as data_spec
from vvt.models import spec as model_spec

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import train_helpers  # noqa: E402

SECTIONS = {'optimizer': run_spec.OptimizerSpec, 'schedule': run_spec.ScheduleSpec, 'loss': run_spec.LossSpec,
            'eval': run_spec.EvalSpec, 'checkpoint': run_spec.CheckpointSpec,
            'distributed': run_spec.DistributedSpec, 'mesh': sharding.MeshSpec}


def tiny():
  return train_helpers.tiny_config('unused')


def names(cls) -> set:
  return {f.name for f in dataclasses.fields(cls)}


def test_every_schema_field_has_its_spec_field_and_no_other():
  """The specs mirror the schema: a field added to a section without its spec field (or the reverse) fails here."""
  base = schema.get_base_config()
  for section, cls in SECTIONS.items():
    assert names(cls) == set(base[section].keys()), section
  assert set(data_spec.fields()) == set(dataset_config.get_config().keys())
  assert names(data_spec.DataSpec) == set(data_spec.fields()) | {'class_names'}
  assert names(init_options.InitSpec) == set(init_options.FIELDS)
  # runlocal is the loader's switch; num_classes is the model's and the data's (run.model / run.data)
  sections = set(SECTIONS) | {'model', 'dataset', 'init_from', 'class_names', 'runlocal', 'num_classes'}
  run_level = {k for k in base.keys() if k not in sections}  # seed, batch_size, num_frames, ...
  assert run_level <= names(run_spec.RunSpec)
  assert {'model', 'data', 'init_from', 'class_names', 'config'} | set(SECTIONS) <= names(run_spec.RunSpec)


def test_resolve_reads_every_field_once_as_its_type():
  c = tiny()
  c.schedule.base_lr = 1  # an int where a float is expected: valid, read as a float
  c.schedule.name = 'step'  # the schedule that reads decay_epochs
  c.schedule.decay_epochs = [3, 5]
  c.optimizer.ema_decay = None  # off
  c.dataset.randaugment = {'num_layers': 2, 'magnitude': 9}
  run = run_spec.resolve(c)
  assert isinstance(run.model, model_spec.ModelSpec) and run.model.hidden_size == 32
  assert run.model.dtype == 'float32'  # a name: the config layer holds no JAX dtype
  assert run.schedule.base_lr == 1.0 and isinstance(run.schedule.base_lr, float)
  assert run.schedule.decay_epochs == (3.0, 5.0)
  assert run.optimizer.ema_decay == 0.0 and run.optimizer.layer_decay == 1.0
  assert isinstance(run.data, data_spec.DataSpec) and run.data.num_frames == run.num_frames == 8
  assert isinstance(run.data.randaugment, types.MappingProxyType) and run.data.randaugment['magnitude'] == 9
  assert run.data.class_names == run.class_names == tuple(c.class_names)
  assert run.mesh.logical_rules == sharding.check_logical_rules(None) and run.mesh.axes == (('data', -1),)
  assert run.init_from is None and run.batch_size == 8 and run.eval.batch_size == 16
  with pytest.raises(dataclasses.FrozenInstanceError):
    run.batch_size = 16
  with pytest.raises(dataclasses.FrozenInstanceError):
    run.optimizer.name = 'sgd'
  with pytest.raises(TypeError):
    run.data.randaugment['magnitude'] = 3  # read-only


def test_the_config_json_travels_with_the_spec():
  c = tiny()
  run = run_spec.resolve(c)
  assert run.config == run_file.as_json(c)  # what WORKDIR/config.json holds
  assert run.config_values == json.loads(c.to_json_best_effort())  # a checkpoint's meta, the resume check
  assert run_file.from_dict(run.config_values).to_dict() == run_file.as_saved(c).to_dict()


def test_a_bad_config_is_one_line_naming_the_field():
  c = tiny()
  c.optimizer.name = 'lamb'
  with pytest.raises(ConfigError, match=r"^optimizer.name must be one of 'sgd', 'adamw', got 'lamb'$"):
    run_spec.resolve(c)
  c = tiny()
  c.model.num_heads = 3  # hidden_size 32 is not divisible by 3
  with pytest.raises(ConfigError) as e:
    run_spec.resolve(c)
  assert 'num_heads' in str(e.value) and '\n' not in str(e.value)
  c = tiny()
  del c.loss['mix_switch_prob']  # a config built without the schema's field: named, never defaulted here
  with pytest.raises(ConfigError, match=r"^config field 'loss.mix_switch_prob' is missing"):
    run_spec.resolve(c)


def test_an_older_config_json_resolves_to_the_specs_of_todays_config(tmp_path):
  """A field added since a run's config.json was written is filled by the schema when it is loaded
  (vvt.config.run_file): the run's specs are today's defaults, not a default of the code that reads them."""
  c = tiny()
  values = json.loads(c.to_json_best_effort())
  for section, field in (('optimizer', 'layer_decay'), ('optimizer', 'ema_decay'), ('dataset', 'autoaugment'),
                         ('mesh', 'logical_rules'), ('eval', 'raw_params'), ('model', 'pooling')):
    del values[section][field]
  run_file.write(str(tmp_path), json.dumps(values))
  old = run_spec.resolve(run_file.load_saved(str(tmp_path)))
  new = run_spec.resolve(c)
  assert old == new  # every spec field (the config's JSON text is not compared)


def test_the_device_checks_of_a_resolved_run():
  run = run_spec.resolve(tiny())  # batch 8, eval batch 16, one data axis of the rest
  run_spec.check_devices(run, 4)
  with pytest.raises(ConfigError, match='is not divisible by the 16 batch shards'):
    run_spec.check_devices(run, 16)
