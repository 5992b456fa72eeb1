"""The video-folder source: video files listed in a CSV, decoded with PyAV at read time, against the TFRecords
`vvt data convert` makes of the same videos (same frames, labels and views; pixels within JPEG's error)."""
import dataclasses
import os
import shutil

from data_helpers import check_source_contract
from data_helpers import small_config
from data_helpers import write_footage
import numpy as np
import pytest

from tests.reliability.test_video_conversion_faults import cut
from tests.reliability.test_video_conversion_faults import make_mp4
from vvt.config import labels as config_labels
from vvt.data import pipeline
from vvt.data.reading import errors
from vvt.data.reading import names
from vvt.data.reading import registry
from vvt.data.reading import skips
from vvt.data.writing import video_shards

LABELS = (0, 1, 2, 0, 1, 2)


@pytest.fixture(scope='module')
def footage(tmp_path_factory):
  """DIR/train.csv of 6 videos and DIR/records/train.tfrecord@1: the same videos converted (no resize, JPEG 95)."""
  d = tmp_path_factory.mktemp('footage')
  csv = write_footage(str(d), LABELS)
  video_shards.convert(csv, str(d / 'records' / 'train'), str(d / 'classes.txt'), num_shards=1, short_side=32,
                       jpeg_quality=95, workers=1, progress=False)
  return d


def _configs(d, **kw):
  """(folder config, TFRecord config) of the same videos."""
  base = dict(num_classes=3, num_frames=4, stride=2, image_size=24, train_min_resize=24, train_max_resize=32,
              eval_resize=24)
  base.update(kw)
  csv, records = str(d / 'train.csv'), str(d / 'records' / 'train.tfrecord@1')
  return (small_config(csv, csv, name='video_folder', **base), small_config(records, records, **base))


def _close(a, b):
  """Same frames (each frame's brightness channel within 3 of the other's mean: frames differ by 20) and pixels
  within JPEG's error."""
  a, b = a.astype(np.float64), b.astype(np.float64)
  np.testing.assert_allclose(a[..., 2].mean(axis=(-1, -2)), b[..., 2].mean(axis=(-1, -2)), atol=3)
  assert np.abs(a - b).mean() < 3 and np.abs(a - b).max() < 60


def test_training_batches_equal_the_tfrecord_batches(footage):
  folder, records = _configs(footage, cache=True, shuffle_buffer=1, horizontal_flip=True)  # both in list order
  a = pipeline.make_train_iterator(folder, 4, seed=3, process_index=0, process_count=1)
  b = pipeline.make_train_iterator(records, 4, seed=3, process_index=0, process_count=1)
  for _ in range(4):  # past an epoch: every video, clips at other random starts, crops and flips
    x, y = next(a), next(b)
    np.testing.assert_array_equal(x['label'], y['label'])
    assert x['inputs'].shape == y['inputs'].shape == (4, 4, 24, 24, 3)
    _close(x['inputs'], y['inputs'])
  a.close()
  b.close()


def test_eval_views_and_padding_equal_the_tfrecord_path(footage):
  folder, records = _configs(footage, num_test_clips=2, num_spatial_crops=3)
  a = list(pipeline.make_eval_iterator(folder, 'test', 5, process_index=0, process_count=1))
  b = list(pipeline.make_eval_iterator(records, 'test', 5, process_index=0, process_count=1))
  assert len(a) == len(b) == 8  # 6 videos x 6 views in batches of 5: 4 rows of padding
  for x, y in zip(a, b, strict=True):
    for key in ('label', 'video_index', 'view_index', 'mask'):
      np.testing.assert_array_equal(x[key], y[key])
    _close(x['inputs'], y['inputs'])
  index = np.concatenate([x['video_index'] for x in a])
  mask = np.concatenate([x['mask'] for x in a])
  np.testing.assert_array_equal(index, np.r_[np.repeat(np.arange(6), 6), [-1] * 4])
  np.testing.assert_array_equal(mask, np.r_[np.ones(36), np.zeros(4)])
  np.testing.assert_array_equal(np.concatenate([x['label'] for x in a])[:36], np.repeat(LABELS, 6))


def test_both_sources_keep_the_contract(footage):
  folder, records = _configs(footage)
  rows = check_source_contract(registry.make_source(folder, 'train'))
  assert [r[3]['id'].decode() for r in rows] == [f'clips/v{i}.mp4' for i in range(6)]
  assert [int(r[3]['label']) for r in rows] == list(LABELS)
  assert {r[0].decode() for r in rows} == {str(footage / 'train.csv')}
  check_source_contract(registry.make_source(records, 'train'))


