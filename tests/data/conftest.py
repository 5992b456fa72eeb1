"""Fixtures of the data tests: tiny datasets written into tmp dirs."""
import pytest

from vvt.data import synthetic

from data_helpers import write_labelled_files


@pytest.fixture(scope='session')
def synthetic_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp('synthetic')
  info = synthetic.write_synthetic(str(out), num_classes=4, train_clips=40,
                                   test_clips=10, num_frames=16, frame_size=32,
                                   train_shards=3, test_shards=2)
  return info


@pytest.fixture(scope='session')
def labelled_dir(tmp_path_factory):
  out = tmp_path_factory.mktemp('labelled')
  files = write_labelled_files(str(out))
  return str(out), files
