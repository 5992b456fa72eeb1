"""Every config file builds its model (abstractly) and validates; config errors name the field."""
import glob
import os

import jax
import pytest
from ml_collections import config_flags

import train_helpers as common
from vvt.train import cli, defaults, trainer
from vvt.train import mesh as mesh_lib

CONFIGS = sorted(glob.glob(str(common.REPO / 'configs' / '**' / '*.py'), recursive=True))
CASES = []
for _f in CONFIGS:
  _args = {'timesformer_b.py': [None, 'hr', 'l'], 'xvit_b.py': [None, '8', '16']}.get(
      os.path.basename(_f), [None]) if 'kinetics400' in _f else [None]
  CASES += [(_f, a) for a in _args]

SCHEMES = ('divided', 'space', 'joint', 'spatiotemporal', 'factorised_encoder',
           'factorised_self_attention', 'factorised_dot_product', 'local_global', 'axial',
           'space_time_mixing')


def load(path, arg=None):
  mod = config_flags.config_flags._LoadConfigModule(os.path.basename(path), path)  # pylint: disable=protected-access
  return mod.get_config(arg)


def test_every_scheme_has_a_synthetic_config():
  names = {os.path.basename(f)[:-3] for f in CONFIGS if '/synthetic/' in f}
  assert set(SCHEMES) <= names


@pytest.mark.parametrize('path,arg', CASES,
                         ids=[f'{os.path.relpath(p, common.REPO)}:{a}' for p, a in CASES])
def test_config_builds_and_validates(path, arg):
  c = load(path, arg)
  defaults.validate(c)
  module, abstract = trainer.abstract_params(c, mesh_lib.make_mesh())  # jax.eval_shape only
  n = sum(x.size for x in jax.tree.leaves(abstract))
  if '/synthetic/' in path:
    assert n < 1_000_000
    assert c.model.attention == os.path.basename(path)[:-3]
  else:
    assert n > 80_000_000  # the papers' B and L models
    views = c.dataset.num_test_clips * c.dataset.num_spatial_crops
    family = c.model.family
    assert views == {'vivit': 12, 'timesformer': 3, 'xvit': 3}[family] or 'epic' in path
  if '/ssv2/' in path:
    assert not c.dataset.horizontal_flip
  if 'epic_kitchens' in path:
    assert dict(c.model.num_classes) == {'verb': 97, 'noun': 300}


def test_paper_recipes():
  t = load(str(common.REPO / 'configs/kinetics400/timesformer_b.py'))
  assert (t.optimizer.name, t.schedule.name, tuple(t.schedule.decay_epochs), t.num_epochs) == (
      'sgd', 'step', (11, 14), 15.0)
  hr = load(str(common.REPO / 'configs/kinetics400/timesformer_b.py'), 'hr')
  assert (hr.model.num_frames, hr.model.image_size) == (16, 448)
  assert load(str(common.REPO / 'configs/kinetics400/timesformer_b.py'), 'l').model.num_frames == 96
  v = load(str(common.REPO / 'configs/kinetics400/vivit_b_fe.py'))
  assert (v.optimizer.name, v.schedule.name, v.model.attention) == ('sgd', 'cosine',
                                                                    'factorised_encoder')
  assert v.init_from is not None
  assert load(str(common.REPO / 'configs/kinetics400/xvit_b.py'), '16').model.num_frames == 16
  s = load(str(common.REPO / 'configs/ssv2/vivit_l_fe.py'))
  assert s.loss.label_smoothing > 0 and s.loss.mixup_alpha > 0 and s.model.stochastic_depth > 0
  assert s.dataset.randaugment is not None
  with pytest.raises(ValueError, match='unknown variant'):
    load(str(common.REPO / 'configs/kinetics400/timesformer_b.py'), 'xl')


def test_unknown_field_in_a_config_names_it(tiny_data):
  c = common.tiny_config(tiny_data)
  c.optimizer.learning_rate = 0.1
  with pytest.raises(ValueError, match=r"unknown config field 'optimizer.learning_rate'"):
    defaults.validate(c)
  c = common.tiny_config(tiny_data)
  c.schedule.warmup_epoch = 1.0
  with pytest.raises(ValueError, match=r'did you mean schedule.warmup_epochs'):
    defaults.validate(c)
  c = common.tiny_config(tiny_data)
  c.model.num_layer = 3  # the model's own validation names it
  with pytest.raises(ValueError, match='model.num_layer'):
    trainer.abstract_params(c, mesh_lib.make_mesh())


def test_unknown_override_on_the_command_line_names_it(tiny_data, tmp_path, capsys):
  rc = cli.train_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(tmp_path),
                       '--config.optimizer.nme=sgd'])
  assert rc == 2
  assert 'nme' in capsys.readouterr().err


@pytest.mark.parametrize('field,value,message', [
    ('model.num_frames', 4, 'model.num_frames=4 differs from dataset.num_frames=8'),
    ('batch_size', 10, 'batch_size=10 is not divisible by optimizer.accumulation_steps=4'),
    ('eval.average', 'mean', "eval.average must be 'logits' or 'softmax'"),
    ('loss.label_smoothing', 1.5, 'loss.label_smoothing must be in'),
])
def test_impossible_combinations_fail_before_compiling(tiny_data, tmp_path, capsys, field,
                                                       value, message):
  args = ['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(tmp_path),
          f'--config.{field}={value}']
  if field == 'batch_size':
    args.append('--config.optimizer.accumulation_steps=4')
  assert cli.train_main(args) == 1
  assert message in capsys.readouterr().err
  assert not os.path.exists(tmp_path / 'checkpoints')


def test_missing_dataset_path_names_the_path(tmp_path, capsys):
  missing = tmp_path / 'no_such_dataset'
  rc = cli.train_main(['--config', f'{common.TINY}:{missing}', '--workdir',
                       str(tmp_path / 'wd')])
  err = capsys.readouterr().err
  assert rc == 1
  assert 'dataset.train_files' in err and str(missing) in err
