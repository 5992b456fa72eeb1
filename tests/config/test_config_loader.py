"""The one config loader: every override form, the shared fields, FILE:ARG / config.json / run dirs, runlocal."""
import json
import os

import ml_collections
import pytest

from tests.config.config_files import SYNTHETIC
from tests.config.config_files import VIVIT_B
from tests.config.config_files import load
from tests.conftest import REPO
from vvt.config import overrides as overrides_lib
from vvt.config import resume
from vvt.config import schema
from vvt.config.errors import ConfigError

TSF = str(REPO / 'configs/kinetics400/timesformer_b.py')
EPIC = str(REPO / 'configs/epic_kitchens/vivit_l_fe.py')


def test_split_argv_forms():
  spec, overrides, rest = overrides_lib.split_argv(
      ['--config', 'a.py:x', '--config.batch_size=8', '--config.model.variant', 'Ti/16', '--workdir', 'w'])
  assert spec == 'a.py:x' and rest == ['--workdir', 'w']
  assert overrides == [('batch_size', '8'), ('model.variant', 'Ti/16')]
  assert overrides_lib.split_argv(['--config=b.py'])[0] == 'b.py'


@pytest.mark.parametrize('override,path,expected', [
    ('batch_size=8', 'batch_size', 8),
    ('schedule.base_lr=1', 'schedule.base_lr', 1.0),              # an int where a float is expected
    ('optimizer.nesterov=true', 'optimizer.nesterov', True),
    ('optimizer.nesterov=False', 'optimizer.nesterov', False),
    ('model.hidden_size=96', 'model.hidden_size', 96),            # None in the file
    ('model.variant=Ti/16', 'model.variant', 'Ti/16'),            # text stays text
    ('dataset.train_files=a/b-*.tfrecord', 'dataset.train_files', 'a/b-*.tfrecord'),
    ('model.tubelet=1,8,8', 'model.tubelet', (1, 8, 8)),          # None in the file, tuple given
    ('model.tubelet=(2,16,16)', 'model.tubelet', (2, 16, 16)),
    ('schedule.decay_epochs=10,20', 'schedule.decay_epochs', (10, 20)),
    ('schedule.decay_epochs=7', 'schedule.decay_epochs', (7,)),
    ('init_from=None', 'init_from', None),                         # a whole section
    ('init_from=null', 'init_from', None),
    ('dataset.randaugment={"num_layers": 2, "magnitude": 9}', 'dataset.randaugment.magnitude', 9),
    ('init_from.reinit_head=False', 'init_from.reinit_head', False),
])
def test_override_forms(override, path, expected):
  step = ('schedule.name=step',) if path == 'schedule.decay_epochs' else ()  # the one schedule that reads it
  c = load(VIVIT_B, *step, override)
  node = c
  for part in path.split('.'):
    node = node[part]
  assert node == expected and type(node) is type(expected)


def test_a_field_of_a_none_section_creates_it_from_its_defaults():
  c = load(SYNTHETIC, 'init_from.checkpoint=vit.npz')
  assert c.init_from.checkpoint == 'vit.npz' and c.init_from.format == 'auto'


def test_dict_valued_shared_field():
  c = load(VIVIT_B, "num_classes={'verb': 3, 'noun': 5}",
           "dataset.label_keys={'verb': 'v', 'noun': 'n'}")
  assert dict(c.model.num_classes) == {'verb': 3, 'noun': 5} == dict(c.dataset.num_classes)


@pytest.mark.parametrize('override', ['image_size=64', 'model.image_size=64', 'dataset.image_size=64'])
def test_shared_fields_are_stated_once(override):
  """Any spelling moves the model and the data together."""
  c = load(VIVIT_B, override, 'dataset.train_min_resize=72', 'dataset.train_max_resize=80',
           'dataset.eval_resize=72')
  assert c.image_size == c.model.image_size == c.dataset.image_size == 64


def test_the_issue_one_liner_shrinks_a_paper_config():
  c = load(VIVIT_B, 'model.variant=Ti/16', 'model.num_frames=8', 'image_size=64', 'init_from=None')
  assert (c.num_frames, c.model.num_frames, c.dataset.num_frames) == (8, 8, 8)
  assert (c.model.image_size, c.dataset.image_size, c.init_from) == (64, 64, None)


def test_file_arg_variants():
  assert load(TSF + ':hr').image_size == 448
  assert load(TSF + ':l').dataset.num_frames == 96
  assert load(SYNTHETIC + ':space').model.attention == 'space'
  # data that is not there names no classes: num_classes is then given
  assert load(SYNTHETIC + ':scheme=joint,data_dir=x', 'num_classes=4').dataset.train_files.startswith('x/')
  with pytest.raises(ConfigError, match='num_classes is not set and the data names no classes'):
    load(SYNTHETIC + ':scheme=joint,data_dir=x')


