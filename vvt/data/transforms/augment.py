"""Training clips on the host: resize and augmentation of uint8 video with OpenCV.

For each training clip the tf.data pipeline decodes the crop window (uint8
(T, h, w, 3), the source's `FrameReader.decode`) and draws every random number in TF
(`random_draws.train_draws`, from the clip's stateless seed). One
`tf.numpy_function` then runs `make_clip`: horizontal flip, bilinear resize to
(T, H, W, 3), colour jitter, RandAugment or AutoAugment (`vvt.data.transforms.autoaugment`)
and random erasing, all on uint8
frames with OpenCV's vectorised kernels (each op writes uint8, as PIL-based
RandAugment does). The tests hold this to an op-by-op float TF reference
(tests/data/transforms/reference_transforms.py), up to rounding; `BENCHMARKS.md` has the
speed.

A clip is processed as a whole where an op acts on each pixel alone (a
(T*H, W, 3) image) and frame by frame where pixels move (resize, geometric
ops, the sharpness filter). Every RandAugment and AutoAugment op is
video-consistent: one draw per clip, the same map for every frame.
"""
import math

import cv2
import numpy as np
import tensorflow as tf

from vvt.data.transforms import autoaugment
from vvt.data.transforms import random_draws
from vvt.models import frame_size

# OpenCV's own thread pool is left as it is: cv2.setNumThreads() in a process
# that runs TF's thread pools crashed or hung here (opencv-python-headless
# 5.0.0.93, tensorflow-cpu 2.21). tf.data runs clips in parallel anyway.

_LUMA = np.array(random_draws.RGB_TO_YIQ[0], np.float32)
_GREY = (128.0, 128.0, 128.0)
_SHARPEN = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13.0


# ----------------------------------------------------------------- helpers --
def _pixels(video):
  """(T, H, W, 3) -> (T*H, W, 3) view: one image for per-pixel ops."""
  t, h, w, c = video.shape
  return video.reshape(t * h, w, c)


def _colour_map(video, matrix, offset):
  """out_d = sum_c x_c matrix[c, d] + offset_d, rounded and clipped to uint8;
  `offset` (3,) for the clip or (T, 3) per frame."""
  out = np.empty_like(video)
  m = np.zeros((3, 4), np.float32)
  m[:, :3] = np.asarray(matrix, np.float32).T
  offset = np.asarray(offset, np.float32)
  if offset.ndim == 1:
    m[:, 3] = offset
    cv2.transform(_pixels(video), m, dst=_pixels(out))
  else:
    for t in range(video.shape[0]):
      m[:, 3] = offset[t]
      cv2.transform(video[t], m, dst=out[t])
  return out


def _lut(video, table):
  """Lookup: table (256,) for every channel, or (256, 3) per channel, of
  values in [0, 255] (one table for all channels is twice as fast)."""
  table = np.clip(np.rint(table), 0, 255).astype(np.uint8)
  table = table.reshape(1, 256, 3) if table.ndim == 2 else table
  out = np.empty_like(video)
  cv2.LUT(_pixels(video), table, dst=_pixels(out))
  return out


def _warp(video, matrix):
  """Output->input affine map (2, 3) on every frame: nearest pixel, grey 128
  where the map leaves the frame."""
  out = np.empty_like(video)
  h, w = video.shape[1:3]
  m = np.asarray(matrix, np.float64)
  for t in range(video.shape[0]):
    cv2.warpAffine(video[t], m, (w, h), dst=out[t],
                   flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
                   borderMode=cv2.BORDER_CONSTANT, borderValue=_GREY)
  return out


def _sample(video):
  """Every 4th row and column (the reference's clip statistics)."""
  return video[:, ::4, ::4].reshape(-1, 3)


# ------------------------------------------------------------- RandAugment --
def _auto_contrast(video, level, sign):
  del level, sign
  s = _sample(video)
  lo, hi = s.min(0).astype(np.float32), s.max(0).astype(np.float32)
  scale = np.where(hi > lo, 255.0 / np.maximum(hi - lo, 1e-3), 1.0)
  return _colour_map(video, np.diag(scale), np.where(hi > lo, -lo * scale, 0.0))


