"""AutoAugment (Cubuk et al., *AutoAugment: Learning Augmentation Policies from Data*, CVPR 2019): the policy
tables and what each (operation, magnitude) does, for video clips (no TensorFlow, no OpenCV here).

A policy is 25 sub-policies of two (operation, probability, magnitude) steps. For each training clip one
sub-policy is drawn uniformly, and each of its two steps runs with its probability
(`vvt.data.transforms.random_draws.autoaugment_draws`); the drawn steps then run on the whole clip with one draw for all
of its frames, as vvt's RandAugment does (`vvt.data.transforms.augment.augment`, the operations of `augment.OPS`).

Magnitudes are the paper's integers 0..9 on its scale of 10 levels: magnitude m is m/10 of each operation's
range (the authors' code divides by its PARAMETER_MAX = 10), with the ranges of the operations table of the
paper's Appendix: rotate ±30°, shear ±0.3 (a random direction each, as in every public implementation), solarize
threshold [0, 256], posterize [4, 8] bits, colour / contrast / brightness / sharpness factors [0.1, 1.9]
(the factor itself, not a distance from 1: magnitude 0 is 0.1, nearly grey for colour); auto-contrast,
equalize and invert take no magnitude. Posterize and solarize map m as timm's table of this policy
(`auto_augment_policy_original`: 4 + floor(4m/10) bits kept, pixels >= floor(256m/10) inverted; both weaker as m
grows), not as the AutoAugment authors' public code (tensorflow/models `augmentation_transforms.py`: 4 -
floor(4m/10) bits, threshold 256 - floor(256m/10); both stronger as m grows). docs/recipes.md has the sources.
"""

# Cubuk et al. 2018, Appendix, the policy learned on ImageNet: 25 sub-policies, each two
# (operation, probability, magnitude) steps; None where the operation has no magnitude.
IMAGENET = (
    (('posterize', 0.4, 8), ('rotate', 0.6, 9)),
    (('solarize', 0.6, 5), ('auto_contrast', 0.6, None)),
    (('equalize', 0.8, None), ('equalize', 0.6, None)),
    (('posterize', 0.6, 7), ('posterize', 0.6, 6)),
    (('equalize', 0.4, None), ('solarize', 0.2, 4)),
    (('equalize', 0.4, None), ('rotate', 0.8, 8)),
    (('solarize', 0.6, 3), ('equalize', 0.6, None)),
    (('posterize', 0.8, 5), ('equalize', 1.0, None)),
    (('rotate', 0.2, 3), ('solarize', 0.6, 8)),
    (('equalize', 0.6, None), ('posterize', 0.4, 6)),
    (('rotate', 0.8, 8), ('color', 0.4, 0)),
    (('rotate', 0.4, 9), ('equalize', 0.6, None)),
    (('equalize', 0.0, None), ('equalize', 0.8, None)),
    (('invert', 0.6, None), ('equalize', 1.0, None)),
    (('color', 0.6, 4), ('contrast', 1.0, 8)),
    (('rotate', 0.8, 8), ('color', 1.0, 2)),
    (('color', 0.8, 8), ('solarize', 0.8, 7)),
    (('sharpness', 0.4, 7), ('invert', 0.6, None)),
    (('shear_x', 0.6, 5), ('equalize', 1.0, None)),
    (('color', 0.4, 0), ('equalize', 0.6, None)),
    (('equalize', 0.4, None), ('solarize', 0.2, 4)),
    (('solarize', 0.6, 5), ('auto_contrast', 0.6, None)),
    (('invert', 0.6, None), ('equalize', 1.0, None)),
    (('color', 0.6, 4), ('contrast', 1.0, 8)),
    (('equalize', 0.8, None), ('equalize', 0.6, None)),
)

POLICIES = {'imagenet': IMAGENET}  # dataset.autoaugment -> table (vvt.data.choices.AUTOAUGMENT_POLICIES)
STEPS = 2  # steps of a sub-policy

SIGNED = ('rotate', 'shear_x', 'shear_y', 'translate_x', 'translate_y')  # a random direction per clip
ENHANCE = ('color', 'contrast', 'brightness', 'sharpness')  # factor in [0.1, 1.9]
NO_MAGNITUDE = ('auto_contrast', 'equalize', 'invert')
OPERATIONS = SIGNED + ENHANCE + NO_MAGNITUDE + ('solarize', 'posterize')


def policy(name):
  """The sub-policies of `name` (dataset.autoaugment); ValueError naming the field for an unknown one."""
  if name not in POLICIES:
    raise ValueError(f'dataset.autoaugment must be None or one of {tuple(POLICIES)}, got {name!r}')
  return POLICIES[name]


def probabilities(name):
  """(25, 2) list of the steps' probabilities of policy `name`."""
  return [[p for _, p, _ in sub] for sub in policy(name)]


def op_arguments(op, magnitude, sign):
  """(operation of `augment.OPS`, level in [0, 1], sign) that makes step (op, magnitude) with the drawn `sign`.

  vvt's operations take a level (RandAugment's magnitude / 10) and a sign; this maps the paper's parameter of
  each step onto them: rotate / shear ±(m/10) x max; colour-like factor f = 0.1 + 1.8 m/10 as 1 + sign 0.9
  level; solarize threshold floor(256 m/10); posterize 4 + floor(4 m/10) bits kept.
  """
  if op in NO_MAGNITUDE:
    return op, 0.0, 1.0
  if op not in OPERATIONS:
    raise ValueError(f'unknown AutoAugment operation {op!r}')
  m = int(magnitude)
  if op in SIGNED:
    return op, m / 10, float(sign)
  if op in ENHANCE:
    distance = (0.1 + 1.8 * m / 10 - 1.0) / 0.9  # (factor - 1) / 0.9, in [-1, 1]
    return op, abs(distance), 1.0 if distance >= 0 else -1.0
  if op == 'solarize':
    return op, 1.0 - (256 * m // 10) / 256, 1.0  # inverts the pixels >= threshold
  bits = 4 + 4 * m // 10  # posterize
  return op, (8 - bits) / 4, 1.0


def sub_policy_steps(name, index, applied, signs):
  """[(operation, level, sign)] of the steps of sub-policy `index` of policy `name` that were drawn to run
  (`applied` (2,) bools, `signs` (2,) +-1), in order."""
  steps = []
  for (op, _, magnitude), on, sign in zip(policy(name)[int(index)], applied, signs, strict=True):
    if on:
      steps.append(op_arguments(op, magnitude, sign))
  return steps