def test_saved_config_json_and_run_directory_round_trip(tmp_path):
  c = load(EPIC, 'batch_size=32')
  (tmp_path / 'config.json').write_text(c.to_json_best_effort(indent=2))
  for spec in (str(tmp_path / 'config.json'), str(tmp_path)):
    back = load(spec)
    assert resume.differences(c, back) == []
    assert isinstance(back.model.tubelet, (tuple, type(None))) and isinstance(back.dataset.label_keys, dict)
    moved = load(spec, 'num_frames=16')          # the links come back after JSON
    assert moved.model.num_frames == moved.dataset.num_frames == 16


def test_runlocal_makes_every_paper_config_small():
  for path in sorted((REPO / 'configs').glob('*/*.py')):
    if path.name == '__init__.py':
      continue
    c = load(str(path), 'runlocal=True', 'batch_size=4')   # later overrides still apply
    assert (c.num_frames, c.image_size, c.model.num_layers, c.model.hidden_size) == (8, 32, 2, 64), path
    assert c.init_from is None and c.batch_size == 4 and c.num_train_steps == 200
    assert c.dataset.train_files.startswith(schema.SYNTHETIC_DIR)


# --------------------------------------------------------------------------- errors: one line naming the field


def _error(spec, *overrides, **kw):
  """Every problem of the config, one line each, joined by newlines."""
  with pytest.raises(ConfigError) as info:
    load(spec, *overrides, **kw)
  assert all('\n' not in line for line in info.value.problems)
  return '\n'.join(info.value.problems)


@pytest.mark.parametrize('override,message', [
    ('optimizer.nme=sgd', "unknown config field 'optimizer.nme'"),
    ('model.stochastic_dept=0.1', 'did you mean --config.model.stochastic_depth'),
    ('dataset.stridee=3', 'did you mean --config.dataset.stride'),
    ('nope.field=1', "unknown config field 'nope'"),
    ('batch_size=abc', '--config.batch_size: expected an integer'),
    ('model.num_layers=2.5', 'model.num_layers'),
    ('optimizer.nesterov=maybe', 'expected True or False'),
    ('schedule.base_lr=fast', 'expected a number'),
    ('batch_size=0', 'batch_size must be positive, got 0'),
    ('log_every_steps=0', 'log_every_steps must be positive'),
    ('checkpoint.every_steps=0', 'checkpoint.every_steps must be positive'),
    ('loss.label_smoothing=1.0', 'loss.label_smoothing must be in [0, 1)'),
    ('optimizer.momentum=-0.1', 'optimizer.momentum must be in [0, 1)'),
    ('dataset.color_jitter=1.5', 'dataset.color_jitter must be in [0, 1]'),
    ('dataset.num_spatial_crops=2', 'dataset.num_spatial_crops must be one of 1, 3'),
    ('eval.average=mean', "eval.average must be one of 'logits', 'softmax'"),
    ('dataset.on_error=ignore', "dataset.on_error must be one of 'raise', 'skip'"),
    ('model.stochastic_depth=1.5', 'model.stochastic_depth'),
    ('model.dropout_rate=-0.5', 'model.dropout_rate'),
    ('model.num_layers=0', 'model.num_layers'),
    ('model.num_heads=0', 'model.num_heads'),
    ('model.num_heads=5', 'not divisible by model.num_heads=5'),
    ('dataset.train_min_resize=400', 'dataset.train_min_resize=400 is larger than'),
    ('image_size=512', 'dataset.train_min_resize=230 is smaller than the crop image_size=512'),
    ('dataset.randaugment={"num_layers": 2, "magnitude": 20}', 'dataset.randaugment.magnitude must be in [0, 10]'),
    ('mesh.num_devices=0', 'mesh.num_devices must be -1 or positive'),
    ('schedule.warmup_steps=5000', 'schedule.warmup_steps=5000 does not fit in num_train_steps=200'),
    ('optimizer.layer_decay=0', 'optimizer.layer_decay must be in (0, 1], got 0'),
    ('optimizer.layer_decay=1.5', 'optimizer.layer_decay must be in (0, 1], got 1.5'),
    ('optimizer.ema_decay=1.0', 'optimizer.ema_decay must be in [0, 1), got 1.0'),
    ('optimizer.ema_decay=-0.1', 'optimizer.ema_decay must be in [0, 1), got -0.1'),
    ('optimizer.ema_decay=fast', 'expected a number'),
    ('dataset.repeated_augmentation=0', 'dataset.repeated_augmentation must be positive, got 0'),
    ('dataset.repeated_augmentation=2.0', '--config.dataset.repeated_augmentation: expected an integer'),
    ('dataset.repeated_augmentation=3', 'batch_size=64 is not divisible by dataset.repeated_augmentation=3'),
])
def test_validation_errors_name_the_field(override, message):
  extra = ('num_train_steps=200',) if 'warmup' in override else ()
  assert message in _error(VIVIT_B, override, *extra)