def test_resuming_gives_the_same_batches(footage):
  folder, _ = _configs(footage, shuffle_buffer=3, horizontal_flip=True)
  fresh = pipeline.make_train_iterator(folder, 4, seed=1, process_index=0, process_count=1)
  want = [next(fresh) for _ in range(5)]  # 20 clips of 6 videos: rows permuted anew each epoch
  fresh.close()
  resumed = pipeline.make_train_iterator(folder, 4, seed=1, start_step=3, process_index=0, process_count=1)
  for k in (3, 4):
    got = next(resumed)
    np.testing.assert_array_equal(got['inputs'], want[k]['inputs'])
    np.testing.assert_array_equal(got['label'], want[k]['label'])
  resumed.close()
  epochs = [sorted(np.concatenate([b['label'] for b in want])[6 * e:6 * e + 6].tolist()) for e in range(3)]
  assert epochs == [sorted(LABELS)] * 3  # every video once per epoch


def test_hosts_read_disjoint_shares(footage):
  folder, _ = _configs(footage)
  seen = []
  for p in range(2):
    it = pipeline.make_eval_iterator(folder, 'test', 4, process_index=p, process_count=2)
    batches = list(it)
    assert len(batches) == len(it) == 2  # 3 videos a host, batches of 2 a host
    index = np.concatenate([b['video_index'] for b in batches])
    seen.append(set(index[index >= 0].tolist()))
  assert seen == [{0, 1, 2}, {3, 4, 5}]


def test_an_unreadable_video_is_raised_or_skipped_and_named(footage, tmp_path):
  shutil.copytree(footage / 'clips', tmp_path / 'clips')
  (tmp_path / 'clips' / 'v2.mp4').write_bytes(b'\x00\x00\x00\x18ftypmp42' + b'\x01' * 300)  # not a video
  os.remove(tmp_path / 'clips' / 'v4.mp4')
  shutil.copy(footage / 'train.csv', tmp_path / 'train.csv')
  shutil.copy(footage / 'classes.txt', tmp_path / 'classes.txt')
  csv = str(tmp_path / 'train.csv')
  cfg, _ = _configs(tmp_path)
  with pytest.raises(FileNotFoundError, match=f'^dataset.eval_files: {csv}: line 6: video file .*clips/v4.mp4 does '
                                              'not exist$'):  # stat'ed when the source is built (line 1: header)
    pipeline.make_eval_iterator(cfg, 'test', 6, process_index=0, process_count=1)
  shutil.copy(footage / 'clips' / 'v4.mp4', tmp_path / 'clips' / 'v4.mp4')
  with pytest.raises(errors.DataError, match=f'{csv}: record 2: video file cannot be read: .*clips/v2.mp4: cannot'):
    list(pipeline.make_eval_iterator(cfg, 'test', 6, process_index=0, process_count=1))
  os.remove(tmp_path / 'clips' / 'v4.mp4')
  cfg = dataclasses.replace(cfg, on_error='skip')  # a missing video is then a bad record, counted when read
  before = errors.error_counts()['unreadable_video']
  batches = list(pipeline.make_eval_iterator(cfg, 'test', 6, process_index=0, process_count=1))
  skipped = np.unique(np.concatenate([pipeline.skipped_videos(b) for b in batches]))
  assert skipped.tolist() == [2, 4]
  assert errors.error_counts()['unreadable_video'] == before + 2
  report = skips.skip_report(cfg, 'test', skipped)
  assert report['videos'] == 2 and report['reasons'] == {'unreadable_video': 2}
  (entry,) = report['files']
  assert entry['file'] == csv and entry['records'] == [2, 4] and 'clips/v2.mp4' in entry['detail']
  assert 'unreadable_video 2' in skips.skip_line(report, 'test', 6)
  it = pipeline.make_train_iterator(cfg, 4, seed=0, process_index=0, process_count=1)
  labels = np.concatenate([next(it)['label'] for _ in range(3)])
  it.close()
  assert sorted(labels.tolist()) == sorted([0, 1, 0, 2] * 3)  # videos 2 and 4 (labels 2 and 1) never come


