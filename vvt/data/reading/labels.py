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


def num_classes(spec, fields):
  """dict batch field -> number of classes, from `spec.num_classes` (an int,
  or a dict head -> int for multi-head fields 'label/<head>')."""
  nc = spec.num_classes
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
    if label.shape.rank == 1:  # multi-label: every value in range, at least one
      ok &= (tf.size(label) > 0) & tf.reduce_all((label >= 0) & (label < classes[field]))
      shown = tf.strings.reduce_join(tf.strings.as_string(label), separator=',')
      details.append(tf.strings.join([f'{key}=[', shown, f'] (num_classes={classes[field]})']))
      continue
    ok &= (label >= 0) & (label < classes[field])
    details.append(tf.strings.join(
        [f'{key}=', tf.strings.as_string(label), f' (num_classes={classes[field]})']))
  return ok, tf.strings.reduce_join(tf.stack(details or [tf.constant('')]), separator=', ')  # no heads: ''


def several_labels(parsed, heads):
  """(True when a single-label record's label key holds several values, the detail naming the key, its values
  and dataset.multi_label); (False, '') for records without 'label_counts' (sources of one value per label)."""
  counts = parsed.get('label_counts')
  if not counts:
    return tf.constant(False), tf.constant('')
  several, details = tf.constant(False), []
  for field, key in heads.items():
    if parsed['labels'][field].shape.rank == 1:  # multi-label: every value read
      continue
    many = counts[field] > 1
    several |= many
    details.append(tf.where(many, tf.strings.join(
        [f'{key} holds ', tf.strings.as_string(counts[field]), ' labels']), ''))
  joined = tf.strings.reduce_join(tf.stack(details or [tf.constant('')]), separator=' ')
  return several, tf.strings.join([tf.strings.strip(joined), ' (a multi-label record): dataset.multi_label=False '
                                   'reads one label a record; set dataset.multi_label=True (task.name='
                                   "'multilabel') to read them all"])


def labels(parsed, heads, classes=None):
  """dict field -> int32 scalar label (a missing label, -1, becomes 0; the
  record is dropped or raised by its code anyway); a multi-label record's
  (a vector of values) -> int32 multi-hot (classes[field],)."""
  out = {}
  for field in heads:
    label = parsed['labels'][field]
    if label.shape.rank == 1:
      hot = tf.one_hot(tf.clip_by_value(label, 0, classes[field] - 1), classes[field], dtype=tf.int32)
      out[field] = tf.reduce_max(tf.concat([hot, tf.zeros([1, classes[field]], tf.int32)], 0), axis=0)
    else:
      out[field] = tf.cast(tf.maximum(label, 0), tf.int32)
  return out


def zeros(heads, classes, multi_label: bool):
  """dict field -> the zero label of a padding or unreadable row: 0, or (classes[field],) zeros."""
  if multi_label:
    return {field: tf.zeros([classes[field]], tf.int32) for field in heads}
  return {field: tf.constant(0, tf.int32) for field in heads}
