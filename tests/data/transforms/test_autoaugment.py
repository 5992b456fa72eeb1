"""AutoAugment (`dataset.autoaugment`): the published ImageNet policy, its magnitudes, one draw per clip for every
frame, determinism and exact resume, bad input."""
import pathlib

from data_helpers import small_config
import numpy as np
import pytest
import tensorflow as tf

from vvt.config import loader
from vvt.config.errors import ConfigError
from vvt.data import pipeline
from vvt.data.transforms import augment
from vvt.data.transforms import autoaugment
from vvt.data.transforms import random_draws

# Cubuk et al. 2018, Appendix, the ImageNet policy, as printed: "Operation, probability, magnitude" twice per
# sub-policy, magnitudes of operations without one left out.
PUBLISHED_IMAGENET = """
Posterize 0.4 8, Rotate 0.6 9 | Solarize 0.6 5, AutoContrast 0.6 | Equalize 0.8, Equalize 0.6 |
Posterize 0.6 7, Posterize 0.6 6 | Equalize 0.4, Solarize 0.2 4 | Equalize 0.4, Rotate 0.8 8 |
Solarize 0.6 3, Equalize 0.6 | Posterize 0.8 5, Equalize 1.0 | Rotate 0.2 3, Solarize 0.6 8 |
Equalize 0.6, Posterize 0.4 6 | Rotate 0.8 8, Color 0.4 0 | Rotate 0.4 9, Equalize 0.6 |
Equalize 0.0, Equalize 0.8 | Invert 0.6, Equalize 1.0 | Color 0.6 4, Contrast 1.0 8 |
Rotate 0.8 8, Color 1.0 2 | Color 0.8 8, Solarize 0.8 7 | Sharpness 0.4 7, Invert 0.6 |
ShearX 0.6 5, Equalize 1.0 | Color 0.4 0, Equalize 0.6 | Equalize 0.4, Solarize 0.2 4 |
Solarize 0.6 5, AutoContrast 0.6 | Invert 0.6, Equalize 1.0 | Color 0.6 4, Contrast 1.0 8 |
Equalize 0.8, Equalize 0.6
"""
XVIT = str(pathlib.Path(__file__).parents[3] / 'configs/kinetics400/xvit_b.py')
NAMES = {'AutoContrast': 'auto_contrast', 'ShearX': 'shear_x'}


def _published():
  out = []
  for sub in PUBLISHED_IMAGENET.split('|'):
    steps = []
    for step in sub.split(','):
      name, prob, *mag = step.split()
      steps.append((NAMES.get(name, name.lower()), float(prob), int(mag[0]) if mag else None))
    out.append(tuple(steps))
  return tuple(out)


def test_imagenet_policy_is_the_published_table():
  assert autoaugment.policy('imagenet') == _published()
  assert len(autoaugment.IMAGENET) == 25 and all(len(s) == autoaugment.STEPS for s in autoaugment.IMAGENET)
  assert {op for sub in autoaugment.IMAGENET for op, _, _ in sub} <= set(augment.OPS)


def _ramp():
  return np.tile(np.arange(256, dtype=np.uint8)[None, :, None], (2, 1, 3)).reshape(2, 16, 16, 3)


@pytest.mark.parametrize('op,magnitude,expect', [
    ('posterize', 8, lambda x: x & 0b11111110),    # 4 + floor(4 * 8/10) = 7 bits kept
    ('posterize', 5, lambda x: x & 0b11111100),    # 6 bits
    ('solarize', 5, lambda x: np.where(x >= 128, 255 - x, x)),  # threshold floor(256 * 5/10)
    ('solarize', 8, lambda x: np.where(x >= 204, 255 - x, x)),
    ('invert', None, lambda x: 255 - x),
])
def test_lookup_operations_match_the_papers_parameters(op, magnitude, expect):
  name, level, sign = autoaugment.op_arguments(op, magnitude, 1.0)
  video = _ramp()
  np.testing.assert_array_equal(augment.OPS[name](video, level, sign), expect(video.astype(np.int32)))


