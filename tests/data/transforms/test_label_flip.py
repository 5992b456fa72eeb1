"""Label-aware flip (`dataset.label_aware_flip`): flipped clips of left/right classes take their mirror's label."""
import dataclasses

from data_helpers import jpeg
from data_helpers import small_config
import numpy as np
import pytest

from vvt.data import pipeline
from vvt.data.transforms import label_flip
from vvt.data.writing import dmvr_records

NAMES = ('Pushing something from left to right', 'Pushing something from right to left', 'Holding something',
         'Turning the camera left while filming something', 'Moving something Left', 'Moving something Right')


def test_names_that_differ_only_by_left_and_right_are_swapped():
  assert label_flip.mirrored_name('Pushing something from left to right') == 'Pushing something from right to left'
  assert label_flip.mirrored_name('Moving something Left') == 'Moving something Right'
  assert label_flip.mirrored_name('Leftover rightful') == 'Leftover rightful'  # whole words only
  # 'Turning the camera left ...' has no '... right ...' class here: kept, as 'Holding something'.
  assert label_flip.flip_permutation(NAMES) == [1, 0, 2, 3, 5, 4]
  assert label_flip.mirror_pairs(NAMES) == [(0, 1), (4, 5)]


def _half_dark_video(num_frames=6, size=(24, 32)):
  """Left half dark, right half bright: a flipped clip is bright on its left."""
  frame = np.full(size + (3,), 30, np.uint8)
  frame[:, size[1] // 2:] = 220
  return [jpeg(frame) for _ in range(num_frames)]


@pytest.fixture
def direction_data(tmp_path):
  path = str(tmp_path / 'ssv2.tfrecord-00000-of-00001')
  dmvr_records.write_records(path, [dmvr_records.encode_sequence_example(_half_dark_video(), k % 4, video_id=f'v{k}')
                                for k in range(12)])
  (tmp_path / 'classes.txt').write_text('\n'.join(NAMES[:4]) + '\n')
  return path


def _batches(cfg, n=4):
  it = pipeline.make_train_iterator(cfg, 12, seed=1, process_index=0, process_count=1)
  return [next(it) for _ in range(n)]


def test_flipped_clips_of_left_right_classes_take_the_mirror_label(direction_data):
  cfg = small_config(direction_data, num_classes=4, horizontal_flip=True, label_aware_flip=True,
                     shuffle_buffer=0)
  flips = 0
  for plain, aware in zip(_batches(small_config(direction_data, num_classes=4, horizontal_flip=True,
                                                shuffle_buffer=0)), _batches(cfg), strict=True):
    np.testing.assert_array_equal(plain['inputs'], aware['inputs'])  # the same clips, only labels change
    flipped = aware['inputs'][:, 0, :, 0, 0].mean(axis=1) > aware['inputs'][:, 0, :, -1, 0].mean(axis=1)
    expected = np.where(flipped, np.array([1, 0, 2, 3])[plain['label']], plain['label'])
    np.testing.assert_array_equal(aware['label'], expected)
    flips += int(flipped.sum())
  assert 0 < flips < 48


def test_label_aware_flip_needs_names_flip_and_one_head(direction_data, tmp_path):
  cfg = small_config(direction_data, num_classes=4, horizontal_flip=True, label_aware_flip=True)
  with pytest.raises(ValueError, match=r'^dataset.label_aware_flip: 6 class names for num_classes=4$'):
    pipeline.make_train_iterator(dataclasses.replace(cfg, class_names=tuple(NAMES)), 4, process_index=0,
                                 process_count=1)
  (tmp_path / 'classes.txt').unlink()
  with pytest.raises(ValueError, match=r'^dataset.label_aware_flip needs the class names of the data'):
    pipeline.make_train_iterator(cfg, 4, process_index=0, process_count=1)
  cfg = dataclasses.replace(cfg, label_keys={'verb': 'clip/label/index'})
  cfg = dataclasses.replace(cfg, num_classes={'verb': 4})
  with pytest.raises(ValueError, match=r"^dataset.label_aware_flip works with one label, not the heads"):
    pipeline.make_train_iterator(dataclasses.replace(cfg, class_names=tuple(NAMES[:4])), 4, process_index=0,
                                 process_count=1)
