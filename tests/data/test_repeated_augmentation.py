"""Repeated augmentation (dataset.repeated_augmentation = N): each video N times in a row in a batch, each copy
augmented on its own, with its label; every video N times per pass over the records; exact resume."""
from data_helpers import small_config
from data_helpers import write_labelled_files
import numpy as np
import pytest

from vvt.data import pipeline


def _stream(cfg, batch, n, start_step=0, seed=4):
  it = pipeline.make_train_iterator(cfg, batch, seed=seed, start_step=start_step, process_index=0, process_count=1)
  return [next(it) for _ in range(n)]


def test_the_copies_of_a_video_differ_and_carry_its_label(synthetic_dir):
  cfg = small_config(synthetic_dir['train_files'], num_classes=4, horizontal_flip=True,
                     randaugment={'num_layers': 1, 'magnitude': 9}, repeated_augmentation=2)
  plain = small_config(synthetic_dir['train_files'], num_classes=4, horizontal_flip=True,
                       randaugment={'num_layers': 1, 'magnitude': 9})
  batches = _stream(cfg, 8, 3)
  reference = _stream(plain, 4, 3)  # the same record order, one clip per video
  for b, ref in zip(batches, reference, strict=True):
    labels = b['label'].reshape(4, 2)
    np.testing.assert_array_equal(labels[:, 0], labels[:, 1])  # copies: the same label
    np.testing.assert_array_equal(labels[:, 0], ref['label'])  # ... of the same videos, in the stream's order
    pairs = b['inputs'].reshape((4, 2) + b['inputs'].shape[1:])
    for first, second in pairs:  # independent crops, flips, RandAugment draws, temporal starts
      assert not np.array_equal(first, second)
    np.testing.assert_array_equal(b['mask'], np.ones(8))


def test_every_video_n_times_per_pass_over_the_records(tmp_path):
  files = write_labelled_files(str(tmp_path), videos_per_file=(5, 5), num_classes=10)  # labels = video ids
  cfg = small_config(','.join(files), normalization='zero_centre', num_classes=10, repeated_augmentation=2)
  labels = np.concatenate([b['label'] for b in _stream(cfg, 4, 5)])  # 5 batches of 2 videos x 2 copies
  assert sorted(labels.tolist()) == sorted(list(range(10)) * 2)


@pytest.mark.parametrize('batch,repeats', [(6, 2), (4, 3)])
def test_resume_at_step_k_yields_batch_k(synthetic_dir, batch, repeats):
  """(4, 3): a batch boundary inside a video's copies (what the run config's validation never lets happen:
  the stream still resumes exactly)."""
  cfg = small_config(synthetic_dir['train_files'], num_classes=4, horizontal_flip=True,
                     repeated_augmentation=repeats)
  stream = _stream(cfg, batch, 16)  # (6, 2): 48 of the 40 videos, into the second pass
  for k in (5, 13):
    for j, b in enumerate(_stream(cfg, batch, 2, start_step=k)):
      np.testing.assert_array_equal(b['inputs'], stream[k + j]['inputs'])
      np.testing.assert_array_equal(b['label'], stream[k + j]['label'])
