"""Spatial ops on one video, as small named TF functions.

A video is a (T, H, W, 3) tensor. Frames are decoded from encoded strings
straight into the crop window (`decode_frames` with a window decodes only that
window of a JPEG), resized to the crop side as float32 in [0, 255], augmented
with the same parameters for every frame (video-consistent), then normalised.
Every random op takes a stateless seed (a [2] int tensor), so a clip's
augmentation depends only on (data seed, position in the stream).

`train_ops(cfg)` composes the training augmentations in the style of
big_vision: a list of (name, fn(video, seed) -> video).
"""
import math

import tensorflow as tf

# Philox named explicitly: the random streams do not depend on TF's default
# ('auto_select') generator. The fused path (`train_augment`) draws in TF, as
# the op-by-op path does, outside its XLA kernels.
_ALG = 'philox'

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)
NORMALIZATIONS = ('imagenet', 'zero_centre')


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


def color_jitter(video, seed, strength, prob=0.8):
  """Brightness, contrast, saturation (x [1-0.4s, 1+0.4s]) and hue (+-0.1s turn).

  One set of factors per clip, applied with probability `prob`. All four are
  linear in RGB, so they are composed into one 3x3 matrix and a per-frame
  offset (contrast pulls each frame towards its per-channel mean; saturation
  towards grey; hue rotates the chroma plane of YIQ): one pass over the clip.
  """
  def jitter():
    u = tf.random.stateless_uniform([4], fold_in(seed, 1), -1.0, 1.0,
                                    alg=_ALG)
    scale, offset_scale = _jitter_params(u, strength)
    mean = tf.reduce_mean(video, axis=[1, 2], keepdims=True)  # (T, 1, 1, 3)
    offset = tf.einsum('thwc,cd->thwd', mean, offset_scale)
    out = tf.einsum('thwc,cd->thwd', video, scale) + offset
    return tf.clip_by_value(out, 0.0, 255.0)
  apply = tf.random.stateless_uniform([], fold_in(seed, 0), alg=_ALG) < prob
  return tf.cond(apply, jitter, lambda: video)


def _blend(degenerate, video, factor):
  return tf.clip_by_value(degenerate + factor * (video - degenerate), 0.0, 255.0)


def _grayscale(video):
  return tf.image.rgb_to_grayscale(video) * tf.ones([1, 1, 1, 3])


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
  level = min(max(float(magnitude), 0.0), 10.0) / 10.0
  for layer in range(num_layers):
    s = fold_in(seed, layer)
    op = tf.random.stateless_uniform([], fold_in(s, 0), 0, len(RANDAUGMENT_OPS),
                                     dtype=tf.int32, alg=_ALG)
    coin = tf.random.stateless_uniform([], fold_in(s, 1), alg=_ALG)
    sign = tf.where(coin < 0.5,
                    -1.0, 1.0)
    video = tf.switch_case(op, _randaugment_ops(video, level, sign))
  return video


def random_erasing(video, seed, prob):
  """With probability `prob`, fills one random box (same in every frame).

  Area 2%..1/3 of the frame, aspect ratio 0.3..3.3, filled with N(0, 1) noise
  (applied after normalisation, so noise has the data's scale).
  """
  shape = tf.shape(video)
  h, w = shape[1], shape[2]
  u = tf.random.stateless_uniform([5], fold_in(seed, 1), alg=_ALG)
  area = (0.02 + u[0] * (1.0 / 3.0 - 0.02)) * tf.cast(h * w, tf.float32)
  log_ratio = math.log(0.3) + u[1] * (math.log(1 / 0.3) - math.log(0.3))
  ratio = tf.exp(log_ratio)
  eh = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area * ratio)), tf.int32), 1, h)
  ew = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area / ratio)), tf.int32), 1, w)
  y0 = tf.cast(u[2] * tf.cast(h - eh + 1, tf.float32), tf.int32)
  x0 = tf.cast(u[3] * tf.cast(w - ew + 1, tf.float32), tf.int32)
  ys = tf.range(h)[:, None]
  xs = tf.range(w)[None, :]
  box = (ys >= y0) & (ys < y0 + eh) & (xs >= x0) & (xs < x0 + ew)
  def erase():
    noise = tf.random.stateless_normal(
        tf.stack([1, h, w, shape[3]]), fold_in(seed, 2), dtype=video.dtype,
        alg=_ALG)
    return tf.where(box[None, :, :, None], noise, video)
  return tf.cond(u[4] < prob, erase, lambda: video)


