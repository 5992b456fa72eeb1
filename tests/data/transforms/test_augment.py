"""Spatial ops: decode windows, crops, flips, video-consistent augmentation."""
from data_helpers import jpeg
import numpy as np
import pytest
import reference_transforms as reference
import tensorflow as tf

from vvt.config import dataset as data_config
from vvt.data.reading import image_frames
from vvt.data.transforms import augment
from vvt.data.transforms import crops
from vvt.data.transforms import random_draws


def _seed(a, b=0):
  return tf.constant([a, b], tf.int64)


def _video(t=4, h=20, w=24, seed=0):
  rng = np.random.default_rng(seed)
  return tf.constant(rng.uniform(0, 255, (t, h, w, 3)).astype(np.float32))


def test_decode_window_equals_crop_of_full_decode():
  rng = np.random.default_rng(0)
  frames = [jpeg(rng.integers(0, 255, (48, 64, 3))) for _ in range(3)]
  full = image_frames.decode_frames(tf.constant(frames), 3).numpy()
  assert full.shape == (3, 48, 64, 3)
  window = tf.constant([8, 16, 24, 32])
  part = image_frames.decode_frames(tf.constant(frames), 3, window).numpy()
  assert part.shape == (3, 24, 32, 3)
  diff = np.abs(part.astype(int) - full[:, 8:32, 16:48].astype(int))
  assert diff.mean() < 1.0
  np.testing.assert_array_equal(
      image_frames.frame_shape(tf.constant(frames[0])).numpy(), [48, 64])


def test_train_crop_window_scale_jitter():
  sides = []
  for s in range(50):
    y, x, h, w = crops.train_crop_window(
        tf.constant(256), tf.constant(340), (224, 224), 256, 320, _seed(s)).numpy()
    assert h == w and 0 <= y <= 256 - h and 0 <= x <= 340 - w
    sides.append(h)
  # resize 256..320 then crop 224 <=> source side 224*256/r in [179, 224]
  assert min(sides) >= 179 and max(sides) <= 224 and len(set(sides)) > 10


def test_eval_three_crops_landscape_and_portrait():
  land = crops.eval_crop_windows(tf.constant(100), tf.constant(200), (50, 50), 50,
                                      3).numpy()
  np.testing.assert_array_equal(land, [[0, 0, 100, 100], [0, 50, 100, 100],
                                       [0, 100, 100, 100]])
  port = crops.eval_crop_windows(tf.constant(200), tf.constant(100), (50, 50),
                                      100, 3).numpy()
  np.testing.assert_array_equal(port, [[0, 25, 50, 50], [75, 25, 50, 50],
                                       [150, 25, 50, 50]])
  centre = crops.eval_crop_windows(tf.constant(100), tf.constant(200), (50, 50),
                                        100, 1).numpy()
  np.testing.assert_array_equal(centre, [[25, 75, 50, 50]])
  with pytest.raises(ValueError, match='num_spatial_crops'):
    crops.eval_crop_windows(tf.constant(9), tf.constant(9), (4, 4), 4, 2)


def test_non_square_crops_keep_their_shape():
  """(H, W) = (48, 40): the shorter side resized, then an H x W window of it, in source pixels."""
  for s in range(20):
    y, x, h, w = crops.train_crop_window(
        tf.constant(256), tf.constant(340), (48, 40), 64, 80, _seed(s)).numpy()
    assert abs(h / w - 48 / 40) < 0.05 and 0 <= y <= 256 - h and 0 <= x <= 340 - w
  # shorter side 100 -> 50: a 48 x 40 crop is 96 x 80 source pixels; three along the longer side
  land = crops.eval_crop_windows(tf.constant(100), tf.constant(200), (48, 40), 50, 3).numpy()
  np.testing.assert_array_equal(land, [[2, 0, 96, 80], [2, 60, 96, 80], [2, 120, 96, 80]])
  port = crops.eval_crop_windows(tf.constant(200), tf.constant(100), (48, 40), 50, 3).numpy()
  np.testing.assert_array_equal(port, [[0, 10, 96, 80], [52, 10, 96, 80], [104, 10, 96, 80]])
  frames = np.random.default_rng(0).integers(0, 256, (2, 96, 80, 3), dtype=np.uint8)
  out = augment.resize_frames(frames, (48, 40), flip=True)
  assert out.shape == (2, 48, 40, 3)
  np.testing.assert_array_equal(out, augment.resize_frames(np.ascontiguousarray(frames[:, :, ::-1]), (48, 40)))


