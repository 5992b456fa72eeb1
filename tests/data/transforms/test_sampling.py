"""Temporal sampling: strides, uniform eval clips, short videos, segments."""
import numpy as np
import pytest
import tensorflow as tf

from vvt.data.transforms import sampling


def _train(n, t, stride, seed, policy='loop', scheme='stride'):
  return sampling.train_indices(n, t, stride, tf.constant(seed, tf.int64),
                                policy, scheme).numpy()


def test_train_clip_is_strided_inside_the_video():
  starts = set()
  for s in range(60):
    idx = _train(40, 8, 4, [s, 1])
    np.testing.assert_array_equal(np.diff(idx), np.full(7, 4))
    assert idx[0] >= 0 and idx[-1] <= 39
    starts.add(int(idx[0]))
  assert starts <= set(range(0, 40 - 28 + 1)) and len(starts) > 5  # random start
  np.testing.assert_array_equal(_train(40, 8, 4, [3, 9]), _train(40, 8, 4, [3, 9]))


def test_short_video_loop_and_pad():
  np.testing.assert_array_equal(_train(5, 8, 1, [0, 0], 'loop'),
                                [0, 1, 2, 3, 4, 0, 1, 2])
  np.testing.assert_array_equal(_train(5, 8, 1, [0, 0], 'pad'),
                                [0, 1, 2, 3, 4, 4, 4, 4])
  np.testing.assert_array_equal(_train(1, 3, 2, [0, 0], 'loop'), [0, 0, 0])


def test_eval_clips_spread_uniformly():
  idx = sampling.eval_indices(100, 8, 2, 4).numpy()
  assert idx.shape == (4, 8)
  np.testing.assert_array_equal(idx[:, 0], [0, 28, 57, 85])  # 0 .. 100-15
  assert idx[-1, -1] == 99
  centre = sampling.eval_indices(100, 8, 2, 1).numpy()
  np.testing.assert_array_equal(centre[0], 42 + 2 * np.arange(8))
  short = sampling.eval_indices(3, 4, 1, 2, policy='pad').numpy()
  np.testing.assert_array_equal(short, [[0, 1, 2, 2], [0, 1, 2, 2]])


def test_segment_sampling_takes_one_frame_per_segment():
  for s in range(10):
    idx = _train(80, 8, 1, [s, 2], scheme='segment')
    np.testing.assert_array_equal(idx // 10, np.arange(8))
  ev = sampling.eval_indices(80, 8, 1, 2, scheme='segment').numpy()
  np.testing.assert_array_equal(ev, [np.arange(8) * 10 + 2, np.arange(8) * 10 + 7])
  assert _train(4, 8, 1, [0, 0], scheme='segment').max() <= 3


def test_bad_arguments():
  with pytest.raises(ValueError, match='short_video_policy'):
    _train(10, 4, 1, [0, 0], policy='wrap')
  with pytest.raises(ValueError, match='sampling'):
    _train(10, 4, 1, [0, 0], scheme='dense')


def test_whole_video_tiles_are_non_overlapping_and_cover_it():
  for n in (1, 7, 8, 9, 24, 25):
    idx = sampling.tile_indices(n, 4, 2, policy='pad').numpy()
    assert idx.shape == (-(-n // 8), 4) == (int(sampling.num_tiles(n, 4, 2)), 4)
    np.testing.assert_array_equal(idx[:, 0], np.minimum(np.arange(len(idx)) * 8, n - 1))  # starts 0, 8, 16, ...
    assert idx.max() <= n - 1
  np.testing.assert_array_equal(sampling.tile_indices(9, 4, 2, policy='loop').numpy(),
                                [[0, 2, 4, 6], [8, 1, 3, 5]])  # the last tile wraps around
  with pytest.raises(ValueError, match='stride'):
    sampling.tile_indices(9, 4, 0)


@pytest.mark.parametrize('stored,config', [(30, 25), (25, 30), (30, 30 / 32)])
def test_stride_at_the_config_rate_lands_on_the_nearest_stored_frame(stored, config):
  """Clips of a video stored at `stored` fps, sampled by a config at `config` fps, take the stored frames nearest
  to the times of a video at `config` fps: within half a stored frame."""
  seconds, ratio = 400 / min(stored, config), stored / config
  n_stored, n_config = round(seconds * stored), round(seconds * config)
  half = 0.5 / stored + 1e-9
  got = sampling.eval_indices(n_stored, 8, 4, 3, ratio=ratio).numpy() / stored
  ideal = sampling.eval_indices(n_config, 8, 4, 3).numpy() / config
  assert np.abs(got - ideal).max() <= half
  got = sampling.tile_indices(n_stored, 8, 4, ratio=ratio).numpy() / stored
  ideal = sampling.tile_indices(n_config, 8, 4).numpy() / config
  assert got.shape == ideal.shape and np.abs(got - ideal).max() <= half
  for s in range(5):
    seed = tf.constant([s, 7], tf.int64)
    got = sampling.train_indices(n_stored, 8, 4, seed, ratio=ratio).numpy() / stored
    ideal = sampling.train_indices(n_config, 8, 4, seed).numpy() / config
    assert np.abs(got - ideal).max() <= half
  # segment sampling cuts the video into fractions of its length: the rate does not change it
  np.testing.assert_array_equal(sampling.eval_indices(n_stored, 8, 1, 2, scheme='segment', ratio=ratio),
                                sampling.eval_indices(n_stored, 8, 1, 2, scheme='segment'))