def _equalize(video, level, sign):
  del level, sign
  s = _sample(video)
  table = np.empty((256, 3), np.float32)
  for c in range(3):
    cdf = np.cumsum(np.bincount(s[:, c], minlength=256)).astype(np.float32)
    cdf_min = cdf[cdf > 0].min() if cdf[-1] > 0 else 0.0
    table[:, c] = np.clip((cdf - cdf_min) / max(cdf[-1] - cdf_min, 1.0) * 255.0,
                          0, 255)
  return _lut(video, table)


def _rotate(video, level, sign):
  h, w = video.shape[1:3]
  theta = sign * level * 30.0 * math.pi / 180.0
  c, s = math.cos(theta), math.sin(theta)
  cx, cy = (w - 1) / 2, (h - 1) / 2
  return _warp(video, [[c, s, cx - c * cx - s * cy],
                       [-s, c, cy + s * cx - c * cy]])


def _solarize(video, level, sign):
  del sign
  i = np.arange(256, dtype=np.float32)
  table = np.where(i >= 256.0 * (1.0 - level), 255.0 - i, i)
  return _lut(video, table)


def _colour(video, level, sign):
  e = 1.0 + sign * 0.9 * level
  matrix = e * np.eye(3) + (1.0 - e) * _LUMA[:, None] * np.ones((1, 3))
  return _colour_map(video, matrix, np.zeros(3))


def _posterize(video, level, sign):
  del sign
  q = 2.0 ** round(4.0 * level)
  table = np.floor(np.arange(256, dtype=np.float32) / q) * q
  return _lut(video, table)


def _contrast(video, level, sign):
  e = 1.0 + sign * 0.9 * level
  grey = float(np.dot(cv2.mean(_pixels(video))[:3], _LUMA))
  return _colour_map(video, e * np.eye(3), np.full(3, (1.0 - e) * grey))


def _brightness(video, level, sign):
  e = 1.0 + sign * 0.9 * level
  return _colour_map(video, e * np.eye(3), np.zeros(3))


def _sharpness(video, level, sign):
  """Blend with the 3x3 smoothing filter of PIL's SHARPEN (zero border)."""
  e = 1.0 + sign * 0.9 * level
  out = np.empty_like(video)
  for t in range(video.shape[0]):
    smooth = cv2.filter2D(video[t], -1, _SHARPEN,
                          borderType=cv2.BORDER_CONSTANT)
    cv2.addWeighted(video[t], e, smooth, 1.0 - e, 0.0, dst=out[t])
  return out


def _shear(axis):
  def op(video, level, sign):
    s = sign * level * 0.3
    return _warp(video, [[1.0, s, 0.0], [0.0, 1.0, 0.0]] if axis == 'x' else
                 [[1.0, 0.0, 0.0], [s, 1.0, 0.0]])
  return op


def _translate(axis):
  def op(video, level, sign):
    size = video.shape[2 if axis == 'x' else 1]
    shift = min(max(round(sign * level * 0.45 * size), -size), size)
    return _warp(video, [[1.0, 0.0, shift], [0.0, 1.0, 0.0]] if axis == 'x'
                 else [[1.0, 0.0, 0.0], [0.0, 1.0, shift]])
  return op


RANDAUGMENT = {
    'identity': lambda video, level, sign: video,
    'auto_contrast': _auto_contrast,
    'equalize': _equalize,
    'rotate': _rotate,
    'solarize': _solarize,
    'color': _colour,
    'posterize': _posterize,
    'contrast': _contrast,
    'brightness': _brightness,
    'sharpness': _sharpness,
    'shear_x': _shear('x'), 'shear_y': _shear('y'),
    'translate_x': _translate('x'), 'translate_y': _translate('y'),
}
assert tuple(RANDAUGMENT) == random_draws.RANDAUGMENT_OPS