def test_resize_flip_and_identity():
  v = _video(h=16, w=16)
  np.testing.assert_allclose(reference.resize(v, 16), v, atol=1e-3)
  np.testing.assert_allclose(reference.resize(v, 16, tf.constant(True)),
                             v.numpy()[:, :, ::-1], atol=1e-3)
  u8 = tf.cast(v, tf.uint8)
  assert reference.resize(u8, 8).shape == (4, 8, 8, 3)


def test_flip_reverses_width_of_all_frames():
  v = _video()
  outs = [reference.random_flip(v, _seed(s)).numpy() for s in range(20)]
  flipped = [np.array_equal(o, v.numpy()[:, :, ::-1]) for o in outs]
  same = [np.array_equal(o, v.numpy()) for o in outs]
  assert all(f or s for f, s in zip(flipped, same, strict=True)) and any(flipped) and any(same)


def _constant_in_time(video):
  return np.allclose(video, video[:1], atol=1e-3)


@pytest.mark.parametrize('op', range(len(random_draws.RANDAUGMENT_OPS)))
def test_randaugment_ops_are_video_consistent(op):
  # Identical frames stay identical whatever op is drawn: one op per clip.
  frame = _video(t=1, seed=op)
  video = tf.tile(frame, [3, 1, 1, 1])
  branches = reference.randaugment_ops(video, 0.9, tf.constant(-1.0))
  out = branches[op]().numpy()
  assert out.shape == (3, 20, 24, 3) and _constant_in_time(out)
  if random_draws.RANDAUGMENT_OPS[op] != 'identity':
    assert not np.allclose(out, video.numpy())


def test_randaugment_colour_jitter_and_erasing_keep_frames_consistent():
  video = tf.tile(_video(t=1), [4, 1, 1, 1])
  for s in range(8):
    out = reference.randaugment(video, _seed(s), num_layers=3, magnitude=10)
    assert _constant_in_time(out.numpy())
    assert 0 <= out.numpy().min() and out.numpy().max() <= 255
    jit = reference.color_jitter(video, _seed(s), strength=1.0, prob=1.0)
    assert _constant_in_time(jit.numpy()) and not np.allclose(jit, video)
    erased = reference.random_erasing(video, _seed(s), prob=1.0).numpy()
    assert _constant_in_time(erased)
    changed = ~np.isclose(erased[0], video.numpy()[0]).all(-1)
    ys, xs = np.nonzero(changed)
    area = changed.sum()
    assert area == (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)  # a box
    assert 0.01 * 480 <= area <= 0.4 * 480


def test_train_ops_follow_the_config():
  cfg = data_config.get_config()
  names = random_draws.train_op_names(cfg)
  assert names == []  # the flip is done on the crop, normalisation on device
  cfg.update(horizontal_flip=False, color_jitter=0.4, random_erasing=0.25,
             randaugment={'num_layers': 2, 'magnitude': 9})
  names = random_draws.train_op_names(cfg)
  assert names == ['color_jitter', 'randaugment', 'random_erasing']


def test_color_jitter_equals_the_four_ops_one_by_one():
  # The fused jitter equals brightness -> contrast (per-frame channel means,
  # as tf.image.adjust_contrast) -> saturation (blend with luma grey) -> hue
  # (rotation of the YIQ chroma plane), applied one after the other.
  video = np.random.default_rng(3).uniform(60, 190, (2, 6, 5, 3))
  seed = _seed(11)
  out = reference.color_jitter(tf.constant(video, tf.float32), seed,
                                strength=0.5, prob=1.0).numpy()
  u = tf.random.stateless_uniform([4], random_draws.fold_in(seed, 1), -1.0,
                                  1.0).numpy()
  x = video * (1 + 0.2 * u[0])
  x = tf.image.adjust_contrast(x, 1 + 0.2 * u[1]).numpy()
  grey = x @ np.array([0.299, 0.587, 0.114])
  x = grey[..., None] + (1 + 0.2 * u[2]) * (x - grey[..., None])
  a = np.array(random_draws.RGB_TO_YIQ)
  yiq = x @ a.T
  theta = 2 * np.pi * 0.05 * u[3]
  c, s = np.cos(theta), np.sin(theta)
  i, q = yiq[..., 1].copy(), yiq[..., 2].copy()
  yiq[..., 1], yiq[..., 2] = c * i - s * q, s * i + c * q
  x = np.clip(yiq @ np.linalg.inv(a.T), 0, 255)
  np.testing.assert_allclose(out, x, atol=0.05)
  assert np.abs(out - video).max() > 5


# ------------------------------------------ OpenCV clips vs the TF reference --
def _smooth_video(t=4, size=32, seed=0):
  """uint8-valued float clip: smooth content, a different offset per frame."""
  rng = np.random.default_rng(seed)
  base = rng.uniform(20, 235, (1, 4, 4, 3)).astype(np.float32)
  video = tf.image.resize(base, [size, size], 'bicubic')
  shift = tf.constant(rng.uniform(-20, 20, (t, 1, 1, 3)), tf.float32)
  return tf.round(tf.clip_by_value(video + shift, 0.0, 255.0))


