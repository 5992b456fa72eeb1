"""One video record as the pipelines read it: parsing, labels and checks.

A parsed record is {'frames': (N,) encoded frames (string), 'labels': {field:
int64 scalar}, 'video_id': string}, from a DMVR SequenceExample
(`parse_record`) or a TFDS example (`parse_tfds_example`). A label field is
'label', or 'label/<head>' per head of a multi-head dataset (`label_heads`).

Nothing here raises on bad data: a missing label becomes -1 and a missing
frame list an empty one, and `check_record` gives the error code that
`vvt.data.errors` turns into a named error or a counted skip.
"""
import numpy as np
import tensorflow as tf

from vvt.data import errors


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


# ----------------------------------------------------------------- parsing --
def parse_record(serialized, frames_key, label_keys, video_id_key):
  """tf.data: serialized SequenceExample -> {'frames', 'labels', 'video_id'}.

  `label_keys` maps batch field -> context key. A missing label becomes -1 and
  a missing frame list an empty one, so `check_record` can name the problem
  instead of the parse failing here.
  """
  context_features = {
      key: tf.io.FixedLenFeature([], tf.int64, default_value=-1)
      for key in label_keys.values()}
  if video_id_key:
    context_features[video_id_key] = tf.io.FixedLenFeature(
        [], tf.string, default_value='')
  context, sequence = tf.io.parse_single_sequence_example(
      serialized,
      context_features=context_features,
      sequence_features={frames_key: tf.io.FixedLenSequenceFeature(
          [], tf.string, allow_missing=True)})
  return {
      'frames': sequence[frames_key],
      'labels': {head: context[key] for head, key in label_keys.items()},
      'video_id': context[video_id_key] if video_id_key else tf.constant(''),
  }


def parse_tfds_example(example, video_key, label_keys):
  """A TFDS example read with its frames still encoded -> the same dict as
  `parse_record` (no video id)."""
  return {'frames': example[video_key],
          'labels': {f: tf.cast(example[k], tf.int64)
                     for f, k in label_keys.items()},
          'video_id': tf.constant('')}


# ------------------------------------------------------------------ checks --
def check_record(parsed, classes, heads):
  """(error code int32, detail string) of one parsed record.

  Code `errors.NO_FRAMES` when it has no frames, else `errors.BAD_LABEL` when
  a label is outside [0, classes[field]) (detail: 'key=value (num_classes=C)'
  per head), else `errors.OK`.
  """
  n = tf.size(parsed['frames'])
  label_ok = tf.constant(True)
  details = []
  for field, key in heads.items():
    label = parsed['labels'][field]
    label_ok &= (label >= 0) & (label < classes[field])
    details.append(tf.strings.join(
        [f'{key}=', tf.strings.as_string(label),
         f' (num_classes={classes[field]})']))
  code = tf.where(n == 0, errors.NO_FRAMES,
                  tf.where(label_ok, errors.OK, errors.BAD_LABEL))
  detail = tf.where(code == errors.BAD_LABEL,
                    tf.strings.reduce_join(details, separator=', '), '')
  return tf.cast(code, tf.int32), detail


def _dummy_frames():
  """(1,) string: one 8x8 black JPEG, decodable stand-in frames."""
  return tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8))[None]


def usable_frames(parsed, code):
  """(N,) encoded frames: the record's when `code` is OK, else a dummy frame,
  so a bad record still runs through sampling and decoding (and is then
  raised or dropped by its code)."""
  return tf.cond(code == errors.OK, lambda: parsed['frames'], _dummy_frames)


def labels(parsed, heads):
  """dict field -> int32 scalar label (a missing label, -1, becomes 0; the
  record is dropped or raised by its code anyway)."""
  return {field: tf.cast(tf.maximum(parsed['labels'][field], 0), tf.int32)
          for field in heads}