def normalize(video, mode):
  """float [0, 255] -> 'imagenet' mean/std, or 'zero_centre' [-1, 1]."""
  if mode == 'imagenet':
    mean, std = IMAGENET_MEAN, IMAGENET_STD
  elif mode == 'zero_centre':
    mean, std = (127.5,) * 3, (127.5,) * 3
  else:
    raise ValueError(f'dataset.normalization must be one of {NORMALIZATIONS}, '
                     f'got {mode!r}')
  scale = tf.constant([1.0 / v for v in std])
  offset = tf.constant([-m / v for m, v in zip(mean, std)])
  return tf.nn.bias_add(video * scale, offset)


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


# RandAugment compiles under XLA but its 14 branches take ~20 s to compile for
# no speed-up, so it runs op by op.
_NOT_XLA = frozenset({'randaugment'})


def train_ops(cfg):
  """Training augmentations after the crop: [(name, fn(video, seed))].

  Videos enter as float [0, 255] and leave normalised. (The random flip,
  `cfg.horizontal_flip`, is done on the crop before its resize, see `resize`.)
  """
  ops = []
  if cfg.color_jitter > 0:
    ops.append(('color_jitter', lambda v, s: color_jitter(
        v, s, float(cfg.color_jitter), float(cfg.color_jitter_prob))))
  ra = _randaugment_args(cfg)
  if ra is not None:
    ops.append(('randaugment', lambda v, s: randaugment(v, s, *ra)))
  mode = cfg.normalization
  normalize(tf.zeros([1, 1, 1, 3]), mode)  # validates the name now
  ops.append(('normalize', lambda v, s: normalize(v, mode)))
  if cfg.random_erasing > 0:
    p = float(cfg.random_erasing)
    ops.append(('random_erasing', lambda v, s: random_erasing(v, s, p)))
  return ops


def compose(ops, xla=True):
  """One fn(video, seed) applying `ops` in order, op i seeded by fold_in(seed, 100+i).

  With `xla`, runs of consecutive ops XLA can compile become one jit-compiled
  function: the per-pixel ops of a clip then make one pass over memory
  instead of one each (the clip is 16x224x224x3 floats; memory is the cost).
  """
  groups = []  # [(jit, [(index, fn)])]
  for i, (name, fn) in enumerate(ops):
    jit = xla and name not in _NOT_XLA
    if groups and groups[-1][0] == jit:
      groups[-1][1].append((i, fn))
    else:
      groups.append((jit, [(i, fn)]))

  def run_group(members):
    def run(video, seed):
      for i, fn in members:
        video = fn(video, fold_in(seed, 100 + i))
      return video
    return run

  stages = [tf.function(run_group(m), jit_compile=True) if jit else run_group(m)
            for jit, m in groups]

  def apply(video, seed):
    for stage in stages:
      video = stage(video, seed)
    return video
  return apply


def apply_ops(ops, video, seed):
  """Applies `ops` without compilation (same results up to float rounding)."""
  return compose(ops, xla=False)(video, seed)


# ------------------------------------------------- fused training augmentation --
# The op-by-op functions above are the reference. `train_augment` computes the
# same augmentations (same random draws: op i of `train_ops` is seeded by
# fold_in(seed, 100 + i) as in `compose`) in ONE XLA-compiled pass over the
# clip: colour jitter (a 3x3 matrix and a per-frame offset), every RandAugment
# layer as 'per-channel linear map + clip, per-channel 256-entry LUT (solarize,
# posterize, equalize), grey fill outside a geometric op', normalisation and
# random erasing; the geometric ops of all layers (rotate, shear, translate)
# compose into one output->input affine map, applied as one gather (nearest
# pixel). Statistics (per-frame means, channel ranges, luma mean, histograms)
# come from the same chain evaluated on every 4th row and column. Variants
# without geometric / sharpness ops skip the gather / the 3x3 filter; each
# variant is compiled once per process and clip shape.
_GEOMETRIC = ('rotate', 'shear_x', 'shear_y', 'translate_x', 'translate_y')
_GEOMETRIC_IDS = tuple(RANDAUGMENT_OPS.index(n) for n in _GEOMETRIC)
_SHARPNESS_ID = RANDAUGMENT_OPS.index('sharpness')
_EQUALIZE_ID = RANDAUGMENT_OPS.index('equalize')
_MIXING_IDS = (RANDAUGMENT_OPS.index('color'), _SHARPNESS_ID)
_LUT_IDS = tuple(RANDAUGMENT_OPS.index(n)
                 for n in ('equalize', 'solarize', 'posterize'))


