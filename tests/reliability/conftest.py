"""Fixtures of the reliability tests: the training tests' tiny dataset, and one real run that the tests copy."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'train'))
import train_helpers as common  # noqa: E402

from vvt.train import checkpoints  # noqa: E402

TRAINED_ARGS = ['--config.num_train_steps=8', '--config.checkpoint.every_steps=4', '--config.log_every_steps=4']


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory):
  """A tiny synthetic motion dataset (48 train / 10 test clips), once per worker."""
  return common.write_tiny_dataset(tmp_path_factory.mktemp('tiny_synthetic'))


@pytest.fixture(scope='session')
def trained(tmp_path_factory, tiny_data):
  """A real run (`vvt train`, the tiny config) with intact checkpoints at steps 4 and 8. Read only: the tests
  damage or change copies of it."""
  wd = tmp_path_factory.mktemp('trained') / 'run'
  common.vvt('train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), *TRAINED_ARGS)
  assert checkpoints.all_steps(str(wd)) == [4, 8]
  return str(wd)
