"""The reliability tests' shared runs, made once per test process (per xdist worker) and read only: tests change
copies. `tiny_train_data`: tests/train's tiny synthetic dataset (48 train / 10 test clips); `trained_8_steps`: a
real `vvt train` of tests/train/tiny_config.py on it with checkpoints at steps 4 and 8, through the CLI's
`main(argv)` in the test process (the run is what the tests read, not its process: they start their own)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'train'))
import train_helpers  # noqa: E402


@pytest.fixture(scope='session')
def tiny_train_data(tmp_path_factory):
  return train_helpers.write_tiny_dataset(tmp_path_factory.mktemp('tiny_synthetic'))


@pytest.fixture(scope='session')
def trained_8_steps(tmp_path_factory, tiny_train_data):
  """The workdir of a finished run (`train_helpers.ARGS_8_STEPS`) with intact checkpoints at steps 4 and 8."""
  from vvt.train import checkpoints
  wd = tmp_path_factory.mktemp('trained') / 'run'
  train_helpers.vvt_main('train', '--config', f'{train_helpers.TINY}:{tiny_train_data}', '--workdir', str(wd),
                         *train_helpers.ARGS_8_STEPS)
  assert checkpoints.all_steps(str(wd)) == [4, 8]
  return str(wd)


@pytest.fixture(scope='module')
def tiny_data(tiny_train_data):
  """`tiny_train_data` under the name the reliability tests read."""
  return tiny_train_data


@pytest.fixture(scope='module')
def trained(trained_8_steps):
  """`trained_8_steps` under the name the reliability tests read: a real run with intact checkpoints at steps 4
  and 8 (read only: tests change copies)."""
  return trained_8_steps
