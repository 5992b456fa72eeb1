"""Feature sequences + annotations as a training source: steps, crops, order, shards, refusals."""
import itertools
import json
import os

import numpy as np
import pytest

from vvt.data.reading import feature_sequences as fs


def write_sequences(root, lengths, dim=8, stride=0.5, first=1.0, extra=None):
  """DIR/sequences.json + DIR/sequences/{id}.npy of videos v0, v1, ... of `lengths` windows (values: the step)."""
  os.makedirs(os.path.join(root, 'sequences'), exist_ok=True)
  videos = {}
  for n, length in enumerate(lengths):
    vid = f'v{n}'
    x = np.repeat(np.arange(length, dtype=np.float32)[:, None], dim, 1) + 1000 * n
    np.save(os.path.join(root, 'sequences', f'{vid}.npy'), x)
    videos[vid] = {'path': f'/videos/{vid}.mp4', 'duration': first + length * stride, 'fps': 25.0,
                   'centres': [first + i * stride for i in range(length)]}
  index = {'window_seconds': 1.0, 'stride_seconds': stride, 'feature_dim': dim, 'layers': [-1], 'combine': 'mean',
           'checkpoint': 'x', 'videos': videos, **(extra or {})}
  with open(os.path.join(root, 'sequences.json'), 'w') as f:
    json.dump(index, f)
  return root


def test_segments_in_feature_steps_and_a_video_without_sequence_is_a_counted_skip(tmp_path):
  root = write_sequences(str(tmp_path), [10, 12], extra={'stride_seconds': None})  # windows in frames: the centres
  truth = {'v0': ([[2.0, 3.0]], [1]), 'v1': ([[1.0, 6.0], [4.0, 5.0]], [0, 2]), 'gone': ([[0.0, 1.0]], [0])}
  seqs = fs.open_sequences(root, truth)
  assert seqs.video_ids == ('v0', 'v1') and seqs.skipped == ('gone',)
  np.testing.assert_allclose(seqs.segments[0], [[2.0, 4.0]])  # (t - 1.0) / 0.5
  assert seqs.strides == (0.5, 0.5)
  np.testing.assert_allclose(seqs.seconds(0, seqs.segments[0]), [[2.0, 3.0]])
  assert fs.skipped_line(seqs) == '[data] 1 annotated videos without a feature sequence skipped: gone'


def test_a_random_crop_keeps_segments_half_inside_and_clips_them():
  segments = np.array([[10.0, 20.0], [50.0, 60.0], [95.0, 99.0]])
  labels = np.array([0, 1, 2])
  for seed in range(30):
    start, end, kept, kept_labels = fs.crop(100, segments, labels, 30, np.random.default_rng(seed))
    assert end - start == 30 and len(kept) >= 1
    assert (kept >= 0).all() and (kept <= 30).all()
    for (a, b), c in zip(kept + start, kept_labels, strict=True):
      s, e = segments[c]
      assert a == max(s, start) and b == min(e, end) and (b - a) >= 0.5 * (e - s)
  start, end, _, _ = fs.crop(20, segments[:1], labels[:1], 30, np.random.default_rng(0))
  assert 18 <= end - start <= 20  # crop_ratio (0.9, 1.0) of a short sequence


def test_batches_are_resume_exact_and_the_shards_split_the_videos(tmp_path):
  root = write_sequences(str(tmp_path), [40, 25, 30, 18, 33])
  truth = {f'v{n}': ([[3.0, 6.0]], [n % 2]) for n in range(5)}
  seqs = fs.open_sequences(root, truth)
  whole = list(itertools.islice(fs.train_batches(seqs, 2, 16, 3, seed=7), 6))
  resumed = list(itertools.islice(fs.train_batches(seqs, 2, 16, 3, seed=7, start_step=4), 2))
  for a, b in zip(whole[4:], resumed, strict=True):
    for k in a:
      np.testing.assert_array_equal(a[k], b[k])
  first_epoch = np.concatenate([b['video_index'] for b in whole])[:5]
  assert sorted(first_epoch.tolist()) == [0, 1, 2, 3, 4]
  b = whole[0]
  assert b['inputs'].shape == (2, 16, 8) and b['steps'].dtype == bool and b['segments'].shape == (2, 3, 2)
  # the inputs are the sequence's steps from the window's offset on
  for row in range(2):
    n = int(b['steps'][row].sum())
    want = np.arange(b['offset'][row], b['offset'][row] + n) + 1000 * b['video_index'][row]
    np.testing.assert_array_equal(b['inputs'][row, :n, 0], want)
  shards = [set(np.concatenate([x['video_index'] for x in itertools.islice(
      fs.train_batches(seqs, 1, 16, 3, seed=7, process_index=p, process_count=2), 6)]).tolist()) for p in range(2)]
  assert shards[0].isdisjoint(shards[1]) and shards[0] | shards[1] == set(range(5))
  evals = list(fs.eval_batches(seqs, 2, 48, 3))
  assert [b['video_index'].tolist() for b in evals] == [[0, 1], [2, 3], [4, -1]]
  assert evals[-1]['mask'].tolist() == [1.0, 0.0]


def test_refusals_name_the_file(tmp_path):
  root = write_sequences(str(tmp_path / 'a'), [10, 12])
  np.save(os.path.join(root, 'sequences', 'v1.npy'), np.zeros((12, 5), np.float32))
  with pytest.raises(fs.SequenceError, match=r'v1\.npy: a sequence of shape \(12, 5\), the index says'):
    fs.open_sequences(root, {'v0': ([[2.0, 3.0]], [0]), 'v1': ([[2.0, 3.0]], [0])})
  os.remove(os.path.join(root, 'sequences', 'v1.npy'))
  with pytest.raises(fs.SequenceError, match=r'v1\.npy: unreadable feature sequence'):
    fs.open_sequences(root, {'v1': ([[2.0, 3.0]], [0])})
  with pytest.raises(fs.SequenceError, match=r'nowhere/sequences\.json: not a feature-sequence index'):
    fs.open_sequences(str(tmp_path / 'nowhere'), {})