def _close(a, b, levels=2, frac=0.03, mean=0.8):
  """uint8 clips equal up to rounding: few pixels off by > `levels`."""
  diff = np.abs(a.astype(np.float32) - b.astype(np.float32))
  assert np.mean(diff > levels) <= frac and diff.mean() <= mean, (
      np.mean(diff > levels), diff.mean())


@pytest.mark.parametrize('op', random_draws.RANDAUGMENT_OPS)
@pytest.mark.parametrize('sign', [-1.0, 1.0])
def test_opencv_randaugment_ops_equal_the_reference(op, sign):
  video = _smooth_video()
  ref = reference.randaugment_ops(video, 0.9, tf.constant(sign))
  want = reference.to_uint8(ref[random_draws.RANDAUGMENT_OPS.index(op)]()).numpy()
  got = augment.RANDAUGMENT[op](video.numpy().astype(np.uint8), 0.9, sign)
  assert got.dtype == np.uint8 and got.shape == want.shape
  # Geometric ops sample the nearest pixel: ties at x.5 may round the other
  # way, which moves a few rows/columns of a smooth image by one pixel.
  _close(got, want, frac=0.02 if op in ('rotate', 'shear_x', 'shear_y') else 0.01)
  if op != 'identity':
    assert not np.array_equal(got, video.numpy().astype(np.uint8))


def _full_aug_config(erase=0.5, **kw):
  cfg = data_config.get_config()
  cfg.update(color_jitter=0.4, randaugment={'num_layers': 2, 'magnitude': 9},
             random_erasing=erase, image_size=32, **kw)
  return cfg


def test_opencv_clip_equals_op_by_op_reference():
  # Same draws, same ops: the OpenCV clip (window already at the crop size,
  # so the resize is a copy) and the TF reference agree up to rounding, and
  # random erasing puts the same noise in the same box.
  video = _smooth_video()
  cfg = _full_aug_config()
  ref = tf.function(reference.compose(reference.train_ops(cfg)))
  fn = augment.train_clip_fn(cfg)
  drawn, erased = set(), 0
  for s in range(24):
    seed = _seed(s, 3)
    got = fn(tf.cast(video, tf.uint8), tf.constant(False), seed).numpy()
    want = reference.to_uint8(ref(video, seed)).numpy()
    draws = random_draws.train_draws(cfg, seed, 32, 32)
    ops = [random_draws.RANDAUGMENT_OPS[i] for i in draws['ops'].numpy()]
    drawn.update(ops)
    _close(got, want, frac=0.06, mean=1.0)
    if draws['box'][0]:
      erased += 1
      _, y0, x0, eh, ew = draws['box'].numpy()
      np.testing.assert_array_equal(got[:, y0:y0 + eh, x0:x0 + ew],
                                    want[:, y0:y0 + eh, x0:x0 + ew])
  assert len(drawn) >= 10 and 0 < erased < 24


def test_opencv_resize_and_flip_match_tf():
  rng = np.random.default_rng(1)
  window = tf.image.resize(rng.uniform(0, 255, (3, 5, 7, 3)), [20, 26],
                           'bicubic')
  window = tf.cast(tf.clip_by_value(tf.round(window), 0, 255), tf.uint8)
  for size in (32, 16):  # up and down
    want = reference.to_uint8(reference.resize(window, size)).numpy()
    got = augment.resize_frames(window.numpy(), (size, size))
    _close(got, want, levels=1, frac=0.0, mean=0.5)
    flipped = augment.resize_frames(window.numpy(), (size, size), flip=True)
    want = reference.to_uint8(reference.resize(window, size, True)).numpy()
    _close(flipped, want, levels=1, frac=0.0, mean=0.5)
  # train_draws' jitter is the reference's: on a clip the jitter is the only
  # op of, the OpenCV clip equals color_jitter.
  cfg = data_config.get_config()
  cfg.update(color_jitter=1.0, color_jitter_prob=1.0, image_size=20)
  clip = tf.cast(tf.image.resize(tf.cast(window, tf.float32), [20, 20]),
                 tf.uint8)
  got = augment.train_clip_fn(cfg)(clip, tf.constant(False), _seed(4)).numpy()
  want = reference.to_uint8(reference.color_jitter(
      tf.cast(clip, tf.float32), random_draws.fold_in(_seed(4), 100), 1.0,
      1.0)).numpy()
  _close(got, want, levels=1, frac=0.0, mean=0.5)
  assert np.abs(got.astype(int) - clip.numpy()).max() > 5
