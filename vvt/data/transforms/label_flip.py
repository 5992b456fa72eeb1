"""Label-aware horizontal flip (`dataset.label_aware_flip`): a flipped clip of a class whose name says left or
right is labelled with its mirror class.

Something-Something v2 names directions ("Pushing something from left to right" / "Pushing something from
right to left"), so a plain flip turns such a clip into the other class while keeping its label. With
`label_aware_flip`, every class whose name with 'left' and 'right' swapped (whole words, any case) is also a
class gets that class's label when its clip is flipped; every other class keeps its label. The names are the
data's (`class_names` given to the training iterator, else the dataset's own class list,
`vvt.data.reading.names.dataset_class_names`).
"""
import dataclasses
import re

import tensorflow as tf

from vvt.data.transforms import clips

_SIDES = re.compile(r'\b(left|right)\b', re.IGNORECASE)


def _swap(match):
  word = match.group(0)
  other = 'right' if word.lower() == 'left' else 'left'
  if word.isupper():
    return other.upper()
  return other.capitalize() if word[0].isupper() else other


def mirrored_name(name: str) -> str:
  """`name` with the words 'left' and 'right' swapped (case kept)."""
  return _SIDES.sub(_swap, name)


def flip_permutation(names) -> list:
  """[label of the mirror class of each class]: the class whose name is `mirrored_name` of its own, else the
  class itself."""
  index = {n: i for i, n in enumerate(names)}
  return [index.get(mirrored_name(n), i) for i, n in enumerate(names)]


def mirror_pairs(names) -> list:
  """[(i, j)] with i < j: the classes a flip swaps."""
  return [(i, j) for i, j in enumerate(flip_permutation(names)) if i < j]


def _check(cfg, heads, names):
  if tuple(heads) != ('label',):
    raise ValueError(f'dataset.label_aware_flip works with one label, not the heads {tuple(heads)}')
  if not names:
    raise ValueError('dataset.label_aware_flip needs the class names of the data (class_names, or a classes.txt '
                     'or manifest beside dataset.train_files); none found')
  if isinstance(cfg.num_classes, int) and len(names) != cfg.num_classes:
    raise ValueError(f'dataset.label_aware_flip: {len(names)} class names for num_classes={cfg.num_classes}')


def labels_fn(cfg, heads, names):
  """fn(labels dict, seed) -> labels with 'label' mirrored where `clips.flip_flag(cfg, seed)` flipped the
  clip; None when dataset.label_aware_flip is off."""
  if not cfg.get('label_aware_flip'):
    return None
  _check(cfg, heads, names)
  table = tf.constant(flip_permutation(names), tf.int32)

  def fn(labels, seed):
    label = labels['label']
    mirrored = tf.gather(table, tf.clip_by_value(label, 0, table.shape[0] - 1))
    return {**labels, 'label': tf.where(clips.flip_flag(cfg, seed), mirrored, label)}
  return fn


def with_label_aware_flip(mode, cfg, heads, names):
  """The training `mode` (`vvt.data.examples.Mode`) with its labels mirrored for flipped clips, when
  dataset.label_aware_flip is on."""
  fn = labels_fn(cfg, heads, names)
  return mode if fn is None else dataclasses.replace(mode, labels=fn)
