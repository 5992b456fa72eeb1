"""Spatial ops: decode windows, crops, flips, video-consistent augmentation."""
import numpy as np
import pytest
import tensorflow as tf

from vvt.data import config as data_config
from vvt.data import transforms

from data_helpers import jpeg


def _seed(a, b=0):
  return tf.constant([a, b], tf.int64)


def _video(t=4, h=20, w=24, seed=0):
  rng = np.random.default_rng(seed)
  return tf.constant(rng.uniform(0, 255, (t, h, w, 3)).astype(np.float32))


def test_decode_window_equals_crop_of_full_decode():
  rng = np.random.default_rng(0)
  frames = [jpeg(rng.integers(0, 255, (48, 64, 3))) for _ in range(3)]
  full = transforms.decode_frames(tf.constant(frames), 3).numpy()
  assert full.shape == (3, 48, 64, 3)
  window = tf.constant([8, 16, 24, 32])
  part = transforms.decode_frames(tf.constant(frames), 3, window).numpy()
  assert part.shape == (3, 24, 32, 3)
  diff = np.abs(part.astype(int) - full[:, 8:32, 16:48].astype(int))
  assert diff.mean() < 1.0
  np.testing.assert_array_equal(
      transforms.frame_shape(tf.constant(frames[0])).numpy(), [48, 64])


def test_train_crop_window_scale_jitter():
  sides = []
  for s in range(50):
    y, x, h, w = transforms.train_crop_window(
        tf.constant(256), tf.constant(340), 224, 256, 320, _seed(s)).numpy()
    assert h == w and 0 <= y <= 256 - h and 0 <= x <= 340 - w
    sides.append(h)
  # resize 256..320 then crop 224 <=> source side 224*256/r in [179, 224]
  assert min(sides) >= 179 and max(sides) <= 224 and len(set(sides)) > 10


def test_eval_three_crops_landscape_and_portrait():
  land = transforms.eval_crop_windows(tf.constant(100), tf.constant(200), 50, 50,
                                      3).numpy()
  np.testing.assert_array_equal(land, [[0, 0, 100, 100], [0, 50, 100, 100],
                                       [0, 100, 100, 100]])
  port = transforms.eval_crop_windows(tf.constant(200), tf.constant(100), 50,
                                      100, 3).numpy()
  np.testing.assert_array_equal(port, [[0, 25, 50, 50], [75, 25, 50, 50],
                                       [150, 25, 50, 50]])
  centre = transforms.eval_crop_windows(tf.constant(100), tf.constant(200), 50,
                                        100, 1).numpy()
  np.testing.assert_array_equal(centre, [[25, 75, 50, 50]])
  with pytest.raises(ValueError, match='num_spatial_crops'):
    transforms.eval_crop_windows(tf.constant(9), tf.constant(9), 4, 4, 2)


def test_resize_flip_and_identity():
  v = _video(h=16, w=16)
  np.testing.assert_allclose(transforms.resize(v, 16), v, atol=1e-3)
  np.testing.assert_allclose(transforms.resize(v, 16, tf.constant(True)),
                             v.numpy()[:, :, ::-1], atol=1e-3)
  u8 = tf.cast(v, tf.uint8)
  assert transforms.resize(u8, 8).shape == (4, 8, 8, 3)


def test_flip_reverses_width_of_all_frames():
  v = _video()
  outs = [transforms.random_flip(v, _seed(s)).numpy() for s in range(20)]
  flipped = [np.array_equal(o, v.numpy()[:, :, ::-1]) for o in outs]
  same = [np.array_equal(o, v.numpy()) for o in outs]
  assert all(f or s for f, s in zip(flipped, same)) and any(flipped) and any(same)


def _constant_in_time(video):
  return np.allclose(video, video[:1], atol=1e-3)


@pytest.mark.parametrize('op', range(len(transforms.RANDAUGMENT_OPS)))
def test_randaugment_ops_are_video_consistent(op):
  # Identical frames stay identical whatever op is drawn: one op per clip.
  frame = _video(t=1, seed=op)
  video = tf.tile(frame, [3, 1, 1, 1])
  branches = transforms._randaugment_ops(video, 0.9, tf.constant(-1.0))  # pylint: disable=protected-access
  out = branches[op]().numpy()
  assert out.shape == (3, 20, 24, 3) and _constant_in_time(out)
  if transforms.RANDAUGMENT_OPS[op] != 'identity':
    assert not np.allclose(out, video.numpy())