def _mix3(v, a):
  """v (..., 3) @ a (3, 3) as three broadcast multiply-adds (XLA fuses them)."""
  return v[..., 0:1] * a[0] + v[..., 1:2] * a[1] + v[..., 2:3] * a[2]


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


def _geometry(op, sign, level, h, w):
  """Output->input affine [[ax, ay, a0], [bx, by, b0]] (pixel centres) of
  RandAugment op `op`, the identity for colour ops (as in _randaugment_ops)."""
  theta = sign * level * 30.0 * math.pi / 180.0
  c, s = tf.cos(theta), tf.sin(theta)
  cx, cy = (w - 1) / 2, (h - 1) / 2
  one, zero = tf.constant(1.0), tf.constant(0.0)
  sh = sign * level * 0.3
  tx = tf.clip_by_value(tf.round(sign * level * 0.45 * w), -w, w)
  ty = tf.clip_by_value(tf.round(sign * level * 0.45 * h), -h, h)
  ident = [one, zero, zero, zero, one, zero]
  table = {
      'rotate': [c, s, cx - c * cx - s * cy, -s, c, cy + s * cx - c * cy],
      'shear_x': [one, sh, zero, zero, one, zero],
      'shear_y': [one, zero, zero, sh, one, zero],
      'translate_x': [one, zero, tx, zero, one, zero],
      'translate_y': [one, zero, zero, zero, one, ty],
  }
  rows = tf.stack([tf.stack(table.get(n, ident)) for n in RANDAUGMENT_OPS])
  return tf.reshape(tf.gather(rows, op), [2, 3])


def _colour_params(op, sign, level, sample):
  """(A (3, 3), b (3,), lut (768,), lut_on, sharp_on, factor) of one layer;
  `sample` (N, 3) float: pixels of the layer's input, for its statistics."""
  e = 1.0 + sign * 0.9 * level
  eye = tf.eye(3)
  luma = tf.constant(_RGB_TO_YIQ[0])
  lo, hi = tf.reduce_min(sample, 0), tf.reduce_max(sample, 0)
  ac_scale = tf.where(hi > lo, 255.0 / tf.maximum(hi - lo, 1e-3), 1.0)
  ac_b = tf.where(hi > lo, -lo * ac_scale, 0.0)
  grey = tf.tensordot(tf.reduce_mean(sample, 0), luma, 1)
  colour = e * eye + (1.0 - e) * luma[:, None] * tf.ones([1, 3])
  mats, offs = [], []
  for name in RANDAUGMENT_OPS:
    mats.append({'auto_contrast': tf.linalg.diag(ac_scale), 'color': colour,
                 'contrast': e * eye, 'brightness': e * eye}.get(name, eye))
    offs.append({'auto_contrast': ac_b,
                 'contrast': (1.0 - e) * grey * tf.ones([3])}.get(
                     name, tf.zeros([3])))
  a, b = tf.gather(tf.stack(mats), op), tf.gather(tf.stack(offs), op)
  i = tf.range(256, dtype=tf.float32)
  q = tf.pow(2.0, tf.round(4.0 * level))
  solarize = tf.tile(tf.where(i >= 256.0 * (1.0 - level), 255.0 - i, i), [3])
  posterize = tf.tile(tf.floor(i / q) * q, [3])

  def equalize():  # per channel, from the sample's histograms
    idx = tf.cast(tf.clip_by_value(sample + 0.5, 0.0, 255.0), tf.int32)
    hist = tf.math.unsorted_segment_sum(
        tf.ones_like(idx, tf.float32), idx + tf.constant([0, 256, 512]), 768)
    cdf = tf.cumsum(tf.reshape(hist, [3, 256]), axis=1)
    last = cdf[:, -1:]
    cdf_min = tf.reduce_min(tf.where(cdf > 0, cdf, last), axis=1, keepdims=True)
    return tf.reshape(tf.clip_by_value(
        (cdf - cdf_min) / tf.maximum(last - cdf_min, 1.0) * 255.0, 0.0, 255.0),
                      [768])
  lut = tf.cond(tf.equal(op, _EQUALIZE_ID), equalize,
                lambda: tf.where(tf.equal(op, RANDAUGMENT_OPS.index('solarize')),
                                 solarize, posterize))
  lut_on = tf.reduce_any(tf.equal(op, _LUT_IDS))
  return a, b, lut, lut_on, tf.equal(op, _SHARPNESS_ID), e


