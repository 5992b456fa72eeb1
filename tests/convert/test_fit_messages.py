"""Weights that do not fit a model: the message lists its problems on one line (the first `weight_files.LISTED`, then
how many more), also when it is wrapped to name the file and when a command prints it; never a bare `...` or a
count without its list."""
import numpy as np
import pytest

from vvt.cli import common as cli_common
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models


def _cfg():
  return vvt.models.get_config('vivit', attention='spatiotemporal', hidden_size=16, num_layers=1, num_heads=2,
                               mlp_dim=32, num_frames=2, image_size=16, tubelet=(2, 8, 8), num_classes=3)


def test_converted_parameters_that_do_not_fit_list_every_problem_in_one_line():
  params = {'embedding': {'conv': {'kernel': np.zeros((2, 8, 8, 3, 8)), 'bias': np.zeros(16)}},
            'extra': {'w': np.zeros(3)}}
  with pytest.raises(ValueError) as info:
    with weight_files.naming_file('/x/model.safetensors', 'its weights do not fit the model'):
      video.check_params(params, _cfg())
  msg = str(info.value)
  assert '\n' not in msg and '...' not in msg
  assert msg.startswith('/x/model.safetensors: its weights do not fit the model: converted parameters do not fit '
                        'the model (')
  n = int(msg.split('the model (')[1].split(' ')[0])
  assert n > weight_files.LISTED  # every missing parameter of the model, the extra one, the wrong shape
  assert 'embedding/conv/kernel: model expects (2, 8, 8, 3, 16), converted (2, 8, 8, 3, 8)' in msg
  assert msg.count('; ') == weight_files.LISTED and msg.endswith(f'; and {n - weight_files.LISTED} more')


def test_a_short_list_is_given_whole():
  e = weight_files.FitError('video checkpoint f.safetensors does not fit the model', ['  a: x', '  b: y'],
                           'mismatch(es)')
  assert str(e) == 'video checkpoint f.safetensors does not fit the model (2 mismatch(es)): a: x; b: y'
  assert e.items == ('a: x', 'b: y')


def test_a_long_error_message_says_how_many_lines_it_leaves_out():
  line = cli_common.one_line(ValueError('head (6 problem(s)):\n  a\n  b\n  c\n  d\n  e\n  f'))
  assert line == 'head (6 problem(s)): a b (and 4 more lines: --verbose shows them)'
