"""Spatial ops on one video, as small named TF functions.

A video is a (T, H, W, 3) tensor. Frames are decoded from encoded strings
straight into the crop window (`decode_frames` with a window decodes only that
window of a JPEG); the input pipeline then resizes and augments the uint8
window with OpenCV (`vvt.data.augment`), with the random numbers drawn here
(`train_draws`). Every random op takes a stateless seed (a [2] int tensor), so
a clip's augmentation depends only on (data seed, position in the stream).

`train_ops(cfg)` composes the training augmentations as float TF ops in the
style of big_vision, a list of (name, fn(video, seed) -> video): the
reference `vvt.data.augment` is tested against. Normalisation
(`vvt.data.normalization`) runs on the device.
"""
import math

import tensorflow as tf

# Philox named explicitly: the random streams do not depend on TF's default
# ('auto_select') generator. `vvt.data.augment` draws with `train_draws`, in
# TF, exactly what the op-by-op functions draw.
_ALG = 'philox'



def fold_in(seed, k):
  """A new stateless seed derived from `seed` and the int `k`."""
  return tf.random.experimental.stateless_fold_in(seed, k, alg=_ALG)


# ----------------------------------------------------------------- decoding --
def frame_shape(encoded):
  """(height, width) int32 of one encoded frame (JPEG: header only)."""
  return tf.cond(
      tf.io.is_jpeg(encoded),
      lambda: tf.io.extract_jpeg_shape(encoded)[:2],
      lambda: tf.shape(tf.io.decode_image(
          encoded, channels=3, expand_animations=False))[:2])


def _decode_one(encoded, window):
  if window is None:
    return tf.io.decode_image(encoded, channels=3, expand_animations=False)

  def jpeg():
    return tf.io.decode_and_crop_jpeg(encoded, window, channels=3)

  def other():
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    return image[window[0]:window[0] + window[2], window[1]:window[1] + window[3]]
  return tf.cond(tf.io.is_jpeg(encoded), jpeg, other)


def decode_frames(encoded, num, window=None):
  """Decodes `num` (static) encoded frames -> uint8 (num, h, w, 3).

  `window` = [y, x, height, width] decodes only that window. Frames of
  different sizes, or undecodable data, raise (the pipeline turns that into a
  named error or a counted skip).
  """
  frames = [_decode_one(encoded[i], window) for i in range(num)]
  return tf.stack(frames)


# ------------------------------------------------------------ crop windows --
def train_crop_window(height, width, image_size, min_resize, max_resize, seed):
  """Random crop for 'resize shorter side to U[min, max], crop image_size'.

  Expressed in source pixels: a square of side image_size * short / r, so only
  that window is decoded and then resized to image_size.
  """
  short = tf.cast(tf.minimum(height, width), tf.float32)
  r = tf.random.stateless_uniform(
      [], fold_in(seed, 0), float(min_resize), float(max_resize) + 1e-6,
      alg=_ALG)
  side = tf.cast(tf.round(image_size * short / r), tf.int32)
  side = tf.clip_by_value(side, 1, tf.minimum(height, width))
  oy = tf.random.stateless_uniform([], fold_in(seed, 1), 0, height - side + 1,
                                   dtype=tf.int32, alg=_ALG)
  ox = tf.random.stateless_uniform([], fold_in(seed, 2), 0, width - side + 1,
                                   dtype=tf.int32, alg=_ALG)
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


def resize(video, size, flip=False):
  """(T, h, w, 3) (uint8 or float) -> float32 (T, size, size, 3), bilinear.

  Flips left-right first when the bool tensor `flip` is true (cheapest on the
  small uint8 crop), then resizes with half-pixel centres.
  """
  video = tf.cond(tf.convert_to_tensor(flip), lambda: tf.reverse(video, [2]),
                  lambda: video)
  return tf.raw_ops.ResizeBilinear(images=video, size=[size, size],
                                   half_pixel_centers=True)


def random_flip_flag(seed):
  """True with probability 1/2."""
  return tf.random.stateless_uniform([], seed, alg=_ALG) < 0.5


# ------------------------------------------------------------ augmentations --
def random_flip(video, seed):
  """Flips all frames left-right with probability 1/2."""
  flip = tf.random.stateless_uniform([], seed, alg=_ALG) < 0.5
  return tf.cond(flip, lambda: tf.reverse(video, axis=[2]), lambda: video)


_RGB_TO_YIQ = ((0.299, 0.587, 0.114),
               (0.596, -0.274, -0.322),
               (0.211, -0.523, 0.312))


