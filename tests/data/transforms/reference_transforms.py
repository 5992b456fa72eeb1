"""The op-by-op float TF reference of the training augmentations.

`vvt.data.transforms.augment` makes the training clip on uint8 frames with
OpenCV, with the random numbers of `vvt.data.transforms.random_draws.train_draws`.
The functions here do the same ops one by one as float TF ops in the style of
big_vision, drawing their random numbers with the same `random_draws` functions:
tests/data/transforms/test_augment.py holds the OpenCV clip to this reference, up
to rounding. Videos are float (T, H, W, 3) in [0, 255]; every random op takes
a stateless seed (a [2] int tensor).

    train_ops(cfg)  # [(name, fn(video, seed) -> video)], names of
                    # random_draws.train_op_names(cfg)
    compose(ops)    # fn(video, seed): op i seeded by fold_in(seed, 100 + i)
    to_uint8(video) # rounded as augment's uint8 ops
"""
import math

import tensorflow as tf

from vvt.data.transforms import crops
from vvt.data.transforms import random_draws
from vvt.data.transforms.random_draws import fold_in

_LUMA = random_draws.RGB_TO_YIQ[0]


def resize(video, size, flip=False):
  """(T, h, w, 3) (uint8 or float) -> float32 (T, size, size, 3), bilinear.

  Flips left-right first when the bool tensor `flip` is true (cheapest on the
  small uint8 crop), then resizes with half-pixel centres.
  """
  video = tf.cond(tf.convert_to_tensor(flip), lambda: tf.reverse(video, [2]),
                  lambda: video)
  return tf.raw_ops.ResizeBilinear(images=video, size=[size, size],
                                   half_pixel_centers=True)


def random_flip(video, seed):
  """Flips all frames left-right with probability 1/2."""
  flip = crops.random_flip_flag(seed)
  return tf.cond(flip, lambda: tf.reverse(video, axis=[2]), lambda: video)


def color_jitter(video, seed, strength, prob=0.8):
  """Brightness, contrast, saturation (x [1-0.4s, 1+0.4s]) and hue (+-0.1s turn).

  One set of factors per clip, applied with probability `prob`. All four are
  linear in RGB, so they are composed into one 3x3 matrix and a per-frame
  offset (contrast pulls each frame towards its per-channel mean; saturation
  towards grey; hue rotates the chroma plane of YIQ): one pass over the clip.
  """
  apply, u = random_draws.jitter_draws(seed, prob)

  def jitter():
    scale, offset_scale = random_draws.jitter_params(u, strength)
    mean = tf.reduce_mean(video, axis=[1, 2], keepdims=True)  # (T, 1, 1, 3)
    offset = tf.einsum('thwc,cd->thwd', mean, offset_scale)
    out = tf.einsum('thwc,cd->thwd', video, scale) + offset
    return tf.clip_by_value(out, 0.0, 255.0)
  return tf.cond(apply, jitter, lambda: video)


def _blend(degenerate, video, factor):
  return tf.clip_by_value(degenerate + factor * (video - degenerate), 0.0, 255.0)


def _affine(video, transform):
  """Same affine map (8 numbers, output->input, as ImageProjectiveTransform) on
  every frame; nearest neighbour, outside pixels filled with grey 128.

  A gather, so XLA can compile it along with the other per-pixel ops.
  """
  shape = tf.shape(video)
  h, w = shape[1], shape[2]
  hf, wf = tf.cast(h - 1, tf.float32), tf.cast(w - 1, tf.float32)
  ys, xs = tf.meshgrid(tf.range(h, dtype=tf.float32),
                       tf.range(w, dtype=tf.float32), indexing='ij')
  t = transform
  x_in = tf.round(t[0] * xs + t[1] * ys + t[2])
  y_in = tf.round(t[3] * xs + t[4] * ys + t[5])
  inside = (x_in >= 0) & (x_in <= wf) & (y_in >= 0) & (y_in <= hf)
  idx = (tf.cast(tf.clip_by_value(y_in, 0.0, hf), tf.int32) * w
         + tf.cast(tf.clip_by_value(x_in, 0.0, wf), tf.int32))
  flat = tf.reshape(video, tf.stack([shape[0], h * w, shape[3]]))
  out = tf.reshape(tf.gather(flat, tf.reshape(idx, [-1]), axis=1), shape)
  return tf.where(inside[None, :, :, None], out, 128.0)


