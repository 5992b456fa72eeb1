"""Fault classes 1 (data side) and 3: nothing silent in the data.

* evaluation under on_error='skip': a bad video keeps its rows with mask 0 and its index, so the evaluator can
  leave it out and count it; every good video keeps all its views (over 1 and 2 hosts);
* frames of different sizes in one video are a bad record (named, or counted as `frame_sizes`), even when
  the odd frame is not among the sampled ones;
* a truncated file is counted once however often it is indexed;
* the synthetic dataset is byte-identical across processes with the same seed.
"""
import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from vvt.data import pipeline
from vvt.data.reading import errors
from vvt.data.reading.errors import DataError
from vvt.data.writing import dmvr_records

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'data'))
from data_helpers import jpeg
from data_helpers import small_config
from data_helpers import solid_video

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM = 9
BAD = (2, 6)  # one corrupt JPEG video, one with frames of two sizes


def _mixed_sizes(value):
  frames = solid_video(value, 8)
  frames[7] = jpeg(np.full((20, 32, 3), value, np.uint8))  # 24x32 elsewhere: caught from the headers, sampled or not
  return frames


def _corrupt(value):
  frames = solid_video(value, 8)
  frames[0] = frames[0][:30] + b'\x00garbage' * 20
  return frames


@pytest.fixture
def data_file(tmp_path):
  records = []
  for k in range(NUM):
    label = k % 3
    frames = _corrupt(20 * label + 10) if k == BAD[0] else (
        _mixed_sizes(20 * label + 10) if k == BAD[1] else solid_video(20 * label + 10, 8))
    records.append(dmvr_records.encode_sequence_example(frames, label, video_id=f'v{k}'))
  path = str(tmp_path / 'data.tfrecord')
  dmvr_records.write_records(path, records)
  return path


def _cfg(path, **kw):
  return small_config(path, path, num_classes=3, num_test_clips=2, num_spatial_crops=1,
                      normalization='zero_centre', **kw)


@pytest.mark.parametrize('hosts', [1, 2])
def test_eval_skip_reports_skipped_videos_and_keeps_every_view_of_the_rest(data_file, hosts):
  cfg = _cfg(data_file, on_error='skip')
  before = errors.error_counts()
  views, skipped, labels = {}, set(), {}
  for p in range(hosts):
    for b in pipeline.make_eval_iterator(cfg, 'test', 4 * hosts, process_index=p, process_count=hosts):
      real = b['mask'] == 1
      for v, view, lab in zip(b['video_index'][real], b['view_index'][real], b['label'][real], strict=True):
        views.setdefault(int(v), []).append(int(view))
        labels[int(v)] = int(lab)
      skipped.update(pipeline.skipped_videos(b).tolist())
  after = errors.error_counts()
  assert sorted(skipped) == list(BAD)
  assert sorted(views) == [k for k in range(NUM) if k not in BAD]
  assert all(sorted(v) == [0, 1] for v in views.values())  # every view of every good video, once
  assert all(labels[k] == k % 3 for k in views)
  assert after['corrupt'] - before['corrupt'] == 1
  assert after['frame_sizes'] - before['frame_sizes'] == 1
  # An evaluator's accounting: videos evaluated + skipped = all videos, none lost.
  assert len(views) + len(skipped) == pipeline.num_videos(cfg, 'test') == NUM


def test_frames_of_different_sizes_are_named_in_raise_mode(tmp_path):
  records = [dmvr_records.encode_sequence_example(solid_video(10, 8), 0),
             dmvr_records.encode_sequence_example(_mixed_sizes(30), 1)]
  path = str(tmp_path / 'sizes.tfrecord')
  dmvr_records.write_records(path, records)
  with pytest.raises(DataError, match=f'{path}: record 1: frames differ in size: frame 0 is 24x32, '
                                      'frame 7 is 20x32'):
    it = pipeline.make_train_iterator(_cfg(path), 2, process_index=0, process_count=1)
    next(it)
  with pytest.raises(DataError, match='record 1: frames differ in size'):
    list(pipeline.make_eval_iterator(_cfg(path), 'test', 2, process_index=0, process_count=1))


def test_frames_of_different_sizes_never_reach_training(data_file):
  cfg = _cfg(data_file, on_error='skip')
  before = errors.error_counts()['frame_sizes']
  it = pipeline.make_train_iterator(cfg, NUM - len(BAD), process_index=0, process_count=1)
  batch = next(it)
  grey = batch['inputs'][:, 0].mean(axis=(1, 2, 3))
  # Every clip of the epoch is a good video, its pixels those of its label.
  np.testing.assert_array_equal(np.round((grey - 11.5) / 20), batch['label'])
  assert errors.error_counts()['frame_sizes'] > before


def test_a_truncated_file_is_counted_once(tmp_path):
  records = [dmvr_records.encode_sequence_example(solid_video(10, 4), 0) for _ in range(3)]
  path = str(tmp_path / 'cut.tfrecord')
  dmvr_records.write_records(path, records)
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) - 50)
  cfg = _cfg(path, on_error='skip')
  before = errors.error_counts()['truncated_files']
  pipeline.num_videos(cfg, 'test')
  list(pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1))
  pipeline.make_train_iterator(cfg, 2, process_index=0, process_count=1)
  assert errors.error_counts()['truncated_files'] == before + 1


def test_synthetic_dataset_is_byte_identical_across_processes(tmp_path):
  """Two processes (different hash seeds, as any two runs) write the same bytes for the same seed: this one
  (`vvt data synthetic` through `main(argv)`) and a `vvt` process of another hash seed."""
  from tests.command_output import main_in_repo
  args = ['data', 'synthetic', '--classes', '3', '--train-clips', '12', '--test-clips', '4', '--frame-size', '16',
          '--frames', '4', '--train-shards', '2', '--test-shards', '1']
  assert main_in_repo([*args, '--output', str(tmp_path / 'a')]) == 0
  other_seed = '2' if os.environ.get('PYTHONHASHSEED') == '1' else '1'  # never this process's, if it has one
  env = dict(os.environ, PYTHONPATH=REPO, PYTHONHASHSEED=other_seed, TF_CPP_MIN_LOG_LEVEL='3')
  subprocess.run([sys.executable, '-m', 'vvt', *args, '--output', str(tmp_path / 'b')], cwd=REPO, env=env,
                 check=True, capture_output=True, timeout=300)
  digests = [{name: hashlib.sha256((tmp_path / run / name).read_bytes()).hexdigest()
              for name in sorted(os.listdir(tmp_path / run)) if name.endswith('.tfrecord')} for run in 'ab']
  assert len(digests[0]) == 3 and digests[0] == digests[1]