def test_a_video_that_lies_about_its_length_is_partial_raised_or_counted(footage, tmp_path):
  shutil.copytree(footage / 'clips', tmp_path / 'clips')
  cut(make_mp4(tmp_path / 'clips' / 'v2.mp4', 16, (32, 48)), 0.15)  # its header declares 16 frames, one reads
  shutil.copy(footage / 'train.csv', tmp_path / 'train.csv')
  shutil.copy(footage / 'classes.txt', tmp_path / 'classes.txt')
  csv = str(tmp_path / 'train.csv')
  cfg, _ = _configs(tmp_path)
  said = r'video file cut short: .*clips/v2.mp4: partial: decoded 1 of the 16 frames its container declares'
  with pytest.raises(errors.DataError, match=f'{csv}: record 2: {said}'):
    list(pipeline.make_eval_iterator(cfg, 'test', 6, process_index=0, process_count=1))
  with pytest.raises(errors.DataError, match=f'{csv}: record 2: {said}'):
    it = pipeline.make_train_iterator(cfg, 6, seed=0, process_index=0, process_count=1)
    next(it)
  cfg = dataclasses.replace(cfg, on_error='skip')
  before = errors.error_counts()['partial_video']
  batches = list(pipeline.make_eval_iterator(cfg, 'test', 6, process_index=0, process_count=1))
  assert np.unique(np.concatenate([pipeline.skipped_videos(b) for b in batches])).tolist() == [2]
  assert errors.error_counts()['partial_video'] == before + 1
  it = pipeline.make_train_iterator(cfg, 5, seed=0, process_index=0, process_count=1)
  assert sorted(next(it)['label'].tolist()) == [0, 0, 1, 1, 2]  # an epoch without video 2
  it.close()
  assert f'{csv}: record 2 (partial_video 1: ' in skips.new_skips_line()  # the line training prints at its log


def test_dataset_fps_maps_the_folder_as_the_records_by_each_container_s_rate(footage, capsys):
  folder, records = _configs(footage, fps=20, stride=2)  # stored at 10 fps: a stride of 2 at 20 fps is 1 stored
  a = list(pipeline.make_eval_iterator(folder, 'test', 6, process_index=0, process_count=1))
  b = list(pipeline.make_eval_iterator(records, 'test', 6, process_index=0, process_count=1))
  for x, y in zip(a, b, strict=True):
    _close(x['inputs'], y['inputs'])  # the same stored frames: the records map by their manifest's rates
  err = capsys.readouterr().err
  assert f"note: dataset.fps=20: 6 of 6 videos in {footage / 'train.csv'} are stored at another rate (6 at 10 fps)" \
      in err


def test_classes_and_counts_come_from_the_list(footage, tmp_path):
  folder, _ = _configs(footage)
  assert pipeline.num_videos(folder, 'train') == 6
  assert names.dataset_class_names(folder) == ('a', 'b', 'c')  # classes.txt beside the list
  (tmp_path / 'list.csv').write_text('clips/x.mp4,walk\nclips/y.mp4,run\nclips/z.mp4,walk\n')
  listed = small_config(str(tmp_path / 'list.csv'), str(tmp_path / 'list.csv'), name='video_folder', num_classes=0)
  assert names.dataset_class_names(listed) == ('run', 'walk')  # no classes.txt: the labels' set
  config = _run_config(listed)
  config_labels.resolve(config, check=True)  # what a run config takes from its data (no TensorFlow)
  assert config.num_classes == 2 and tuple(config.class_names) == ('run', 'walk')
  listed = dataclasses.replace(listed, num_classes=2, on_error='skip')  # its videos are not there: bad records
  assert [int(r[3]['label']) for r in registry.make_source(listed, 'train').records(0, 3).as_numpy_iterator()] == \
      [1, 0, 1]
  (tmp_path / 'ints.csv').write_text('a.mp4,1\nb.mp4,0\n')
  assert names.dataset_class_names(small_config(str(tmp_path / 'ints.csv'), name='video_folder')) is None


def test_an_unknown_label_is_named_or_skipped(tmp_path):
  write_footage(str(tmp_path), labels=(0, 1), frames=(8, 8))
  (tmp_path / 'train.csv').write_text('path,label\nclips/v0.mp4,a\nclips/v1.mp4,zebra\n')
  cfg = small_config(str(tmp_path / 'train.csv'), name='video_folder', num_classes=3)
  with pytest.raises(ValueError, match=r"train.csv: row 1: label 'zebra' is not in the class list"):
    registry.make_source(cfg, 'train')
  cfg = dataclasses.replace(cfg, on_error='skip')
  assert registry.make_source(cfg, 'train').record(1).raw['label'] == -1  # counted as a bad label when read


def _run_config(dataset):
  import ml_collections
  return ml_collections.ConfigDict({'num_classes': 0, 'class_names': None, 'dataset': dataset})