def _subsample(video):
  """Every 4th row and column of every frame: cheap clip statistics."""
  return video[:, ::4, ::4]


def _equalize(video):
  """Histogram equalisation per channel over the whole clip.

  The histograms are taken on a 1/16 subsample of the pixels (same result up
  to sampling noise, a fraction of the cost); one gather applies the 3 LUTs.
  """
  sample = _subsample(video)
  luts = []
  for c in range(3):
    hist = tf.cast(tf.histogram_fixed_width(sample[..., c], [-0.5, 255.5],
                                            nbins=256), tf.float32)
    cdf = tf.cumsum(hist)
    cdf_min = tf.reduce_min(tf.where(cdf > 0, cdf, cdf[-1]))
    luts.append(tf.clip_by_value(
        (cdf - cdf_min) / tf.maximum(cdf[-1] - cdf_min, 1.0) * 255.0, 0.0, 255.0))
  idx = tf.cast(tf.clip_by_value(video + 0.5, 0.0, 255.0), tf.int32)
  return tf.gather(tf.concat(luts, 0), idx + tf.constant([0, 256, 512]))


def _sharpen_degenerate(video):
  kernel = tf.constant([[1., 1., 1.], [1., 5., 1.], [1., 1., 1.]]) / 13.0
  kernel = tf.tile(kernel[:, :, None, None], [1, 1, 3, 1])
  return tf.nn.depthwise_conv2d(video, kernel, [1, 1, 1, 1], 'SAME')


def randaugment_ops(video, level, sign):
  """Branches of RandAugment, in the order of random_draws.RANDAUGMENT_OPS;
  level in [0, 1], sign in {-1, +1}."""
  h = tf.cast(tf.shape(video)[1], tf.float32)
  w = tf.cast(tf.shape(video)[2], tf.float32)
  enhance = 1.0 + sign * 0.9 * level

  def rotate():
    theta = sign * level * 30.0 * math.pi / 180.0
    c, s = tf.cos(theta), tf.sin(theta)
    cx, cy = (w - 1) / 2, (h - 1) / 2
    return _affine(video, tf.stack([c, s, cx - c * cx - s * cy,
                                    -s, c, cy + s * cx - c * cy, 0.0, 0.0]))

  def shear(axis):
    s = sign * level * 0.3
    t = [1.0, s, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0] if axis == 'x' else \
        [1.0, 0.0, 0.0, s, 1.0, 0.0, 0.0, 0.0]
    return lambda: _affine(video, tf.stack(t))

  def translate(axis):
    # A whole-pixel shift: slice and pad with grey (one pass, no gather).
    size_i = tf.shape(video)[2 if axis == 'x' else 1]
    shift = tf.cast(tf.round(sign * level * 0.45 * tf.cast(size_i, tf.float32)),
                    tf.int32)
    shift = tf.clip_by_value(shift, -size_i, size_i)
    before, after = tf.maximum(-shift, 0), tf.maximum(shift, 0)
    def run():
      if axis == 'x':
        kept = video[:, :, after:size_i - before]
        pads = [[0, 0], [0, 0], [before, after], [0, 0]]
      else:
        kept = video[:, after:size_i - before]
        pads = [[0, 0], [before, after], [0, 0], [0, 0]]
      return tf.pad(kept, pads, constant_values=128.0)
    return run

  def auto_contrast():  # channel range from a 1/16 subsample, then clipped
    sample = tf.reshape(_subsample(video), [-1, 3])
    lo, hi = tf.reduce_min(sample, axis=0), tf.reduce_max(sample, axis=0)
    scale = tf.where(hi > lo, 255.0 / tf.maximum(hi - lo, 1e-3), 1.0)
    out = tf.nn.bias_add(video * scale, tf.where(hi > lo, -lo * scale, 0.0))
    return tf.clip_by_value(out, 0.0, 255.0)

  def solarize():
    threshold = 256.0 * (1.0 - level)
    return tf.where(video >= threshold, 255.0 - video, video)

  def posterize():
    shift = tf.cast(tf.round(4.0 * level), tf.float32)
    q = tf.pow(2.0, shift)
    return tf.floor(video / q) * q

  def contrast():
    mean = tf.tensordot(tf.reduce_mean(video, axis=[0, 1, 2]),
                        tf.constant(_LUMA), 1)
    return _blend(mean, video, enhance)

  def colour():  # blend with luma grey: one 3x3 matrix
    luma = tf.constant(_LUMA)
    matrix = enhance * tf.eye(3) + (1.0 - enhance) * luma[:, None] * tf.ones([1, 3])
    return tf.clip_by_value(tf.einsum('thwc,cd->thwd', video, matrix), 0.0, 255.0)

  return [
      lambda: video,                                       # identity
      auto_contrast,
      lambda: _equalize(video),
      rotate,
      solarize,
      colour,
      posterize,
      contrast,
      lambda: _blend(tf.zeros_like(video), video, enhance),  # brightness
      lambda: _blend(_sharpen_degenerate(video), video, enhance),  # sharpness
      shear('x'), shear('y'), translate('x'), translate('y'),
  ]