def test_randaugment_colour_jitter_and_erasing_keep_frames_consistent():
  video = tf.tile(_video(t=1), [4, 1, 1, 1])
  for s in range(8):
    out = transforms.randaugment(video, _seed(s), num_layers=3, magnitude=10)
    assert _constant_in_time(out.numpy())
    assert 0 <= out.numpy().min() and out.numpy().max() <= 255
    jit = transforms.color_jitter(video, _seed(s), strength=1.0, prob=1.0)
    assert _constant_in_time(jit.numpy()) and not np.allclose(jit, video)
    erased = transforms.random_erasing(video, _seed(s), prob=1.0).numpy()
    assert _constant_in_time(erased)
    changed = ~np.isclose(erased[0], video.numpy()[0]).all(-1)
    ys, xs = np.nonzero(changed)
    area = changed.sum()
    assert area == (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)  # a box
    assert 0.01 * 480 <= area <= 0.4 * 480


def test_normalize():
  v = tf.constant([[[[0.0, 127.5, 255.0]]]])
  np.testing.assert_allclose(transforms.normalize(v, 'zero_centre'),
                             [[[[-1.0, 0.0, 1.0]]]])
  imnet = transforms.normalize(tf.fill([1, 1, 1, 3], 255.0 * 0.485), 'imagenet')
  assert abs(float(imnet[0, 0, 0, 0])) < 1e-5
  with pytest.raises(ValueError, match='normalization'):
    transforms.normalize(v, 'unit')


def test_train_ops_follow_the_config():
  cfg = data_config.get_config()
  names = [n for n, _ in transforms.train_ops(cfg)]
  assert names == ['normalize']  # the flip is fused into the crop
  cfg.update(horizontal_flip=False, color_jitter=0.4, random_erasing=0.25,
             randaugment={'num_layers': 2, 'magnitude': 9})
  names = [n for n, _ in transforms.train_ops(cfg)]
  assert names == ['color_jitter', 'randaugment', 'normalize', 'random_erasing']


def test_color_jitter_equals_the_four_ops_one_by_one():
  # The fused jitter equals brightness -> contrast (per-frame channel means,
  # as tf.image.adjust_contrast) -> saturation (blend with luma grey) -> hue
  # (rotation of the YIQ chroma plane), applied one after the other.
  video = np.random.default_rng(3).uniform(60, 190, (2, 6, 5, 3))
  seed = _seed(11)
  out = transforms.color_jitter(tf.constant(video, tf.float32), seed,
                                strength=0.5, prob=1.0).numpy()
  u = tf.random.stateless_uniform([4], transforms.fold_in(seed, 1), -1.0,
                                  1.0).numpy()
  x = video * (1 + 0.2 * u[0])
  x = tf.image.adjust_contrast(x, 1 + 0.2 * u[1]).numpy()
  grey = x @ np.array([0.299, 0.587, 0.114])
  x = grey[..., None] + (1 + 0.2 * u[2]) * (x - grey[..., None])
  a = np.array(transforms._RGB_TO_YIQ)  # pylint: disable=protected-access
  yiq = x @ a.T
  theta = 2 * np.pi * 0.05 * u[3]
  c, s = np.cos(theta), np.sin(theta)
  i, q = yiq[..., 1].copy(), yiq[..., 2].copy()
  yiq[..., 1], yiq[..., 2] = c * i - s * q, s * i + c * q
  x = np.clip(yiq @ np.linalg.inv(a.T), 0, 255)
  np.testing.assert_allclose(out, x, atol=0.05)
  assert np.abs(out - video).max() > 5


# ----------------------------------------------- fused (one-pass) augmentation --
def _smooth_video(t=4, size=32, seed=0):
  rng = np.random.default_rng(seed)
  base = rng.uniform(20, 235, (1, 4, 4, 3)).astype(np.float32)
  video = tf.image.resize(base, [size, size], 'bicubic')
  shift = tf.constant(rng.uniform(-20, 20, (t, 1, 1, 3)), tf.float32)
  return tf.clip_by_value(video + shift, 0.0, 255.0)


def _full_aug_config(xla, erase=0.5):
  cfg = data_config.get_config()
  cfg.update(color_jitter=0.4, randaugment={'num_layers': 2, 'magnitude': 9},
             random_erasing=erase, normalization='imagenet', xla_ops=xla)
  return cfg


def _drawn_ops(seed, num_layers=2):
  s0 = transforms.fold_in(seed, 101)  # randaugment is op 1 of train_ops
  return [transforms.RANDAUGMENT_OPS[int(tf.random.stateless_uniform(
      [], transforms.fold_in(transforms.fold_in(s0, l), 0), 0,
      len(transforms.RANDAUGMENT_OPS), dtype=tf.int32, alg='philox'))]
          for l in range(num_layers)]