def _sharpen_blend(y, factor):
  """_blend(_sharpen_degenerate(y), y, factor) with shifted sums (a 3x3 filter,
  zero padding as 'SAME'); XLA's depthwise convolution is far slower."""
  h, w = y.shape[1], y.shape[2]
  p = tf.pad(y, [[0, 0], [1, 1], [1, 1], [0, 0]])
  box = tf.add_n([p[:, dy:dy + h, dx:dx + w] for dy in range(3)
                  for dx in range(3)])
  return _blend((box + 4.0 * y) / 13.0, y, factor)


def _grid_map(geoms, num_layers, rows, cols, h, w):
  """Source pixel index (rows*cols,) and per-layer 'inside' masks of the
  composed output->input maps of layers [0, num_layers)."""
  qx = 0.0 * rows[:, None] + cols[None]
  qy = rows[:, None] + 0.0 * cols[None]
  masks = []
  for l in reversed(range(num_layers)):
    m = geoms[l]
    qx, qy = (m[0, 0] * qx + m[0, 1] * qy + m[0, 2],
              m[1, 0] * qx + m[1, 1] * qy + m[1, 2])
    rx, ry = tf.round(qx), tf.round(qy)
    masks.insert(0, (rx >= 0) & (rx <= w - 1) & (ry >= 0) & (ry <= h - 1))
  idx = (tf.cast(tf.clip_by_value(tf.round(qy), 0.0, h - 1.0), tf.int32)
         * int(w)
         + tf.cast(tf.clip_by_value(tf.round(qx), 0.0, w - 1.0), tf.int32))
  return tf.reshape(idx, [-1]), masks


def _gather_pixels(x, idx, rows, cols):
  t, h, w = x.shape[0], x.shape[1], x.shape[2]
  y = tf.gather(tf.reshape(x, [t, h * w, 3]), idx, axis=1)
  return tf.reshape(y, [t, rows.shape[0], cols.shape[0], 3])


def _colour_layer(y, layer, mix):
  """Linear part (full 3x3 with `mix`, else its diagonal) + clip, then LUT."""
  a, b, lut, lut_on = layer[:4]
  lin = _mix3(y, a) if mix else y * tf.linalg.diag_part(a)
  y = tf.clip_by_value(lin + b, 0.0, 255.0)
  idx = tf.cast(tf.clip_by_value(y + 0.5, 0.0, 255.0), tf.int32)
  return tf.where(lut_on, tf.gather(lut, idx + tf.constant([0, 256, 512])), y)


def _jitter(y, frame):
  a0, off = frame
  return tf.clip_by_value(_mix3(y, a0) + off[:, None, None, :], 0.0, 255.0)


def _mix_small(y, a):
  """y @ a as a matrix product (XLA materialises it: no recomputation)."""
  return tf.reshape(tf.reshape(y, [-1, 3]) @ a, y.shape)


