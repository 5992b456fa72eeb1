"""Crop windows of a clip, in source pixels, and the random flip.

A window is [y, x, height, width] int32 in the frames' own pixels: training takes a random square whose side
stands for `image_size` after a random resize of the shorter side (scale jitter), so only that window is decoded
(of a JPEG) and then resized; evaluation takes the centre, or three crops along the longer side.
"""
import tensorflow as tf

from vvt.data.transforms.random_draws import ALG
from vvt.data.transforms.random_draws import fold_in


def train_crop_window(height, width, image_size, min_resize, max_resize, seed):
  """Random crop for 'resize shorter side to U[min, max], crop image_size'.

  Expressed in source pixels: a square of side image_size * short / r, so only
  that window is decoded and then resized to image_size.
  """
  short = tf.cast(tf.minimum(height, width), tf.float32)
  r = tf.random.stateless_uniform(
      [], fold_in(seed, 0), float(min_resize), float(max_resize) + 1e-6,
      alg=ALG)
  side = tf.cast(tf.round(image_size * short / r), tf.int32)
  side = tf.clip_by_value(side, 1, tf.minimum(height, width))
  oy = tf.random.stateless_uniform([], fold_in(seed, 1), 0, height - side + 1,
                                   dtype=tf.int32, alg=ALG)
  ox = tf.random.stateless_uniform([], fold_in(seed, 2), 0, width - side + 1,
                                   dtype=tf.int32, alg=ALG)
  return tf.stack([oy, ox, side, side])


def eval_crop_windows(height, width, image_size, resize, num_crops):
  """(num_crops, 4) windows: centre, or 3 crops along the longer side.

  Landscape video: left / centre / right; portrait: top / centre / bottom.
  """
  if num_crops not in (1, 3):
    raise ValueError(f'dataset.num_spatial_crops must be 1 or 3, got {num_crops}')
  short = tf.minimum(height, width)
  side = tf.cast(tf.round(image_size * tf.cast(short, tf.float32) / resize),
                 tf.int32)
  side = tf.clip_by_value(side, 1, short)
  cy, cx = (height - side) // 2, (width - side) // 2
  if num_crops == 1:
    return tf.stack([cy, cx, side, side])[None]
  landscape = width >= height
  ys = tf.where(landscape, tf.stack([cy, cy, cy]),
                tf.stack([0, cy, height - side]))
  xs = tf.where(landscape, tf.stack([0, cx, width - side]),
                tf.stack([cx, cx, cx]))
  sides = tf.fill([3], side)
  return tf.stack([ys, xs, sides, sides], axis=1)


def random_flip_flag(seed):
  """True with probability 1/2."""
  return tf.random.stateless_uniform([], seed, alg=ALG) < 0.5
