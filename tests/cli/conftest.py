"""A tiny synthetic dataset for the command tests."""
import pytest


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory):
  from vvt.data import synthetic  # pylint: disable=g-import-not-at-top
  out = tmp_path_factory.mktemp('tiny_synthetic')
  synthetic.write_synthetic(str(out), num_classes=4, train_clips=24, test_clips=8, num_frames=16,
                            frame_size=64, seed=1, train_shards=2, test_shards=1)
  return str(out)