def randaugment(video, seed, num_layers=2, magnitude=9):
  """RandAugment with one op (and one sign) per layer for the whole clip.

  `magnitude` is on the paper's 0..10 scale. `video` is float in [0, 255].
  """
  ops, signs = random_draws.randaugment_draws(seed, num_layers)
  for layer in range(num_layers):
    video = tf.switch_case(ops[layer], randaugment_ops(
        video, random_draws.randaugment_level(magnitude), signs[layer]))
  return video


def random_erasing(video, seed, prob):
  """With probability `prob`, fills one random box (same in every frame) with
  random pixels, uniform in [0, 255] per pixel and channel.

  This is the 'random values' fill of Random Erasing (Zhong et al., 2020):
  erasing runs before the uint8 clip leaves the host, so the box's noise does
  not depend on the normalisation chosen (timm's 'pixel' mode, N(0, 1) after
  normalisation, is the same idea on the normalised scale).
  """
  shape = tf.shape(video)
  h, w = shape[1], shape[2]
  box = random_draws.erasing_box(seed, h, w, prob)
  def erase():
    noise = tf.pad(tf.cast(random_draws.erasing_noise(seed, box), video.dtype),
                   tf.stack([[0, 0], [box[1], h - box[1] - box[3]],
                             [box[2], w - box[2] - box[4]], [0, 0]]))
    ys, xs = tf.range(h)[:, None], tf.range(w)[None, :]
    inside = ((ys >= box[1]) & (ys < box[1] + box[3])
              & (xs >= box[2]) & (xs < box[2] + box[4]))
    return tf.where(inside[None, :, :, None], noise, video)
  return tf.cond(box[0] > 0, erase, lambda: video)


def to_uint8(video):
  """float [0, 255] -> uint8, rounded (half up) and clipped."""
  return tf.cast(tf.clip_by_value(video + 0.5, 0.0, 255.0), tf.uint8)


def train_ops(cfg):
  """Training augmentations after the crop: [(name, fn(video, seed))], one
  per name of `random_draws.train_op_names(cfg)`.

  Videos enter and leave as float [0, 255] (`to_uint8` rounds them, as
  `vvt.data.transforms.augment` does per op). (The random flip, `cfg.horizontal_flip`,
  is done on the crop before its resize, see `resize`; normalisation on the
  device.)
  """
  ops = {
      'color_jitter': lambda v, s: color_jitter(
          v, s, float(cfg.color_jitter), float(cfg.color_jitter_prob)),
      'randaugment': lambda v, s: randaugment(
          v, s, *random_draws.randaugment_args(cfg)),
      'random_erasing': lambda v, s: random_erasing(
          v, s, float(cfg.random_erasing)),
  }
  return [(name, ops[name]) for name in random_draws.train_op_names(cfg)]


def compose(ops):
  """One fn(video, seed) applying `ops` in order, op i seeded by
  fold_in(seed, 100 + i): the op-by-op reference of
  `vvt.data.transforms.augment.train_clip_fn`."""
  def apply(video, seed):
    for i, (_, fn) in enumerate(ops):
      video = fn(video, fold_in(seed, 100 + i))
    return video
  return apply
