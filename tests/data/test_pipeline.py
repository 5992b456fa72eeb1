"""Train and eval pipelines: shapes, labels, determinism, resume, multi-host views."""
import dataclasses
import itertools

from data_helpers import real_rows
from data_helpers import small_config
from data_helpers import solid_video
from data_helpers import write_labelled_files
import numpy as np
import pytest

from vvt.data import pipeline
from vvt.data.writing import dmvr_records


def _grey_label(inputs):
  """Inverts the solid-grey encoding of conftest (uint8 pixels) -> label."""
  first_frame = inputs[:, 0].mean(axis=(1, 2, 3))
  return np.round((first_frame - 10 - 2.5) / 20).astype(int)


def test_train_batch_shapes_and_labels_match_their_videos(labelled_dir):
  _, files = labelled_dir
  cfg = small_config(','.join(files), normalization='zero_centre')
  it = pipeline.make_train_iterator(cfg, global_batch_size=4, seed=3,
                                    process_index=0, process_count=1)
  for _ in range(5):  # > 2 epochs of 9 videos
    b = next(it)
    assert b['inputs'].shape == (4, 4, 16, 16, 3) and b['inputs'].dtype == np.uint8
    assert b['label'].dtype == np.int32 and b['mask'].dtype == np.float32
    np.testing.assert_array_equal(b['mask'], np.ones(4))
    np.testing.assert_array_equal(_grey_label(b['inputs']), b['label'])


def test_train_covers_each_video_once_per_epoch(labelled_dir):
  _, files = labelled_dir
  cfg = small_config(','.join(files), normalization='zero_centre',
                     num_classes=100)
  # 9 videos, label k % 5 would collide; use video grey level via a 1-batch epoch.
  it = pipeline.make_train_iterator(cfg, global_batch_size=9, seed=0,
                                    process_index=0, process_count=1)
  for _ in range(2):
    labels = next(it)['label']
    assert sorted(labels.tolist()) == sorted([k % 5 for k in range(9)])


def _batches(cfg, seed, n):
  it = pipeline.make_train_iterator(cfg, 8, seed=seed, process_index=0,
                                    process_count=1)
  return [next(it) for _ in range(n)]


def test_train_is_deterministic_with_all_augmentations(synthetic_dir):
  cfg = small_config(synthetic_dir['train_files'], num_classes=4,
                     randaugment={'num_layers': 1, 'magnitude': 9},
                     color_jitter=0.8, random_erasing=0.5, horizontal_flip=True)
  for x, y in zip(_batches(cfg, 1, 2), _batches(cfg, 1, 2), strict=True):
    np.testing.assert_array_equal(x['inputs'], y['inputs'])
    np.testing.assert_array_equal(x['label'], y['label'])


def test_train_depends_on_the_seeds(synthetic_dir):
  cfg = small_config(synthetic_dir['train_files'], num_classes=4,
                     horizontal_flip=True)
  a, b = _batches(cfg, 1, 2), _batches(cfg, 2, 2)
  assert not all(np.array_equal(x['inputs'], z['inputs']) for x, z in zip(a, b, strict=True))
  cfg = dataclasses.replace(cfg, seed=7)  # the config's data seed counts too
  c = _batches(cfg, 1, 2)
  assert not all(np.array_equal(x['inputs'], z['inputs']) for x, z in zip(a, c, strict=True))


@pytest.mark.parametrize('cache', [False, True])
def test_resume_at_step_k_yields_batch_k(synthetic_dir, cache):
  cfg = small_config(synthetic_dir['train_files'], num_classes=4, cache=cache,
                     horizontal_flip=True)
  fresh = pipeline.make_train_iterator(cfg, 12, seed=5, process_index=0,
                                       process_count=1)
  stream = [next(fresh) for _ in range(8)]  # 40 videos: crosses 2 epochs
  for k in (3, 7):  # batch 3 straddles epochs 0/1; batch 7 starts in epoch 2
    resumed = pipeline.make_train_iterator(cfg, 12, seed=5, start_step=k,
                                           process_index=0, process_count=1)
    for j in range(k, min(k + 2, 8)):
      b = next(resumed)
      np.testing.assert_array_equal(b['inputs'], stream[j]['inputs'])
      np.testing.assert_array_equal(b['label'], stream[j]['label'])


def test_train_hosts_read_disjoint_halves(tmp_path):
  files = write_labelled_files(str(tmp_path), videos_per_file=(5, 5),
                               num_classes=10)
  cfg = small_config(','.join(files), normalization='zero_centre',
                     num_classes=10)
  seen = []
  for p in range(2):
    it = pipeline.make_train_iterator(cfg, global_batch_size=10, seed=0,
                                      process_index=p, process_count=2)
    b = next(it)
    assert b['inputs'].shape[0] == 5
    seen.append(set(b['label'].tolist()))
  assert seen[0].isdisjoint(seen[1]) and seen[0] | seen[1] == set(range(10))


def test_global_batch_must_divide_by_hosts(labelled_dir):
  _, files = labelled_dir
  with pytest.raises(ValueError, match='multiple of the process count'):
    pipeline.make_train_iterator(small_config(files[0]), 5, process_index=0,
                                 process_count=2)


def _collect_eval(cfg, batch, hosts):
  per_host = []
  for p in range(hosts):
    it = pipeline.make_eval_iterator(cfg, 'test', global_batch_size=batch,
                                     process_index=p, process_count=hosts)
    batches = list(it)
    assert len(batches) == len(it)
    per_host.append(batches)
  return per_host


@pytest.mark.parametrize('batch,hosts,clips,crops', [
    (4, 1, 1, 1), (6, 2, 2, 3), (2, 2, 3, 1), (32, 2, 1, 3), (7, 1, 2, 1)])
