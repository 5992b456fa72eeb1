"""The random draws of a training clip's augmentation, all in TF from the clip's stateless seed.

Every draw takes a stateless seed (a [2] int tensor), so a clip's augmentation depends only on (data seed,
position in the stream). `train_draws` draws every random number of the ops a config switches on (colour jitter,
RandAugment, AutoAugment, random erasing); `vvt.data.transforms.augment` then applies them to the uint8 clip with
OpenCV.

The op-by-op float TF implementation of the augmentations (colour jitter, RandAugment, random erasing) that
`augment` is tested against lives with the tests (`tests/data/transforms/reference_transforms.py`); it draws its
random numbers with the same functions (`jitter_draws`, `randaugment_draws`, `erasing_box`, ...), so both make the
same clip from the same seed.
"""
import math

import tensorflow as tf

from vvt.data.transforms import autoaugment

# Philox named explicitly: the random streams do not depend on TF's default
# ('auto_select') generator.
ALG = 'philox'


def fold_in(seed, k):
  """A new stateless seed derived from `seed` and the int `k`."""
  return tf.random.experimental.stateless_fold_in(seed, k, alg=ALG)


RGB_TO_YIQ = ((0.299, 0.587, 0.114),
              (0.596, -0.274, -0.322),
              (0.211, -0.523, 0.312))


def jitter_draws(seed, prob):
  """(apply: bool, u: (4,) uniform in [-1, 1]) of colour jitter."""
  apply = tf.random.stateless_uniform([], fold_in(seed, 0), alg=ALG) < prob
  u = tf.random.stateless_uniform([4], fold_in(seed, 1), -1.0, 1.0, alg=ALG)
  return apply, u


def jitter_params(u, strength):
  """Colour jitter as (matrix, offset scale) from u = 4 uniforms in [-1, 1]."""
  fb = 1.0 + 0.4 * strength * u[0]
  fc = 1.0 + 0.4 * strength * u[1]
  fs = 1.0 + 0.4 * strength * u[2]
  theta = 2.0 * math.pi * 0.1 * strength * u[3]
  luma = tf.constant(RGB_TO_YIQ[0])
  sat = fs * tf.eye(3) + (1.0 - fs) * luma[:, None] * tf.ones([1, 3])
  to_yiq = tf.transpose(tf.constant(RGB_TO_YIQ))
  c, s = tf.cos(theta), tf.sin(theta)
  rot = tf.stack([tf.stack([1.0, 0.0, 0.0]), tf.stack([0.0, c, s]),
                  tf.stack([0.0, -s, c])])
  matrix = sat @ (to_yiq @ rot @ tf.linalg.inv(to_yiq))
  return fb * fc * matrix, (1.0 - fc) * fb * matrix


RANDAUGMENT_OPS = ('identity', 'auto_contrast', 'equalize', 'rotate', 'solarize',
                   'color', 'posterize', 'contrast', 'brightness', 'sharpness',
                   'shear_x', 'shear_y', 'translate_x', 'translate_y')


def randaugment_args(cfg):
  """(num_layers, magnitude) of cfg.randaugment, or None when it is off."""
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


def randaugment_level(magnitude):
  """The paper's magnitude 0..10 as a level in [0, 1]."""
  return min(max(float(magnitude), 0.0), 10.0) / 10.0


def randaugment_draws(seed, num_layers):
  """(ops: (num_layers,) int32 indices into RANDAUGMENT_OPS, signs: +-1.0)."""
  ops, signs = [], []
  for layer in range(num_layers):
    s = fold_in(seed, layer)
    ops.append(tf.random.stateless_uniform(
        [], fold_in(s, 0), 0, len(RANDAUGMENT_OPS), dtype=tf.int32, alg=ALG))
    coin = tf.random.stateless_uniform([], fold_in(s, 1), alg=ALG)
    signs.append(tf.where(coin < 0.5, -1.0, 1.0))
  return (tf.stack(ops) if ops else tf.zeros([0], tf.int32),
          tf.stack(signs) if signs else tf.zeros([0]))


def autoaugment_args(cfg):
  """The policy name of cfg.autoaugment, or None when it is off (ValueError naming the field if unknown)."""
  name = cfg.get('autoaugment')
  if name is None:
    return None
  autoaugment.policy(name)
  return name


def autoaugment_draws(seed, name):
  """(index: int32 sub-policy of policy `name`, drawn uniformly; applied: (2,) bool, each step with its
  probability; signs: (2,) +-1.0, the direction of a signed step)."""
  probs = tf.constant(autoaugment.probabilities(name), tf.float32)
  index = tf.random.stateless_uniform([], fold_in(seed, 0), 0, probs.shape[0], dtype=tf.int32, alg=ALG)
  u = tf.random.stateless_uniform([autoaugment.STEPS], fold_in(seed, 1), alg=ALG)
  coins = tf.random.stateless_uniform([autoaugment.STEPS], fold_in(seed, 2), alg=ALG)
  return index, u < tf.gather(probs, index), tf.where(coins < 0.5, -1.0, 1.0)