def test_finetuning_fields_off_values_and_the_per_process_batch():
  """ema_decay None or 0 and layer_decay 1 are off (valid); repeated augmentation must divide every process's
  part of the batch too."""
  from vvt.config import validation
  c = load(VIVIT_B, 'optimizer.ema_decay=None', 'optimizer.layer_decay=1', 'dataset.repeated_augmentation=4')
  assert c.optimizer.ema_decay is None and c.dataset.repeated_augmentation == 4
  validation.validate(c, num_processes=4)  # 64 / 4 = 16 per process: groups of 4 copies fit
  c.batch_size = 8
  with pytest.raises(ConfigError, match=r'the per-process batch batch_size/processes=2 is not divisible '
                                                 r'by dataset.repeated_augmentation=4'):
    validation.validate(c, num_processes=4)


def test_unknown_field_in_a_config_file_is_named_with_a_hint(tmp_path):
  path = tmp_path / 'misspelt.py'
  path.write_text('from configs.kinetics400 import vivit_b_fe\n\n\ndef get_config():\n'
                  '  c = vivit_b_fe.get_config()\n  c.dataset.horizontal_flp = False\n  return c\n')
  assert "unknown config field 'dataset.horizontal_flp' (did you mean dataset.horizontal_flip?)" in _error(
      str(path))
  path.write_text('from configs.kinetics400 import vivit_b_fe\n\n\ndef get_config():\n'
                  '  c = vivit_b_fe.get_config()\n  c.optimizer.learning_rate = 0.1\n  return c\n')
  assert "unknown config field 'optimizer.learning_rate'" in _error(str(path))


def test_bad_files_are_named(tmp_path):
  assert 'config file not found' in _error(str(tmp_path / 'missing.py'))
  broken = tmp_path / 'broken.py'
  broken.write_text('def get_config(:\n')
  assert 'broken.py: SyntaxError' in _error(str(broken))
  (tmp_path / 'none.py').write_text('x = 1\n')
  assert 'has no get_config' in _error(str(tmp_path / 'none.py'))
  (tmp_path / 'bad.json').write_text('{"model": ')
  assert 'is not valid JSON' in _error(str(tmp_path / 'bad.json'))
  assert "unknown variant 'xl'" in _error(TSF + ':xl')


def test_missing_init_checkpoint_and_dataset_are_named():
  assert "init_from.path: no such file 'imagenet21k/ViT-B_16.npz'" in _error(VIVIT_B, init=True)
  message = _error(VIVIT_B, 'init_from=None', files=('train_files', 'eval_files'))
  assert "dataset.train_files: no file matches 'kinetics400/train@1024'" in message


def test_resume_differences_know_what_is_safe():
  a = load(SYNTHETIC)
  b = load(SYNTHETIC, 'eval.batch_size=16', 'log_every_steps=5', 'schedule.base_lr=0.5')
  assert {k for k, _, _ in resume.differences(a, b)} == {
      'eval.batch_size', 'log_every_steps', 'schedule.base_lr'}
  assert resume.unsafe_changes(a, b) == [('schedule.base_lr', 0.001, 0.5)]
  assert isinstance(a, ml_collections.ConfigDict) and os.path.exists(SYNTHETIC)
  assert json.loads(a.to_json_best_effort())['model']['num_frames'] == 8


def test_configs_load_from_any_working_directory(tmp_path, monkeypatch):
  """`--config configs/...` finds vvt's own configs from elsewhere; a configs/ package in the working
  directory wins over vvt's when the file named is there."""
  monkeypatch.chdir(tmp_path)
  assert load('configs/synthetic.py:space').model.attention == 'space'
  assert load('configs/kinetics400/timesformer_b.py:hr').image_size == 448


# --------------------------------------------------------------------------- one spelling, one definition


def test_config_files_set_fields_by_dotted_path():
  from configs import common
  c = common.paper_config(model=dict(family='vivit'), dataset={},
                          train={'batch_size': 8, 'optimizer.name': 'adamw', 'schedule.base_lr': 0.5})
  assert (c.batch_size, c.optimizer.name, c.schedule.base_lr) == (8, 'adamw', 0.5)
  with pytest.raises(ConfigError, match=r"unknown config field 'optimizer.nme' \(did you mean optimizer.name"):
    common.paper_config(model=dict(family='vivit'), dataset={}, train={'optimizer.nme': 'sgd'})


def test_the_dataset_choices_are_the_pipelines_own():
  from vvt.config import validation
  from vvt.data import choices
  for field, values in choices.CHOICES.items():
    assert validation.CHOICES[f'dataset.{field}'] is values
