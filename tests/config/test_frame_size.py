"""image_size = (H, W): a pair from a config or the command line resolves once to (H, W) in every spec; a square
config keeps its int; a size the tubelet does not divide, or no size at all, is refused naming the field."""
import json

import pytest

from tests.conftest import REPO
from vvt.config import loader
from vvt.config import run_spec
from vvt.config.errors import ConfigError

SYNTHETIC = str(REPO / 'configs/synthetic.py')  # tubelet (2, 8, 8), 8 frames of 32 x 32
FITS = ('dataset.train_min_resize=48', 'dataset.train_max_resize=56', 'dataset.eval_resize=48')


def load(*overrides):
  return loader.load(SYNTHETIC, [tuple(o.split('=', 1)) for o in overrides], files=(), init=False)


@pytest.mark.parametrize('written', ['(48,40)', '48,40', '[48, 40]'])
def test_a_pair_from_the_command_line_resolves_to_h_w_everywhere(written):
  config = load('num_classes=4', f'image_size={written}', *FITS)
  assert config.image_size == config.model.image_size == config.dataset.image_size == (48, 40)
  run = run_spec.resolve(config)
  assert run.image_size == run.model.image_size == run.data.image_size == (48, 40)
  assert run.model.grid == (4, 6, 5)  # (8 / 2, 48 / 8, 40 / 8)
  assert json.loads(run.config)['image_size'] == [48, 40]


def test_a_square_config_keeps_its_int():
  config = load('num_classes=4')
  run = run_spec.resolve(config)
  assert config.image_size == 32 and json.loads(run.config)['image_size'] == 32
  assert run.image_size == run.model.image_size == run.data.image_size == (32, 32)


def test_every_problem_of_a_frame_size_is_one_line_naming_the_field():
  with pytest.raises(ConfigError) as info:
    run_spec.resolve(load('num_classes=4', 'image_size=(48,41)', *FITS))
  assert info.value.problems == ('model.image_size=(48, 41): W=41 is not divisible by the patch width 8',)
  with pytest.raises(ConfigError) as info:
    run_spec.resolve(load('num_classes=4', 'image_size=(41,48)', 'dataset.eval_resize=40',
                          'dataset.train_min_resize=48', 'dataset.train_max_resize=56'))
  assert info.value.problems == (
      "dataset.eval_resize=40 is smaller than the longer side 48 of the crop image_size=(41, 48) (the frame's "
      'shorter side is resized to it, and the crop must fit either way round)',
      'model.image_size=(41, 48): H=41 is not divisible by the patch height 8')
  for bad in ('(48,40,3)', '(48,0)', "'big'"):
    with pytest.raises(ConfigError) as info:
      run_spec.resolve(load('num_classes=4', f'image_size={bad}', 'batch_size=0'))
    shown = {'(48,40,3)': '(48, 40, 3)', '(48,0)': '(48, 0)', "'big'": "'big'"}[bad]
    assert info.value.problems == (
        'batch_size must be positive, got 0',
        f'image_size must be a positive int (square frames) or a pair (H, W) of positive ints, got {shown}')