def erasing_box(seed, h, w, prob):
  """[on, y0, x0, height, width] int32 of random erasing's box in a (h, w) frame.

  Area 2%..1/3 of the frame, aspect ratio 0.3..3.3 (log-uniform); `on` is 1
  with probability `prob`.
  """
  u = tf.random.stateless_uniform([5], fold_in(seed, 1), alg=ALG)
  area = (0.02 + u[0] * (1.0 / 3.0 - 0.02)) * tf.cast(h * w, tf.float32)
  ratio = tf.exp(math.log(0.3) + u[1] * (math.log(1 / 0.3) - math.log(0.3)))
  eh = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area * ratio)), tf.int32), 1, h)
  ew = tf.clip_by_value(tf.cast(tf.round(tf.sqrt(area / ratio)), tf.int32), 1, w)
  y0 = tf.cast(u[2] * tf.cast(h - eh + 1, tf.float32), tf.int32)
  x0 = tf.cast(u[3] * tf.cast(w - ew + 1, tf.float32), tf.int32)
  return tf.stack([tf.cast(u[4] < prob, tf.int32), y0, x0, eh, ew])


def erasing_noise(seed, box):
  """(1, height, width, 3) uint8 of the box: uniform random pixels."""
  noise = tf.random.stateless_uniform(tf.stack([1, box[3], box[4], 3]),
                                      fold_in(seed, 2), 0, 256, dtype=tf.int32,
                                      alg=ALG)
  return tf.cast(noise, tf.uint8)


def train_op_names(cfg):
  """Names of the training augmentations after the crop, in the order they
  run: ['color_jitter', 'randaugment', 'autoaugment', 'random_erasing'] or fewer, as the
  config switches them on. (The random flip, `cfg.horizontal_flip`, is done
  on the crop before its resize; normalisation on the device.) Op i is seeded
  by fold_in(seed, 100 + i).
  """
  names = []
  if cfg.color_jitter > 0:
    names.append('color_jitter')
  if randaugment_args(cfg) is not None:
    names.append('randaugment')
  if autoaugment_args(cfg) is not None:
    names.append('autoaugment')
  if cfg.random_erasing > 0:
    names.append('random_erasing')
  return names


def train_draws(cfg, seed, h, w):
  """Every random number of the ops of `train_op_names(cfg)` for one clip of
  (h, w) frames, as a dict of tensors, for `vvt.data.transforms.augment` (op i seeded by
  fold_in(seed, 100 + i)): 'jitter_on', 'jitter_scale' and 'jitter_offset'
  (3, 3) of colour jitter (`jitter_params`); 'ops', 'signs' (num_layers,) of
  RandAugment's layers; 'aa_index' (-1: off), 'aa_applied', 'aa_signs' (2,)
  of AutoAugment's sub-policy (`autoaugment_draws`); 'box' [on, y0, x0, height, width] and 'noise'
  (1, height, width, 3) uint8 of random erasing.
  """
  names = train_op_names(cfg)
  seed_of = lambda name: fold_in(seed, 100 + names.index(name))
  out = {}
  if 'color_jitter' in names:
    apply, u = jitter_draws(seed_of('color_jitter'),
                            float(cfg.color_jitter_prob))
    scale, offset_scale = jitter_params(u, float(cfg.color_jitter))
    out['jitter_on'] = apply
    out['jitter_scale'], out['jitter_offset'] = scale, offset_scale
  else:
    out['jitter_on'] = tf.constant(False)
    out['jitter_scale'], out['jitter_offset'] = tf.eye(3), tf.zeros([3, 3])
  ra = randaugment_args(cfg)
  out['ops'], out['signs'] = randaugment_draws(
      seed_of('randaugment') if ra else seed, ra[0] if ra else 0)
  if 'autoaugment' in names:
    out['aa_index'], out['aa_applied'], out['aa_signs'] = autoaugment_draws(
        seed_of('autoaugment'), autoaugment_args(cfg))
  else:
    out['aa_index'] = tf.constant(-1, tf.int32)
    out['aa_applied'], out['aa_signs'] = tf.zeros([2], tf.bool), tf.ones([2])
  if 'random_erasing' in names:
    s = seed_of('random_erasing')
    box = erasing_box(s, h, w, float(cfg.random_erasing))
    out['box'] = box
    out['noise'] = tf.cond(box[0] > 0, lambda: erasing_noise(s, box),
                           lambda: tf.zeros([1, 0, 0, 3], tf.uint8))
  else:
    out['box'] = tf.zeros([5], tf.int32)
    out['noise'] = tf.zeros([1, 0, 0, 3], tf.uint8)
  return out
