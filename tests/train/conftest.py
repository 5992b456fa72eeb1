import pytest
import train_helpers as common


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory):
  """A tiny synthetic motion dataset (48 train / 10 test clips), once per worker."""
  return common.write_tiny_dataset(tmp_path_factory.mktemp('tiny_synthetic'))
