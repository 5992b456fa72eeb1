"""Crop windows of a clip, in source pixels, and the random flip.

A window is [y, x, height, width] int32 in the frames' own pixels: training takes a random window that stands for
the crop `image_size` = (H, W) after a random resize of the shorter side (scale jitter), so only that window is
decoded (of a JPEG) and then resized; evaluation takes the centre, or three crops along the longer side. The
shorter side is resized to its value and the H x W crop taken from the frame so resized (the config checks keep
the resize at least max(H, W), so the crop fits whichever side is the shorter).
"""
import tensorflow as tf

from vvt.data.transforms.random_draws import ALG
from vvt.data.transforms.random_draws import fold_in


def train_crop_window(height, width, image_size, min_resize, max_resize, seed):
  """Random crop for 'resize shorter side to U[min, max], crop image_size = (H, W)'.

  Expressed in source pixels: a window of H * short / r by W * short / r (each at most the frame's side), so
  only that window is decoded and then resized to (H, W). Square (S, S): a square of side S * short / r.
  """
  crop_h, crop_w = image_size
  short = tf.cast(tf.minimum(height, width), tf.float32)
  r = tf.random.stateless_uniform(
      [], fold_in(seed, 0), float(min_resize), float(max_resize) + 1e-6,
      alg=ALG)
  wh = _window_side(crop_h, short, r, tf.minimum(height, width))
  ww = _window_side(crop_w, short, r, tf.minimum(height, width))
  oy = tf.random.stateless_uniform([], fold_in(seed, 1), 0, height - wh + 1,
                                   dtype=tf.int32, alg=ALG)
  ox = tf.random.stateless_uniform([], fold_in(seed, 2), 0, width - ww + 1,
                                   dtype=tf.int32, alg=ALG)
  return tf.stack([oy, ox, wh, ww])


def _window_side(crop, short, resize, limit):
  """The source pixels of `crop` output pixels once the shorter side `short` (float32) is resized to `resize`:
  round(crop * short / resize), in [1, limit]."""
  return tf.clip_by_value(tf.cast(tf.round(crop * short / resize), tf.int32), 1, limit)


def eval_crop_windows(height, width, image_size, resize, num_crops):
  """(num_crops, 4) windows of `image_size` = (H, W) after the shorter side is resized to `resize`: centre, or 3
  crops along the longer side.

  Landscape video: left / centre / right; portrait: top / centre / bottom.
  """
  if num_crops not in (1, 3):
    raise ValueError(f'dataset.num_spatial_crops must be 1 or 3, got {num_crops}')
  crop_h, crop_w = image_size
  short = tf.minimum(height, width)
  wh = _window_side(crop_h, tf.cast(short, tf.float32), resize, short)
  ww = _window_side(crop_w, tf.cast(short, tf.float32), resize, short)
  cy, cx = (height - wh) // 2, (width - ww) // 2
  if num_crops == 1:
    return tf.stack([cy, cx, wh, ww])[None]
  landscape = width >= height
  ys = tf.where(landscape, tf.stack([cy, cy, cy]),
                tf.stack([0, cy, height - wh]))
  xs = tf.where(landscape, tf.stack([0, cx, width - ww]),
                tf.stack([cx, cx, cx]))
  return tf.stack([ys, xs, tf.fill([3], wh), tf.fill([3], ww)], axis=1)


def random_flip_flag(seed):
  """True with probability 1/2."""
  return tf.random.stateless_uniform([], seed, alg=ALG) < 0.5
