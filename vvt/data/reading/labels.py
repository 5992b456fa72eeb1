"""A record's labels: the label heads of a dataset, their numbers of classes, and the label check.

A label field of a batch is 'label', or 'label/<head>' per head of a multi-head dataset (`label_heads`); a
parsed record carries {field: int64 scalar} with -1 where its label is missing. Nothing here raises on bad data:
`check` gives whether every label is in [0, num_classes), and the detail that names them, for the error code
`vvt.data.reading.errors.BAD_LABEL`.
"""
import numpy as np
import tensorflow as tf


def _is_mapping(x):
  return hasattr(x, 'keys') and hasattr(x, '__getitem__')


def label_heads(label_keys):
  """label_keys (str | 1-tuple | dict head->key) -> dict batch field -> key."""
  if isinstance(label_keys, str):
    return {'label': label_keys}
  if _is_mapping(label_keys):
    if not label_keys:
      raise ValueError('dataset.label_keys is an empty dict')
    return {f'label/{head}': key for head, key in label_keys.items()}
  keys = tuple(label_keys)
  if len(keys) != 1:
    raise ValueError('dataset.label_keys: give one key, or a dict head -> key for '
                     f'multi-head datasets; got {keys!r}')
  return {'label': keys[0]}


def num_classes(cfg, fields):
  """dict batch field -> number of classes, from `cfg.num_classes` (an int,
  or a dict head -> int for multi-head fields 'label/<head>')."""
  nc = cfg.num_classes
  out = {}
  for field in fields:
    head = field.split('/', 1)[1] if '/' in field else None
    if _is_mapping(nc):
      if head is None or head not in nc:
        raise ValueError(f'dataset.num_classes has no entry for head {head!r} '
                         f'(num_classes={dict(nc)!r})')
      value = nc[head]
    else:
      if head is not None:
        raise ValueError('dataset.num_classes must be a dict head -> int when '
                         'label_keys is a dict')
      value = nc
    if not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f'dataset.num_classes must be set to a positive int '
                       f'(per head), got {value!r}')
    out[field] = int(value)
  return out


def check(parsed, classes, heads):
  """(True when every label of a parsed record is in [0, classes[field]), detail string 'key=value
  (num_classes=C)' per head)."""
  ok = tf.constant(True)
  details = []
  for field, key in heads.items():
    label = parsed['labels'][field]
    ok &= (label >= 0) & (label < classes[field])
    details.append(tf.strings.join(
        [f'{key}=', tf.strings.as_string(label), f' (num_classes={classes[field]})']))
  return ok, tf.strings.reduce_join(details, separator=', ')


def labels(parsed, heads):
  """dict field -> int32 scalar label (a missing label, -1, becomes 0; the
  record is dropped or raised by its code anyway)."""
  return {field: tf.cast(tf.maximum(parsed['labels'][field], 0), tf.int32)
          for field in heads}