def _params_kernel(x, jitter_u, ops, signs, *, strength, level, geo, scale,
                   offset):
  """Stage 1: every per-clip parameter, from the draws and a 1/16 sample
  (the augmentation chain evaluated at every 4th row and column).

  Besides the per-layer parameters it returns, for the one-pass path, the
  source pixel of every output pixel and the per-layer 'inside' masks of the
  geometric ops, and 'lut': all per-channel layers and the normalisation
  tabulated over the 256 values of the (rounded) jittered pixel, with 'fills':
  the normalised value of a pixel filled with grey 128 by layer l.
  """
  t, h, w = x.shape[0], x.shape[1], x.shape[2]
  sub = x[:, ::4, ::4]
  if strength > 0:
    a0, o0 = _jitter_params(jitter_u[1:], strength)
    on = jitter_u[0] > 0.5
    a0 = tf.where(on, a0, tf.eye(3))
    off = tf.where(on, tf.reduce_mean(sub, [1, 2]) @ o0, 0.0)
  else:
    a0, off = tf.eye(3), tf.zeros([t, 3])
  num_layers = ops.shape[0]
  geoms = tf.stack([_geometry(ops[l], signs[l], level, float(h), float(w))
                    for l in range(num_layers)] or [tf.zeros([2, 3])])
  rows = tf.range(0, h, 4, dtype=tf.float32)
  cols = tf.range(0, w, 4, dtype=tf.float32)
  layers = []
  for l in range(num_layers):
    if geo and l:
      idx, masks = _grid_map(geoms, l, rows, cols, float(h), float(w))
      y = _gather_pixels(x, idx, rows, cols)
    else:
      y, masks = sub, None
    y = tf.clip_by_value(_mix_small(y, a0) + off[:, None, None, :], 0.0, 255.0)
    for k, (a, b, lut, lut_on, _, _) in enumerate(layers):
      y = tf.clip_by_value(_mix_small(y, a) + b, 0.0, 255.0)
      i = tf.cast(tf.clip_by_value(y + 0.5, 0.0, 255.0), tf.int32)
      y = tf.where(lut_on, tf.gather(lut, i + tf.constant([0, 256, 512])), y)
      if masks is not None:
        y = tf.where(masks[k][None, :, :, None], y, 128.0)
    layers.append(_colour_params(ops[l], signs[l], level,
                                 tf.reshape(y, [-1, 3])))
  p = {'a0': a0, 'off': off, 'geoms': geoms}
  scale, offset = tf.constant(scale), tf.constant(offset)
  table = tf.range(256.0)[:, None] * tf.ones([1, 3])
  for layer in layers:
    table = _colour_layer(table, layer, mix=False)
  p['lut'] = tf.reshape(tf.transpose(table * scale + offset), [768])
  fills = []
  for l in range(num_layers):
    f = tf.fill([1, 3], 128.0)
    for layer in layers[l + 1:]:
      f = _colour_layer(f, layer, mix=False)
    fills.append(f[0] * scale + offset)
  p['fills'] = tf.stack(fills) if fills else tf.zeros([1, 3])
  if geo and num_layers:
    idx, masks = _grid_map(geoms, num_layers, tf.range(float(h)),
                           tf.range(float(w)), float(h), float(w))
    p['idx'], p['masks'] = idx, tf.stack(masks)
  else:
    p['idx'], p['masks'] = tf.zeros([1], tf.int32), tf.zeros([1, 1, 1], tf.bool)
  p['layers'] = tuple(tf.stack(z) for z in zip(*layers)) if layers else ()
  if layers:
    p['diag'] = tf.linalg.diag_part(p['layers'][0])
    p['bias'] = p['layers'][1]
  return p


def _finish(y, box, noise, scale, offset, erase, normalise=True):
  h, w = y.shape[1], y.shape[2]
  if normalise:
    y = y * tf.constant(scale) + tf.constant(offset)
  if erase:
    ys, xs = tf.range(h)[:, None], tf.range(w)[None, :]
    inbox = ((box[0] > 0) & (ys >= box[1]) & (ys < box[1] + box[3])
             & (xs >= box[2]) & (xs < box[2] + box[4]))
    y = tf.where(inbox[None, :, :, None], noise, y)
  return y


def _source(x, p, geo):
  """The clip's pixels moved by the composed geometric ops (one gather)."""
  if not geo:
    return x
  t, h, w = x.shape[0], x.shape[1], x.shape[2]
  y = tf.gather(tf.reshape(x, [t, h * w, 3]), p['idx'], axis=1)
  return tf.reshape(y, x.shape)


def _pixel_kernel(x, p, box, noise, *, scale, offset, geo, erase, layers, lut):
  """Stage 2, fast path (no 'color' or 'sharpness' layer): one pass over the
  clip. The jitter (the only op mixing channels) reads x; with `lut` (a
  solarize, posterize or equalize layer) its rounded result indexes
  p['lut'] (all later per-channel ops and the normalisation), else the layers'
  per-channel linear maps and clips are computed. Colour ops act on each pixel
  alone, so they commute with the geometric ops: with `geo` the result is
  moved afterwards by `_move_kernel`, which also fills the grey borders."""
  y = _jitter(x, (p['a0'], p['off']))
  if layers and lut:
    q = tf.cast(y + 0.5, tf.int32)
    y = tf.gather(p['lut'], q + tf.constant([0, 256, 512]))
  else:
    for l in range(layers):
      y = tf.clip_by_value(y * p['diag'][l] + p['bias'][l], 0.0, 255.0)
    y = y * tf.constant(scale) + tf.constant(offset)
  if geo:
    return y
  return _finish(y, box, noise, scale, offset, erase, normalise=False)