def _invert(video, level, sign):
  """255 - x (AutoAugment's Invert)."""
  del level, sign
  return _lut(video, 255.0 - np.arange(256, dtype=np.float32))


# Every operation by name: RandAugment's, and those AutoAugment's policies add (vvt.data.transforms.autoaugment).
OPS = {**RANDAUGMENT, 'invert': _invert}


# ------------------------------------------------------------------- clips --
def resize_frames(video, size, flip=False):
  """uint8 (T, h, w, 3) -> (T, H, W, 3) for size = (H, W): bilinear with
  half-pixel centres (as TF's resize without antialiasing), flipped
  left-right first when `flip`."""
  height, width = size
  out = np.empty((video.shape[0], height, width, 3), np.uint8)
  for t in range(video.shape[0]):
    frame = cv2.flip(video[t], 1) if flip else video[t]
    cv2.resize(frame, (width, height), dst=out[t], interpolation=cv2.INTER_LINEAR)
  return out


def augment(video, draws, level, policy=None):
  """Colour jitter, RandAugment layers, AutoAugment's sub-policy (of
  `policy`) and erasing of a uint8 clip, with the draws of
  `random_draws.train_draws` (numpy values)."""
  if draws['jitter_on']:
    means = np.array([cv2.mean(f)[:3] for f in video], np.float32)
    video = _colour_map(video, draws['jitter_scale'],
                        means @ draws['jitter_offset'])
  for op, sign in zip(draws['ops'], draws['signs'], strict=True):
    video = RANDAUGMENT[random_draws.RANDAUGMENT_OPS[op]](video, level,
                                                        float(sign))
  if policy is not None and draws.get('aa_index', -1) >= 0:
    for op, op_level, sign in autoaugment.sub_policy_steps(
        policy, draws['aa_index'], draws['aa_applied'], draws['aa_signs']):
      video = OPS[op](video, op_level, sign)
  on, y0, x0, eh, ew = (int(v) for v in draws['box'])
  if on:  # every op above returned a new array
    video[:, y0:y0 + eh, x0:x0 + ew] = draws['noise']
  return video


def make_clip(window, size, flip, draws, level, policy=None):
  """The training clip: uint8 crop window (T, h, w, 3) -> (T, H, W, 3), size = (H, W)."""
  return augment(resize_frames(window, size, flip), draws, level, policy)


_DRAW_KEYS = ('jitter_on', 'jitter_scale', 'jitter_offset', 'ops', 'signs',
              'box', 'noise', 'aa_index', 'aa_applied', 'aa_signs')


def train_clip_fn(spec):
  """fn(window, flip, seed) -> uint8 (T, H, W, 3) tensor, for tf.data: the
  crop window resized to spec.image_size = (H, W) and augmented by the ops of
  `random_draws.train_op_names(spec)`."""
  size = frame_size.parse(spec.image_size)
  ra = random_draws.randaugment_args(spec)
  level = random_draws.randaugment_level(ra[1]) if ra else 0.0
  random_draws.train_op_names(spec)  # validates the augmentation fields now
  policy = random_draws.autoaugment_args(spec)

  def run(window, flip, *values):
    return make_clip(window, size, bool(flip), dict(zip(_DRAW_KEYS, values, strict=True)),
                     level, policy)

  def fn(window, flip, seed):
    draws = random_draws.train_draws(spec, seed, *size)
    clip = tf.numpy_function(run, [window, flip] + [draws[k] for k in _DRAW_KEYS],
                             tf.uint8, stateful=False)
    return tf.ensure_shape(clip, [window.shape[0], *size, 3])
  return fn


def resize_tf(video, size):
  """tf.data op: uint8 (T, h, w, 3) -> uint8 (T, H, W, 3), size = (H, W), as
  `resize_frames` (evaluation views)."""
  out = tf.numpy_function(lambda v: resize_frames(v, size), [video], tf.uint8,
                          stateful=False)
  return tf.ensure_shape(out, [video.shape[0], *size, 3])