def _jitter_draws(seed, prob):
  """(apply: bool, u: (4,) uniform in [-1, 1]) of colour jitter."""
  apply = tf.random.stateless_uniform([], fold_in(seed, 0), alg=_ALG) < prob
  u = tf.random.stateless_uniform([4], fold_in(seed, 1), -1.0, 1.0, alg=_ALG)
  return apply, u


def _jitter_params(u, strength):
  """Colour jitter as (matrix, offset scale) from u = 4 uniforms in [-1, 1]."""
  fb = 1.0 + 0.4 * strength * u[0]
  fc = 1.0 + 0.4 * strength * u[1]
  fs = 1.0 + 0.4 * strength * u[2]
  theta = 2.0 * math.pi * 0.1 * strength * u[3]
  luma = tf.constant(_RGB_TO_YIQ[0])
  sat = fs * tf.eye(3) + (1.0 - fs) * luma[:, None] * tf.ones([1, 3])
  to_yiq = tf.transpose(tf.constant(_RGB_TO_YIQ))
  c, s = tf.cos(theta), tf.sin(theta)
  rot = tf.stack([tf.stack([1.0, 0.0, 0.0]), tf.stack([0.0, c, s]),
                  tf.stack([0.0, -s, c])])
  matrix = sat @ (to_yiq @ rot @ tf.linalg.inv(to_yiq))
  return fb * fc * matrix, (1.0 - fc) * fb * matrix


def color_jitter(video, seed, strength, prob=0.8):
  """Brightness, contrast, saturation (x [1-0.4s, 1+0.4s]) and hue (+-0.1s turn).

  One set of factors per clip, applied with probability `prob`. All four are
  linear in RGB, so they are composed into one 3x3 matrix and a per-frame
  offset (contrast pulls each frame towards its per-channel mean; saturation
  towards grey; hue rotates the chroma plane of YIQ): one pass over the clip.
  """
  apply, u = _jitter_draws(seed, prob)

  def jitter():
    scale, offset_scale = _jitter_params(u, strength)
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


def _randaugment_ops(video, level, sign):
  """Branches of RandAugment; level in [0, 1], sign in {-1, +1}."""
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
                        tf.constant(_RGB_TO_YIQ[0]), 1)
    return _blend(mean, video, enhance)

  def colour():  # blend with luma grey: one 3x3 matrix
    luma = tf.constant(_RGB_TO_YIQ[0])
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


RANDAUGMENT_OPS = ('identity', 'auto_contrast', 'equalize', 'rotate', 'solarize',
                   'color', 'posterize', 'contrast', 'brightness', 'sharpness',
                   'shear_x', 'shear_y', 'translate_x', 'translate_y')


def randaugment(video, seed, num_layers=2, magnitude=9):
  """RandAugment with one op (and one sign) per layer for the whole clip.

  `magnitude` is on the paper's 0..10 scale. `video` is float in [0, 255].
  """
  ops, signs = _randaugment_draws(seed, num_layers)
  for layer in range(num_layers):
    video = tf.switch_case(ops[layer], _randaugment_ops(
        video, randaugment_level(magnitude), signs[layer]))
  return video


def randaugment_level(magnitude):
  """The paper's magnitude 0..10 as a level in [0, 1]."""
  return min(max(float(magnitude), 0.0), 10.0) / 10.0


def _randaugment_draws(seed, num_layers):
  """(ops: (num_layers,) int32 indices into RANDAUGMENT_OPS, signs: +-1.0)."""
  ops, signs = [], []
  for layer in range(num_layers):
    s = fold_in(seed, layer)
    ops.append(tf.random.stateless_uniform(
        [], fold_in(s, 0), 0, len(RANDAUGMENT_OPS), dtype=tf.int32, alg=_ALG))
    coin = tf.random.stateless_uniform([], fold_in(s, 1), alg=_ALG)
    signs.append(tf.where(coin < 0.5, -1.0, 1.0))
  return (tf.stack(ops) if ops else tf.zeros([0], tf.int32),
          tf.stack(signs) if signs else tf.zeros([0]))


def _erasing_box(seed, h, w, prob):
  """[on, y0, x0, height, width] int32 of random erasing's box in a (h, w) frame.

  Area 2%..1/3 of the frame, aspect ratio 0.3..3.3 (log-uniform); `on` is 1
  with probability `prob`.
  """
  u = tf.random.stateless_uniform([5], fold_in(seed, 1), alg=_ALG)
  area = (0.02 + u[0] * (1.0 / 3.0 - 0.02)) * tf.cast(h * w, tf.float32)
  ratio = tf.exp(math.log(0.3) + u[1] * (math.log(1 / 0.3) - math.log(0.3)))
  eh = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area * ratio)), tf.int32), 1, h)
  ew = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area / ratio)), tf.int32), 1, w)
  y0 = tf.cast(u[2] * tf.cast(h - eh + 1, tf.float32), tf.int32)
  x0 = tf.cast(u[3] * tf.cast(w - ew + 1, tf.float32), tf.int32)
  return tf.stack([tf.cast(u[4] < prob, tf.int32), y0, x0, eh, ew])