def _move_kernel(z, p, box, noise, *, layers, erase):
  """Fast path with geometric ops: one gather of the coloured, normalised
  clip; pixels a geometric op brought in from outside get p['fills']."""
  y = _source(z, p, True)
  for l in range(layers):
    y = tf.where(p['masks'][l][None, :, :, None], y, p['fills'][l])
  return _finish(y, box, noise, None, None, erase, normalise=False)


def _pre_kernel(x, p, *, geo):
  """Slow path, step 1: geometric gather (all layers' maps) and jitter."""
  return _jitter(_source(x, p, geo), (p['a0'], p['off']))


def _layer_kernel(y, p, box, noise, l, *, geo, sharp, pre, finish, scale,
                  offset, erase):
  """Slow path, layer l on a materialised clip (3x3 colour mix, sharpness).

  With `pre`, y is the source clip: first the geometric gather and the jitter
  (only for a layer that does not mix channels or pixels, so nothing is
  recomputed); with `finish`, normalisation and erasing follow."""
  if pre:
    y = _pre_kernel(y, p, geo=geo)
  layer = tuple(z[l] for z in p['layers'])
  y = _colour_layer(y, layer, mix=not pre)
  if sharp:
    y = tf.where(layer[4], _sharpen_blend(y, layer[5]), y)
  if geo:
    y = tf.where(p['masks'][l][None, :, :, None], y, 128.0)
  if finish:
    y = _finish(y, box, noise, scale, offset, erase)
  return y


def _finish_kernel(y, box, noise, *, scale, offset, erase):
  return _finish(y, box, noise, scale, offset, erase)


_KERNELS = {}


def _kernel(fn, **flags):
  """fn compiled with XLA for these static flags (once per process)."""
  key = (fn.__name__,) + tuple(sorted(flags.items()))
  if key not in _KERNELS:
    _KERNELS[key] = tf.function(
        lambda *a: fn(*a, **dict(key[1:])), jit_compile=True)
  return _KERNELS[key]