def test_magnitudes_map_onto_the_papers_ranges():
  assert autoaugment.op_arguments('rotate', 9, -1.0) == ('rotate', 0.9, -1.0)  # -27 degrees of +-30
  assert autoaugment.op_arguments('shear_x', 5, 1.0) == ('shear_x', 0.5, 1.0)  # 0.15 of +-0.3
  for op, m, factor in (('color', 0, 0.1), ('color', 2, 0.46), ('contrast', 8, 1.54), ('sharpness', 7, 1.36)):
    name, level, sign = autoaugment.op_arguments(op, m, -1.0)  # the drawn sign does not change a factor
    assert name == op and 1 + sign * 0.9 * level == pytest.approx(factor)
  video = np.random.default_rng(0).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
  grey = augment.OPS['color'](video, *autoaugment.op_arguments('color', 0, 1.0)[1:])
  spread = lambda v: np.ptp(v.astype(int), axis=-1).mean()  # colour 0: factor 0.1, nearly grey
  assert spread(grey) < 0.15 * spread(video)


def _clip_fn(**fields):
  cfg = small_config(autoaugment='imagenet', **fields)
  return augment.train_clip_fn(cfg), cfg


def test_every_frame_of_a_clip_gets_the_same_sub_policy():
  fn, cfg = _clip_fn()
  rng = np.random.default_rng(1)
  frame = rng.integers(0, 256, (20, 20, 3), dtype=np.uint8)
  window = tf.constant(np.stack([frame] * 4))
  changed, subs = 0, set()
  for k in range(40):
    seed = tf.constant([3, k], tf.int64)
    clip = fn(window, tf.constant(False), seed).numpy()
    for t in range(1, 4):  # identical frames in, identical frames out: one draw for the whole clip
      np.testing.assert_array_equal(clip[t], clip[0], err_msg=f'seed {k}, frame {t}')
    plain = augment.resize_frames(window.numpy(), (16, 16))
    changed += not np.array_equal(clip, plain)
    subs.add(int(random_draws.train_draws(cfg, seed, 16, 16)['aa_index']))
  assert changed >= 20 and len(subs) >= 15


def test_geometric_steps_move_every_frame_alike():
  """Frames that differ: a drawn rotation / shear maps each frame as it maps that frame alone."""
  video = np.random.default_rng(2).integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
  for op, m in (('rotate', 9), ('shear_x', 5)):
    name, level, sign = autoaugment.op_arguments(op, m, -1.0)
    whole = augment.OPS[name](video, level, sign)
    for t in range(3):
      np.testing.assert_array_equal(whole[t], augment.OPS[name](video[t:t + 1], level, sign)[0])


def test_draws_follow_the_probabilities():
  cfg = small_config(autoaugment='imagenet')
  table = autoaugment.policy('imagenet')
  ran = {0.0: 0, 1.0: 0}
  for k in range(300):
    d = random_draws.train_draws(cfg, tf.constant([0, k], tf.int64), 16, 16)
    index, applied = int(d['aa_index']), d['aa_applied'].numpy()
    for (_, prob, _), on in zip(table[index], applied, strict=True):
      if prob in ran:
        ran[prob] += int(on) if prob == 0.0 else int(not on)
  assert ran == {0.0: 0, 1.0: 0}  # 'Equalize 0.0' never runs, probability 1.0 always does


def test_autoaugment_is_deterministic_and_resumes_exactly(synthetic_dir):
  cfg = small_config(synthetic_dir['train_files'], num_classes=4, autoaugment='imagenet', horizontal_flip=True)

  def stream(start, n):
    it = pipeline.make_train_iterator(cfg, 8, seed=4, start_step=start, process_index=0, process_count=1)
    return [next(it)['inputs'] for _ in range(n)]
  fresh = stream(0, 4)
  for a, b in zip(fresh, stream(0, 4), strict=False):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(fresh[2:], stream(2, 2), strict=False):
    np.testing.assert_array_equal(a, b)


def test_bad_autoaugment_fields_are_one_line_naming_the_field():
  with pytest.raises(ValueError, match=r"^dataset.autoaugment must be None or one of \('imagenet',\), got 'cifar10'$"):
    augment.train_clip_fn(small_config(autoaugment='cifar10'))
  for overrides, message in (
      ([('dataset.autoaugment', 'cifar10')], "dataset.autoaugment must be one of 'imagenet', got 'cifar10'"),
      ([('dataset.randaugment', "{'num_layers': 2, 'magnitude': 9}")],
       "dataset.autoaugment='imagenet' and dataset.randaugment are both set: choose one")):
    with pytest.raises(ConfigError) as e:
      loader.load(XVIT, overrides, files=(), init=False)
    assert str(e.value).startswith(message) and '\n' not in str(e.value)