def _erasing_noise(seed, box):
  """(1, height, width, 3) uint8 of the box: uniform random pixels."""
  noise = tf.random.stateless_uniform(tf.stack([1, box[3], box[4], 3]),
                                      fold_in(seed, 2), 0, 256, dtype=tf.int32,
                                      alg=_ALG)
  return tf.cast(noise, tf.uint8)


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
  box = _erasing_box(seed, h, w, prob)
  def erase():
    noise = tf.pad(tf.cast(_erasing_noise(seed, box), video.dtype),
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


def _randaugment_args(cfg):
  ra = cfg.randaugment
  if ra is None:
    return None
  get = ra.get if hasattr(ra, 'get') else None
  if get is None:
    raise ValueError('dataset.randaugment must be None or a dict with '
                     f'num_layers and magnitude, got {ra!r}')
  num_layers, magnitude = int(get('num_layers', 2)), float(get('magnitude', 9))
  unknown = set(ra.keys()) - {'num_layers', 'magnitude'}
  if unknown:
    raise ValueError(f'dataset.randaugment: unknown fields {sorted(unknown)}')
  return (num_layers, magnitude) if num_layers > 0 else None


def train_ops(cfg):
  """Training augmentations after the crop: [(name, fn(video, seed))].

  Videos enter and leave as float [0, 255] (`to_uint8` rounds them, as
  `vvt.data.augment` does per op). (The random flip, `cfg.horizontal_flip`, is done on the crop
  before its resize, see `resize`; normalisation on the device.)
  """
  ops = []
  if cfg.color_jitter > 0:
    ops.append(('color_jitter', lambda v, s: color_jitter(
        v, s, float(cfg.color_jitter), float(cfg.color_jitter_prob))))
  ra = _randaugment_args(cfg)
  if ra is not None:
    ops.append(('randaugment', lambda v, s: randaugment(v, s, *ra)))
  if cfg.random_erasing > 0:
    p = float(cfg.random_erasing)
    ops.append(('random_erasing', lambda v, s: random_erasing(v, s, p)))
  return ops


def compose(ops):
  """One fn(video, seed) applying `ops` in order, op i seeded by
  fold_in(seed, 100 + i): the op-by-op reference of `train_augment`."""
  def apply(video, seed):
    for i, (_, fn) in enumerate(ops):
      video = fn(video, fold_in(seed, 100 + i))
    return video
  return apply


def train_draws(cfg, seed, h, w):
  """Every random number of `train_ops(cfg)` for one clip of (h, w) frames,
  as a dict of tensors, for `vvt.data.augment`: the same draws as the op-by-op
  functions (op i of train_ops seeded by fold_in(seed, 100 + i), as in
  `compose`). 'jitter_on', 'jitter_scale' and 'jitter_offset' (3, 3) of
  colour jitter (`_jitter_params`); 'ops', 'signs' of RandAugment's layers;
  'box' [on, y0, x0, height, width] and 'noise' (1, height, width, 3) uint8
  of random erasing.
  """
  names = [n for n, _ in train_ops(cfg)]
  seed_of = lambda name: fold_in(seed, 100 + names.index(name))
  out = {}
  if 'color_jitter' in names:
    apply, u = _jitter_draws(seed_of('color_jitter'),
                             float(cfg.color_jitter_prob))
    scale, offset_scale = _jitter_params(u, float(cfg.color_jitter))
    out['jitter_on'] = apply
    out['jitter_scale'], out['jitter_offset'] = scale, offset_scale
  else:
    out['jitter_on'] = tf.constant(False)
    out['jitter_scale'], out['jitter_offset'] = tf.eye(3), tf.zeros([3, 3])
  ra = _randaugment_args(cfg)
  out['ops'], out['signs'] = _randaugment_draws(
      seed_of('randaugment') if ra else seed, ra[0] if ra else 0)
  if 'random_erasing' in names:
    s = seed_of('random_erasing')
    box = _erasing_box(s, h, w, float(cfg.random_erasing))
    out['box'] = box
    out['noise'] = tf.cond(box[0] > 0, lambda: _erasing_noise(s, box),
                           lambda: tf.zeros([1, 0, 0, 3], tf.uint8))
  else:
    out['box'] = tf.zeros([5], tf.int32)
    out['noise'] = tf.zeros([1, 0, 0, 3], tf.uint8)
  return out
