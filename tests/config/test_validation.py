"""Validation reports every problem of a config at once, and each command checks only the fields it reads."""
import json
import re

import ml_collections
import pytest

from tests.config.config_files import SYNTHETIC
from tests.config.config_files import VIVIT_B
from tests.config.config_files import load
from vvt.config import labels
from vvt.config import paths
from vvt.config import validation
from vvt.config.errors import ConfigError


def edited(spec, changes: dict):
  """The config of `spec` as plain values with `changes` ({dotted path: value}) made, of any type."""
  values = json.loads(load(spec).to_json_best_effort())
  for path, value in changes.items():
    *parents, leaf = path.split('.')
    node = values
    for part in parents:
      node = node[part]
    node[leaf] = value
  return ml_collections.ConfigDict(values)


def problems(config, purpose='train'):
  with pytest.raises(ConfigError) as info:
    validation.validate(config, purpose=purpose)
  assert all('\n' not in line for line in info.value.problems)
  return list(info.value.problems)


def test_three_independent_mistakes_are_reported_together_in_a_stable_order():
  config = load(SYNTHETIC)
  config.optimizer.momentun = 0.9        # a misspelt field
  config.loss.label_smoothing = 1.5      # a rate out of range
  config.model.pooling = 'attentive'     # not one of the model's choices
  found = problems(config)
  assert len(found) == 3, found
  assert found[0] == "unknown config field 'optimizer.momentun' (did you mean optimizer.momentum?)"
  assert found[1] == 'loss.label_smoothing must be in [0, 1), got 1.5'
  assert found[2] == ("model.pooling must be one of ('mean', 'mean_then_norm', 'first_token'), got 'attentive'")
  assert problems(config) == found  # the same order every time


def test_a_bad_field_skips_only_the_checks_that_read_it():
  """accumulation_steps=0 is out of range: the batch split over it is not checked (nor divided by zero), the
  other fields still are."""
  config = edited(SYNTHETIC, {'optimizer.accumulation_steps': 0, 'batch_size': 'eight', 'eval.batch_size': 0,
                               'model.num_heads': 3})  # 64 is not divisible by 3
  assert problems(config) == [
      "config field 'batch_size' must be an integer, got 'eight'",
      'optimizer.accumulation_steps must be positive, got 0',
      'eval.batch_size must be positive, got 0',
      'model.hidden_size=64 is not divisible by model.num_heads=3']


def test_a_problem_that_makes_the_rest_meaningless_says_so_and_stops_there():
  config = edited(SYNTHETIC, {'optimizer': 0.1, 'loss.label_smoothing': 2.0})
  found = problems(config)
  assert found[0] == "config field 'optimizer' must be a section, got 0.1 (the checks of its fields are skipped)"
  assert found[1:] == ['loss.label_smoothing must be in [0, 1), got 2.0']  # the other sections are still checked
  config = edited(SYNTHETIC, {'model': {}, 'schedule.base_lr': -1.0})
  assert problems(config) == ['config.model is empty: set it from vvt.models.get_config (the other checks need it)']


def test_model_problems_are_all_named():
  config = load(SYNTHETIC)
  config.model.pooling, config.model.dtype, config.model.stochastic_dept = 'attentive', 'float16', 0.1
  found = problems(config)
  assert found[0].startswith('unknown model config field model.stochastic_dept (did you mean')
  assert [f.split(' must')[0] for f in found[1:]] == ['model.pooling', 'model.dtype']


TRAINING_ONLY = ('dataset.train_min_resize=16',      # smaller than the 32-px crop
                 'optimizer.momentum=2.0', 'loss.mixup_alpha=-1.0', 'schedule.base_lr=0.0',
                 'num_train_steps=10', 'schedule.warmup_steps=20', 'checkpoint.every_steps=0',
                 'batch_size=7', 'optimizer.accumulation_steps=2', 'dataset.repeated_augmentation=3',
                 'dataset.color_jitter=1.5', 'log_every_steps=0', 'optimizer.layer_decay=0.0')


