"""A fixture of the reliability tests: a real run that the tests copy, trained on the module's `tiny_data`."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'train'))
import train_helpers as common  # noqa: E402

from vvt.train import checkpoints  # noqa: E402

TRAINED_ARGS = ['--config.num_train_steps=8', '--config.checkpoint.every_steps=4', '--config.log_every_steps=4']


@pytest.fixture(scope='module')
def trained(tmp_path_factory, tiny_data):
  """A real run (`vvt train`, the tiny config, on the module's `tiny_data`) with intact checkpoints at steps 4 and
  8. Read only: the tests damage or change copies of it."""
  wd = tmp_path_factory.mktemp('trained') / 'run'
  common.vvt('train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), *TRAINED_ARGS)
  assert checkpoints.all_steps(str(wd)) == [4, 8]
  return str(wd)
