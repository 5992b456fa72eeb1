"""Every config file (and ARG variant) loads through the one loader, validates, and builds its model
abstractly; the synthetic config covers every scheme; impossible combinations fail before compiling."""
import json
import os
import sys

import jax
import jax.numpy as jnp
import pytest

from configs import common as configs_common
from tests.conftest import REPO
from vvt.cli import train as train_cli
from vvt.config import loader
from vvt.config.errors import ConfigError
import vvt.models

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import train_helpers as common  # noqa: E402

# fine-tuning recipes (the pretraining ones, videomae_*.py: tests/tasks/test_mae.py)
PAPER = sorted(p for p in (REPO / 'configs').glob('*/*.py') if p.name != '__init__.py'
               and not p.name.startswith('videomae'))
ARGS = {'timesformer_b.py': [None, 'hr', 'l'], 'xvit_b.py': [None, '8', '16'], 'vivit_l_fe.py': [None, '128']}
CASES = [(str(p), a) for p in PAPER for a in (ARGS.get(p.name, [None]) if 'kinetics400' in str(p) else [None])]
SCHEMES = tuple(configs_common.SYNTHETIC_SCHEMES)


def load(path, arg=None):
  return loader.load(path + (f':{arg}' if arg else ''), files=(), init=False)


_BACKBONES = {}


def n_params(config):
  """Parameters of the model; built once per backbone (the Kinetics-600, Diving-48, ... configs reuse the
  Kinetics-400 models with another classifier): the count of the first config built."""
  model = {k: v for k, v in config.model.to_dict().items() if k != 'num_classes'}
  key = json.dumps([model, config.num_frames, config.image_size], sort_keys=True, default=str)
  if key not in _BACKBONES:
    module = vvt.models.build(config.model)
    shape = (1, config.num_frames, config.image_size, config.image_size, 3)
    variables = jax.eval_shape(lambda r: module.init({'params': r}, jnp.zeros(shape), train=False),
                               jax.random.key(0))
    _BACKBONES[key] = sum(x.size for x in jax.tree.leaves(variables['params']))
  return _BACKBONES[key]


@pytest.mark.parametrize('path,arg', CASES, ids=[f'{os.path.relpath(p, REPO)}:{a}' for p, a in CASES])
def test_paper_config_loads_validates_and_builds(path, arg):
  c = load(path, arg)
  assert n_params(c) > 80_000_000  # the papers' B and L models
  if c.task.name == 'jepa':  # pretraining (configs/videomix/vjepa.py): evaluated by its loss, no test views
    assert c.num_train_steps > 0 and c.task.jepa.mask_sets == ((8, 0.15), (2, 0.7))
    return
  views = (c.dataset.num_test_clips, c.dataset.num_spatial_crops)
  # ViViT: 4 views in the ablations (K400 ViViT-B, 32-frame ViViT-L), 3 crops each in the state-of-the-art
  # comparison (Table 5: 128-frame ViViT-L on K400, ViViT-H, K600, MiT, SSv2, Epic). TimeSformer on HowTo100M:
  # as many non-overlapping clips as cover each video (sec. 4.6), 3 crops each.
  ablation = path.endswith(('kinetics400/vivit_b_fe.py', 'kinetics400/vivit_l_fe.py'))
  vivit = (1, 3) if arg == '128' else (4, 1) if ablation else (4, 3)
  timesformer = ('all', 3) if 'howto100m' in path else (1, 3)
  assert views == {'vivit': vivit, 'timesformer': timesformer, 'xvit': (1, 3)}[c.model.family]
  if '/ssv2/' in path:  # TimeSformer and X-ViT switch the flip off on SSv2; ViViT keeps Table 3's flip
    assert c.dataset.horizontal_flip == (c.model.family == 'vivit')
  # A clip longer than its video: ViViT (DMVR) loops, the TimeSformer and X-ViT loaders repeat the last frame.
  assert c.dataset.short_video_policy == ('loop' if c.model.family == 'vivit' else 'pad')
  if c.model.family == 'xvit':
    assert c.dataset.autoaugment == 'imagenet' and c.dataset.randaugment is None
  if 'epic_kitchens' in path:
    assert dict(c.model.num_classes) == {'verb': 97, 'noun': 300}


@pytest.mark.parametrize('scheme', SCHEMES)
def test_synthetic_config_of_every_scheme(scheme):
  c = load(str(REPO / 'configs/synthetic.py'), scheme)
  assert c.model.attention == scheme and n_params(c) < 1_000_000
  assert c.class_names == ('down', 'up', 'down_and_back', 'up_and_back')


def test_synthetic_config_argument_errors():
  with pytest.raises(ConfigError, match="unknown scheme 'diagonal'"):
    load(str(REPO / 'configs/synthetic.py'), 'diagonal')
  with pytest.raises(ConfigError, match="config argument 'frames' is not one of scheme, data_dir"):
    load(str(REPO / 'configs/synthetic.py'), 'frames=3')


def test_paper_recipes():
  t = load(str(REPO / 'configs/kinetics400/timesformer_b.py'))
  assert (t.optimizer.name, t.schedule.name, tuple(t.schedule.decay_epochs)) == ('sgd', 'step', (11, 14))
  hr = load(str(REPO / 'configs/kinetics400/timesformer_b.py'), 'hr')
  assert (hr.model.num_frames, hr.model.image_size, hr.dataset.image_size) == (16, 448, 448)
  v = load(str(REPO / 'configs/kinetics400/vivit_b_fe.py'))
  assert (v.optimizer.name, v.schedule.name, v.model.attention) == ('sgd', 'cosine', 'factorised_encoder')
  assert v.init_from is not None
  assert load(str(REPO / 'configs/kinetics400/xvit_b.py'), '16').dataset.num_frames == 16
  s = load(str(REPO / 'configs/ssv2/vivit_l_fe.py'))
  assert s.loss.label_smoothing > 0 and s.loss.mixup_alpha > 0 and s.model.stochastic_depth > 0
  assert s.dataset.randaugment is not None


@pytest.mark.parametrize('field,value,message', [
    ('batch_size', 10, 'batch_size=10 is not divisible by optimizer.accumulation_steps=4'),
    ('eval.average', 'mean', "eval.average must be one of 'logits', 'softmax'"),
    ('loss.label_smoothing', 1.5, 'loss.label_smoothing must be in [0, 1)'),
    ('optimizer.nme', 'sgd', "unknown config field 'optimizer.nme'"),
])
def test_impossible_combinations_fail_before_compiling(tiny_data, tmp_path, capsys, field, value, message):
  args = ['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(tmp_path), f'--config.{field}={value}']
  if field == 'batch_size':
    args.append('--config.optimizer.accumulation_steps=4')
  assert train_cli.train_main(args) == 2
  assert message in capsys.readouterr().err
  assert not os.path.exists(tmp_path / 'checkpoints')


def test_missing_dataset_path_names_the_path(tmp_path, capsys):
  missing = tmp_path / 'no_such_dataset'
  assert train_cli.train_main(['--config', f'{common.TINY}:{missing}', '--workdir', str(tmp_path / 'wd')]) == 2
  err = capsys.readouterr().err
  assert 'dataset.train_files' in err and str(missing) in err