def test_eval_counts_every_view_once(labelled_dir, batch, hosts, clips, crops):
  _, files = labelled_dir
  cfg = small_config(eval_files=','.join(files), normalization='zero_centre',
                     num_test_clips=clips, num_spatial_crops=crops)
  per_host = _collect_eval(cfg, batch, hosts)
  assert len({len(b) for b in per_host}) == 1  # same number of batches
  views = []
  for batches in per_host:
    for b in batches:
      real = real_rows(b, (batch // hosts, 4, 16, 16, 3))
      np.testing.assert_array_equal(_grey_label(b['inputs'][real]),
                                    b['label'][real])
      views += list(zip(b['video_index'][real], b['view_index'][real], strict=True))
  expected = list(itertools.product(range(9), range(clips * crops)))
  assert sorted(views) == expected
  assert pipeline.num_videos(cfg, 'test') == 9


def test_eval_with_more_hosts_than_videos(tmp_path):
  files = write_labelled_files(str(tmp_path), videos_per_file=(1,))
  cfg = small_config(eval_files=files[0], num_test_clips=2)
  per_host = _collect_eval(cfg, 6, 3)
  assert [len(b) for b in per_host] == [1, 1, 1]
  masks = [b[0]['mask'].tolist() for b in per_host]
  assert masks == [[0, 0], [0, 0], [1, 1]]
  np.testing.assert_array_equal(per_host[2][0]['view_index'], [0, 1])
  np.testing.assert_array_equal(per_host[0][0]['video_index'], [-1, -1])


def test_eval_three_crops_are_left_centre_right(tmp_path):
  # A wide video whose columns encode x: crops must start at 0, middle, end.
  width, height = 48, 16
  frame = np.tile(np.linspace(0, 240, width)[None, :, None], (height, 1, 3))
  from data_helpers import jpeg
  rec = dmvr_records.encode_sequence_example([jpeg(frame)] * 4, 0)
  path = str(tmp_path / 'wide.tfrecord')
  dmvr_records.write_records(path, [rec])
  cfg = small_config(eval_files=path, num_spatial_crops=3, eval_resize=16,
                     normalization='zero_centre', num_classes=1)
  b = next(iter(pipeline.make_eval_iterator(cfg, 'test', 3, 0, 1)))
  means = [b['inputs'][i].astype(float) for i in range(3)]
  left, centre, right = [m.mean() for m in means]
  assert left < centre < right
  assert abs(centre - 120) < 6 and left < 60 and right > 180


def test_multi_head_labels(tmp_path):
  recs = [dmvr_records.encode_sequence_example(
      solid_video(50, 4), {'verb': v, 'noun': n})
      for v, n in [(0, 5), (2, 1), (1, 9)]]
  path = str(tmp_path / 'epic.tfrecord')
  dmvr_records.write_records(path, recs)
  cfg = small_config(path, path, label_keys={'verb': 'verb', 'noun': 'noun'},
                     num_classes={'verb': 3, 'noun': 10}, shuffle_buffer=1)
  tb = next(pipeline.make_train_iterator(cfg, 3, process_index=0, process_count=1))
  assert set(tb) == {'inputs', 'label/verb', 'label/noun', 'mask'}
  assert sorted(zip(tb['label/verb'], tb['label/noun'], strict=True)) == [(0, 5), (1, 9), (2, 1)]
  eb = list(pipeline.make_eval_iterator(cfg, 'test', 4, process_index=0,
                                        process_count=1))
  assert len(eb) == 1
  np.testing.assert_array_equal(eb[0]['label/verb'], [0, 2, 1, 0])
  np.testing.assert_array_equal(eb[0]['label/noun'], [5, 1, 9, 0])
  np.testing.assert_array_equal(eb[0]['mask'], [1, 1, 1, 0])


def test_data_dir_and_sharded_name(labelled_dir):
  directory, _ = labelled_dir
  cfg = small_config(eval_files='data.tfrecord@3', data_dir=directory)
  assert pipeline.num_videos(cfg, 'test') == 9


def test_the_pipeline_takes_a_data_spec_only(labelled_dir):
  """A dataset section (a ConfigDict) is the config layer's to check and resolve: the pipeline refuses it."""
  from vvt.config import dataset as data_config
  section = data_config.get_config()
  section.update(train_files=labelled_dir[1][0], num_classes=5)
  for entrance in (lambda s: pipeline.num_videos(s, 'train'),
                   lambda s: pipeline.make_train_iterator(s, 2, process_index=0, process_count=1),
                   lambda s: pipeline.make_eval_iterator(s, 'test', 2, process_index=0, process_count=1)):
    with pytest.raises(TypeError, match=r'^the data pipeline takes a DataSpec .*, not ConfigDict$'):
      entrance(section)


def test_config_errors_name_the_field(labelled_dir):
  _, files = labelled_dir
  with pytest.raises(ValueError, match='num_classes'):  # 0 (unset): a run that reads no labels (pretraining)
    pipeline.make_train_iterator(small_config(files[0], num_classes=-1), 2,
                                 process_index=0, process_count=1)
  with pytest.raises(ValueError, match='short_video_policy'):
    pipeline.make_train_iterator(small_config(files[0], short_video_policy='x'),
                                 2, process_index=0, process_count=1)
  with pytest.raises(ValueError, match='train_files'):
    pipeline.make_train_iterator(small_config(''), 2, process_index=0,
                                 process_count=1)
  with pytest.raises(ValueError, match='randaugment'):
    pipeline.make_train_iterator(
        small_config(files[0], randaugment={'layers': 2}), 2,
        process_index=0, process_count=1)