@pytest.mark.parametrize('purpose', ['eval', 'predict', 'attention', 'summary'])
def test_commands_that_do_not_train_never_refuse_training_only_fields(purpose):
  config = load(SYNTHETIC, *TRAINING_ONLY, validate=False)
  validation.validate(config, purpose=purpose)
  assert len(problems(config, 'train')) == 11  # training checks them all (the batch split once: 7 % 2)
  # what the command reads is still checked: the evaluation views, the model
  config.dataset.eval_resize = 24
  config.model.pooling = 'attentive'
  found = problems(config, purpose)
  assert ('dataset.eval_resize=24 is smaller than the crop image_size=32' in found) == (purpose != 'summary')
  assert found[-1].startswith('model.pooling must be one of')


def test_eval_and_predict_load_configs_with_training_only_mistakes():
  assert load(SYNTHETIC, *TRAINING_ONLY, purpose='eval').dataset.train_min_resize == 16
  assert load(SYNTHETIC, *TRAINING_ONLY, purpose='predict').optimizer.momentum == 2.0
  with pytest.raises(ConfigError) as info:
    load(SYNTHETIC, *TRAINING_ONLY)
  assert len(info.value.problems) == 11
  with validation.for_command('eval'):  # a later validation (the trainer's, on its mesh) keeps the command's purpose
    validation.validate(load(SYNTHETIC, *TRAINING_ONLY, validate=False), num_devices=1)
  with pytest.raises(ConfigError):
    validation.validate(load(SYNTHETIC, *TRAINING_ONLY, validate=False), num_devices=1)


def test_every_field_belongs_to_a_group_and_training_reads_them_all():
  for path in paths.flatten(validation.schema_config()):
    assert validation.group_of(path) in validation.GROUPS, path
  assert set(validation.PURPOSES['train']) == set(validation.GROUPS)
  expected = {'eval.every_steps': 'training', 'eval.batch_size': 'evaluation', 'dataset.eval_resize': 'views',
              'model.x.y': 'model', 'dataset.train_min_resize': 'train_data'}
  assert {path: validation.group_of(path) for path in expected} == expected
  with pytest.raises(ValueError, match="unknown validation purpose 'tarin'"):
    validation.validate(load(SYNTHETIC), purpose='tarin')


def test_bad_overrides_and_bad_fields_are_reported_together():
  with pytest.raises(ConfigError) as info:
    load(SYNTHETIC, 'optimizer.nme=sgd', 'batch_size=abc', 'loss.label_smoothing=1.0')
  assert [p.split(':')[0] for p in info.value.problems[:2]] == ['--config.optimizer.nme', '--config.batch_size']
  assert info.value.problems[2] == 'loss.label_smoothing must be in [0, 1), got 1.0'


# --------------------------------------------------------------------------- runlocal on the user's own data


def _data(tmp_path, names):
  (tmp_path / 'train.manifest.json').write_text(json.dumps({'class_names': list(names)}))
  return [f'dataset.train_files={tmp_path / "train.tfrecord@2"}', f'dataset.eval_files={tmp_path / "test.tfrecord@1"}']


def test_runlocal_on_own_data_takes_the_datas_classes(tmp_path):
  data = _data(tmp_path, ['left', 'right', 'still'])
  c = load(VIVIT_B, 'runlocal=True', *data)
  assert (c.num_classes, c.model.num_classes, tuple(c.class_names)) == (3, 3, ('left', 'right', 'still'))
  assert c.model.num_layers == 2  # shrunk
  c = load(VIVIT_B, 'runlocal=True')  # the synthetic data's classes
  assert c.num_classes == 4 and len(c.class_names) == 4


