"""Fixtures of the data tests: tiny datasets written into tmp dirs."""
import os

from data_helpers import VIDEO_CLASSES as CLASSES
from data_helpers import make_video
from data_helpers import write_labelled_files
import pytest

from vvt.data.writing import synthetic


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


@pytest.fixture
def video_dir(tmp_path):
  colours = {'red': (220, 20, 20), 'green': (20, 220, 20), 'blue': (20, 20, 220)}
  lines = ['path,label,participant']
  for i, name in enumerate(['red', 'green', 'blue', 'green', 'red', 'blue']):
    make_video(str(tmp_path / f'v{i}.mp4'), colours[name], num_frames=8 + i)
    lines.append(f'v{i}.mp4,{name},p{i % 2}')
  (tmp_path / 'corrupt.mp4').write_bytes(b'\x00\x00\x00\x18ftypmp42' + os.urandom(300))
  lines += ['corrupt.mp4,red,p0', 'missing.mp4,blue,p1', 'v0.mp4,purple,p0',
            'v1.mp4,1,p1']
  (tmp_path / 'videos.csv').write_text('\n'.join(lines) + '\n')
  (tmp_path / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')
  return tmp_path