def train_augment(cfg):
  """fn(video, seed): `train_ops(cfg)` as one XLA pass (`cfg.xla_ops`), or op
  by op. Video float (T, H, W, 3) in [0, 255] -> normalised float."""
  ops = train_ops(cfg)
  if not cfg.xla_ops:
    return compose(ops, xla=False)
  names = [n for n, _ in ops]
  strength = float(cfg.color_jitter)
  prob = float(cfg.color_jitter_prob)
  ra = _randaugment_args(cfg)
  num_layers, magnitude = ra if ra is not None else (0, 0.0)
  level = min(max(float(magnitude), 0.0), 10.0) / 10.0
  p_erase = float(cfg.random_erasing)
  mode = cfg.normalization
  mean, std = ((IMAGENET_MEAN, IMAGENET_STD) if mode == 'imagenet'
               else ((127.5,) * 3, (127.5,) * 3))
  scale = tuple(1.0 / v for v in std)
  offset = tuple(-m / v for m, v in zip(mean, std))

  def seed_of(name):
    return lambda seed: fold_in(seed, 100 + names.index(name))

  def apply(video, seed):
    shape = tf.shape(video)
    h, w = shape[1], shape[2]
    if strength > 0:
      s = seed_of('color_jitter')(seed)
      apply_j = tf.random.stateless_uniform([], fold_in(s, 0), alg=_ALG) < prob
      u = tf.random.stateless_uniform([4], fold_in(s, 1), -1.0, 1.0, alg=_ALG)
      jitter_u = tf.concat([tf.cast(apply_j, tf.float32)[None], u], 0)
    else:
      jitter_u = tf.zeros([5])
    op_ids, signs = [], []
    if num_layers:
      s0 = seed_of('randaugment')(seed)
      for layer in range(num_layers):
        s = fold_in(s0, layer)
        op_ids.append(tf.random.stateless_uniform(
            [], fold_in(s, 0), 0, len(RANDAUGMENT_OPS), dtype=tf.int32,
            alg=_ALG))
        coin = tf.random.stateless_uniform([], fold_in(s, 1), alg=_ALG)
        signs.append(tf.where(coin < 0.5, -1.0, 1.0))
    op_ids = tf.stack(op_ids) if op_ids else tf.zeros([0], tf.int32)
    signs = tf.stack(signs) if signs else tf.zeros([0])
    if p_erase > 0:
      s = seed_of('random_erasing')(seed)
      u = tf.random.stateless_uniform([5], fold_in(s, 1), alg=_ALG)
      area = (0.02 + u[0] * (1.0 / 3.0 - 0.02)) * tf.cast(h * w, tf.float32)
      ratio = tf.exp(math.log(0.3) + u[1] * (math.log(1 / 0.3) - math.log(0.3)))
      eh = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area * ratio)), tf.int32),
                            1, h)
      ew = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area / ratio)), tf.int32),
                            1, w)
      y0 = tf.cast(u[2] * tf.cast(h - eh + 1, tf.float32), tf.int32)
      x0 = tf.cast(u[3] * tf.cast(w - ew + 1, tf.float32), tf.int32)
      on = u[4] < p_erase
      box = tf.stack([tf.cast(on, tf.int32), y0, x0, eh, ew])
      noise_seed = fold_in(s, 2)
    else:
      on = tf.constant(False)
      box = tf.zeros([5], tf.int32)

    def variant(geo, slow, lut=False, erase=False):
      def run():
        # Kernels with `erase` only for clips that are erased: the others
        # neither draw the noise nor test the box.
        noise = tf.zeros([1, 1, 1, 3])
        if erase:  # noise drawn for the box only, placed in a (1, H, W, 3) frame
          noise = tf.pad(
              tf.random.stateless_normal(tf.stack([1, box[3], box[4], 3]),
                                         noise_seed, alg=_ALG),
              tf.stack([[0, 0], [box[1], h - box[1] - box[3]],
                        [box[2], w - box[2] - box[4]], [0, 0]]))
        p = _kernel(_params_kernel, strength=strength, level=level, geo=geo,
                    scale=scale, offset=offset)(video, jitter_u, op_ids, signs)
        if not slow:
          z = _kernel(_pixel_kernel, scale=scale, offset=offset, geo=geo,
                      erase=erase, layers=num_layers, lut=lut)(
                          video, p, box, noise)
          if not geo:
            return z
          return _kernel(_move_kernel, layers=num_layers, erase=erase)(
              z, p, box, noise)
        # Passes over the clip: [gather + jitter (+ layer 0 when it is
        # per-channel)], then one per remaining layer, the last one also
        # normalising and erasing.
        def layers_from(y, start, pre):
          for l in range(start, num_layers):
            flags = dict(geo=geo, pre=pre and l == start,
                         finish=l == num_layers - 1, scale=scale,
                         offset=offset, erase=erase)
            y = tf.cond(
                p['layers'][4][l],
                lambda y=y, l=l, f=flags: _kernel(
                    _layer_kernel, sharp=True, **f)(y, p, box, noise, l),
                lambda y=y, l=l, f=flags: _kernel(
                    _layer_kernel, sharp=False, **f)(y, p, box, noise, l))
          return y

        def slow_first():
          return layers_from(_kernel(_pre_kernel, geo=geo)(video, p), 0, False)
        if num_layers == 1:
          return slow_first()
        first_mixes = tf.reduce_any(tf.equal(op_ids[0], _MIXING_IDS))
        return tf.cond(first_mixes, slow_first,
                       lambda: layers_from(video, 0, True))
      return run
    is_geo = tf.reduce_any(tf.equal(op_ids[:, None], _GEOMETRIC_IDS))
    is_slow = tf.reduce_any(tf.equal(op_ids[:, None], _MIXING_IDS))
    is_lut = tf.reduce_any(tf.equal(op_ids[:, None], _LUT_IDS))
    # One flat tf.case over the kernel variants (nested conds cost more).

    branches = []
    for erase in ((True, False) if p_erase > 0 else (False,)):
      e = on if erase else tf.logical_not(on)
      if num_layers:
        branches += [
            (e & is_slow & is_geo, variant(True, True, erase=erase)),
            (e & is_slow, variant(False, True, erase=erase)),
            (e & is_geo & is_lut, variant(True, False, True, erase=erase)),
            (e & is_geo, variant(True, False, erase=erase)),
            (e & is_lut, variant(False, False, True, erase=erase))]
      branches.append((e, variant(False, False, erase=erase)))
    if len(branches) == 1:
      return branches[0][1]()
    return tf.case(branches[:-1], default=branches[-1][1])
  return apply