def test_classes_that_disagree_with_the_data_say_what_to_type(tmp_path):
  data = _data(tmp_path, ['left', 'right', 'still'])
  config = load(SYNTHETIC, *data, 'num_classes=5', "class_names=('a','b','c','d','e')", validate=False)
  with pytest.raises(ConfigError) as info:
    labels.resolve(config, check=True)
  advice = re.findall(r'--config\.\S+', str(info.value))
  assert advice == ['--config.num_classes=0', '--config.class_names=None'], str(info.value)
  typed = [a[len('--config.'):] for a in advice]
  config = load(SYNTHETIC, *data, 'num_classes=5', "class_names=('a','b','c','d','e')", *typed)
  labels.resolve(config, check=True)
  assert config.num_classes == 3 and tuple(config.class_names) == ('left', 'right', 'still')


def test_a_step_decay_or_a_trace_past_the_end_of_the_run_is_refused_naming_the_field():
  """A decay epoch at or after num_epochs, and traced steps after num_train_steps, never happen: both refused in one
  run; within the run both pass, and a decay of a run of steps waits for the training set's size
  (tests/train/test_optimizers.py)."""
  epochs = {'schedule.name': 'step', 'num_train_steps': -1, 'num_epochs': 2.0, 'schedule.warmup_steps': -1}
  assert problems(edited(SYNTHETIC, {**epochs, 'schedule.decay_epochs': [1, 2, 3.5]})) == [
      'schedule.decay_epochs=(1, 2, 3.5): 2, 3.5 not before the end of the run (num_epochs=2.0), so that decay '
      'never happens: give epochs below num_epochs (or () for none)']
  assert problems(edited(SYNTHETIC, {'num_train_steps': 10, 'profile.steps': [11, 12]})) == [
      "profile.steps=(11, 12) starts after the run's last step 10 (num_train_steps=10), so no trace would be "
      'written: give steps within the run (or () for no trace)']
  assert len(problems(edited(SYNTHETIC, {**epochs, 'schedule.decay_epochs': [3, 1]}))) == 2  # decreasing, and 3
  validation.validate(edited(SYNTHETIC, {**epochs, 'schedule.decay_epochs': [1, 1.5]}))
  validation.validate(edited(SYNTHETIC, {'num_train_steps': 10, 'profile.steps': [10, 20],
                                         'schedule.name': 'step', 'schedule.decay_epochs': [50]}))
  validation.validate(edited(SYNTHETIC, {**epochs, 'schedule.name': 'cosine', 'schedule.decay_epochs': []}))


@pytest.mark.parametrize('name', ['cosine', 'constant'])
def test_decay_epochs_with_a_schedule_without_decays_is_refused_naming_the_field_and_the_schedule(name):
  """Only the step schedule decays at `decay_epochs`: set with the cosine or the constant schedule it would be
  ignored, so it is refused, one line naming the field and the schedule, with the config's other problems."""
  assert problems(edited(SYNTHETIC, {'schedule.name': name, 'schedule.decay_epochs': [1, 2],
                                     'batch_size': -1})) == [
      'batch_size must be positive, got -1',
      f"schedule.decay_epochs=(1, 2) is read by the step schedule only: schedule.name={name!r} ignores it; set "
      "schedule.name='step' for those decays, or schedule.decay_epochs=() for none"]


@pytest.mark.parametrize('name', ['cosine', 'constant'])
def test_a_decay_factor_set_with_a_schedule_without_decays_is_refused_and_the_default_is_not(name):
  """`decay_factor` other than its default with the cosine or constant schedule would be ignored: refused in one
  line naming the field and the schedule; the default (which every config carries) and the step schedule pass."""
  assert problems(edited(SYNTHETIC, {'schedule.name': name, 'schedule.decay_factor': 0.5})) == [
      f"schedule.decay_factor=0.5 is read by the step schedule only: schedule.name={name!r} ignores it; set "
      "schedule.name='step' (with schedule.decay_epochs), or leave schedule.decay_factor at 0.1"]
  assert validation.problems(edited(SYNTHETIC, {'schedule.name': name})) == []
  assert validation.problems(edited(SYNTHETIC, {'schedule.name': 'step', 'schedule.decay_factor': 0.5})) == []
  assert validation.problems(edited(SYNTHETIC, {'schedule.name': name, 'schedule.decay_factor': 0.5}),
                             purpose='eval') == []