def test_fused_augmentation_equals_op_by_op():
  # Same draws, same ops: the one-pass XLA path and the reference op-by-op
  # path agree up to rounding (the fused path rounds pixels to integers
  # before per-channel LUTs and takes statistics from every 4th pixel).
  video = _smooth_video()
  fused = tf.function(transforms.train_augment(_full_aug_config(True, 0.0)))
  ref = tf.function(transforms.train_augment(_full_aug_config(False, 0.0)))
  # Random erasing is the last op: the draws of the others do not change.
  fused_e = tf.function(transforms.train_augment(_full_aug_config(True)))
  ref_e = tf.function(transforms.train_augment(_full_aug_config(False)))
  kinds = set()
  for s in range(14):
    seed = _seed(s, 3)
    ops = _drawn_ops(seed)
    kinds.add((any(o in transforms._GEOMETRIC for o in ops),  # pylint: disable=protected-access
               any(o in ('color', 'sharpness') for o in ops),
               any(o in ('solarize', 'posterize', 'equalize') for o in ops)))
    a, b = fused(video, seed).numpy(), ref(video, seed).numpy()
    diff = np.abs(a - b)
    assert a.shape == b.shape == (4, 32, 32, 3)
    # 0.05 in ImageNet-normalised units is ~3 grey levels
    assert np.mean(diff > 0.05) < 0.04, (s, ops, np.mean(diff > 0.05))
    assert diff.mean() < 0.02, (s, ops)
    # erasing: the same box in both paths (the noise itself is drawn anew)
    box_f = (fused_e(video, seed).numpy() != a).any(axis=(0, 3))
    box_r = (ref_e(video, seed).numpy() != b).any(axis=(0, 3))
    np.testing.assert_array_equal(box_f, box_r)
  assert len(kinds) >= 4  # geometric / mixing / LUT variants all ran


def test_fused_geometry_maps_pixels_where_expected():
  # translate_x by +k: output (y, x) shows input (y, x + k); then translate_y
  # by +m composes to (y + m, x + k); the borders are marked outside.
  h = w = 20.0
  level = 0.5
  geoms = tf.stack([
      transforms._geometry(tf.constant(12), tf.constant(1.0), level, h, w),  # pylint: disable=protected-access
      transforms._geometry(tf.constant(13), tf.constant(1.0), level, h, w)])  # pylint: disable=protected-access
  k = m = round(0.5 * 0.45 * 20)
  rows, cols = tf.range(h), tf.range(w)
  idx, masks = transforms._grid_map(geoms, 2, rows, cols, h, w)  # pylint: disable=protected-access
  idx = idx.numpy().reshape(20, 20)
  assert idx[3, 4] == (3 + m) * 20 + (4 + k)
  inside = (masks[0] & masks[1]).numpy()
  assert inside[:20 - m, :20 - k].all() and not inside[20 - m:].any()
  assert not inside[:, 20 - k:].any()
  # rotation by 90 degrees about the centre moves a corner to a corner
  rot = transforms._geometry(tf.constant(3), tf.constant(1.0),  # pylint: disable=protected-access
                             3.0, h, w)  # level 3 -> 90 degrees
  idx, _ = transforms._grid_map(rot[None], 1, rows, cols, h, w)  # pylint: disable=protected-access
  src = idx.numpy().reshape(20, 20)[0, 0]
  assert (src // 20, src % 20) == (19, 0)


@pytest.mark.parametrize('op', ['solarize', 'posterize', 'brightness',
                                'auto_contrast', 'equalize'])
def test_fused_lut_equals_direct_computation(op):
  # The per-clip LUT (one layer + normalisation) on the 256 grey levels equals
  # the reference op applied to an image holding every grey level.
  levels = tf.range(256.0)[None, :, None, None] * tf.ones([1, 1, 1, 3])
  image = tf.tile(tf.reshape(levels, [1, 16, 16, 3]), [1, 4, 4, 1])  # 64x64
  op_id = transforms.RANDAUGMENT_OPS.index(op)
  scale, offset = (1 / 50.0,) * 3, (-2.0,) * 3
  p = transforms._params_kernel(  # pylint: disable=protected-access
      image, tf.zeros([5]), tf.constant([op_id]), tf.constant([1.0]),
      strength=0.0, level=0.7, geo=False, scale=scale, offset=offset)
  lut = p['lut'].numpy().reshape(3, 256).T  # (256, 3)
  branches = transforms._randaugment_ops(tf.reshape(levels, [1, 16, 16, 3]),  # pylint: disable=protected-access
                                         0.7, tf.constant(1.0))
  want = branches[op_id]().numpy().reshape(256, 3) / 50.0 - 2.0
  np.testing.assert_allclose(lut, want, atol=0.6 / 50.0)
