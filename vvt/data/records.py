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
from vvt.data import transforms


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
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_HEADER_BYTES = 1024  # of each frame read for its size; more only if needed


def _sof_position(data):
  """Offset of a JPEG's start-of-frame segment within `data` (its first
  bytes), or None when `data` is not a JPEG or the segment is not in it."""
  data = bytes(data)
  if data[:2] != b'\xff\xd8':
    return None
  pos = 2
  while pos + 9 <= len(data) and data[pos] == 0xFF:
    marker = data[pos + 1]
    if marker == 0xFF:  # fill byte
      pos += 1
    elif marker in _SOF_MARKERS:
      return pos
    else:
      pos += 2 + int.from_bytes(data[pos + 2:pos + 4], 'big')
  return None


def header_sizes(heads):
  """uint8 (N, L): the first bytes of N JPEG frames -> int32 (N, 2) (height,
  width) from their start-of-frame segments; (-1, -1) where it is not in
  those bytes (or the frame is not a JPEG).

  Frames of one video share their header up to that segment (same encoder
  and tables), so it is found once and checked for all at the same offset.
  """
  heads = np.asarray(heads, np.uint8)
  sizes = np.full((len(heads), 2), -1, np.int32)
  positions = {}
  todo = np.ones(len(heads), bool)
  while todo.any():
    i = int(np.flatnonzero(todo)[0])
    pos = _sof_position(heads[i])
    if pos is None or pos in positions:
      todo[i] = False
      continue
    positions[pos] = True
    same = todo & (heads[:, :pos + 2] == heads[i, :pos + 2]).all(axis=1)
    seg = heads[same, pos:pos + 9].astype(np.int32)
    sizes[same] = np.stack([seg[:, 5] * 256 + seg[:, 6],
                            seg[:, 7] * 256 + seg[:, 8]], axis=1)
    todo &= ~same
  return sizes


def frame_sizes(frames):
  """(N, 2) int32 (height, width) of each encoded frame, from the headers
  only: `header_sizes` of their first bytes (about 0.1 ms for 300 JPEG
  frames), `transforms.frame_shape` for the rest (other formats, long
  headers). An unreadable header raises (the record is corrupt)."""
  heads = tf.io.decode_raw(tf.strings.substr(frames, 0, _HEADER_BYTES),
                           tf.uint8, fixed_length=_HEADER_BYTES)
  sizes = tf.numpy_function(header_sizes, [heads], tf.int32, stateful=False)
  sizes = tf.ensure_shape(sizes, [None, 2])
  unknown = tf.where(sizes[:, 0] < 0)[:, 0]
  rest = tf.map_fn(transforms.frame_shape, tf.gather(frames, unknown),
                   fn_output_signature=tf.TensorSpec([2], tf.int32))
  return tf.tensor_scatter_nd_update(sizes, unknown[:, None], rest)


def _size_text(size):
  return tf.strings.reduce_join(tf.strings.as_string(size), separator='x')


def check_frame_sizes(frames):
  """(True when every frame has the first one's size, detail string naming
  the first frame that does not: 'frame 0 is 64x64, frame 5 is 32x48')."""
  sizes = frame_sizes(frames)
  differs = tf.reduce_any(sizes != sizes[:1], axis=1)
  first = tf.cast(tf.argmax(tf.cast(differs, tf.int32)), tf.int32)
  same = tf.logical_not(tf.reduce_any(differs))
  detail = tf.cond(
      same, lambda: tf.constant(''),
      lambda: tf.strings.join([
          'frame 0 is ', _size_text(sizes[0]), ', frame ',
          tf.strings.as_string(first), ' is ', _size_text(sizes[first])]))
  return same, detail


_SOI, _EOI = b'\xff\xd8', b'\xff\xd9'


def check_frame_ends(frames):
  """(True when every JPEG frame ends with its end-of-image marker FF D9,
  detail string naming the first that does not: 'frame 3 of 16 (1200
  bytes) ends without ...').

  A JPEG cut short still decodes (the decoder fills the missing rows), so
  only this tells it from a whole one; encoders end a JPEG with FF D9 (no
  padding after it). Frames of other formats are not checked here. Reads the
  first and last 2 bytes of each frame.
  """
  size = tf.strings.length(frames)
  two = tf.fill(tf.shape(size), 2)
  jpeg = tf.equal(tf.strings.substr(frames, tf.zeros_like(size), two), _SOI)
  cut = jpeg & tf.not_equal(tf.strings.substr(frames, tf.maximum(size - 2, 0), two), _EOI)
  whole = tf.logical_not(tf.reduce_any(cut))

  def name_first():
    first = tf.cast(tf.argmax(tf.cast(cut, tf.int32)), tf.int32)
    return tf.strings.join([
        'frame ', tf.strings.as_string(first), ' of ',
        tf.strings.as_string(tf.size(frames)), ' (',
        tf.strings.as_string(size[first]),
        ' bytes) does not end with the JPEG end-of-image marker FF D9'])
  return whole, tf.cond(whole, lambda: tf.constant(''), name_first)


def check_record(parsed, classes, heads):
  """(error code int32, detail string) of one parsed record.

  Code `errors.NO_FRAMES` when it has no frames, else
  `errors.TRUNCATED_FRAME` when a JPEG frame is cut short (no end-of-image
  marker; detail: the first such frame), else `errors.FRAME_SIZES`
  when its frames differ in size (every frame's header is read, not only the
  sampled ones; detail: the first frame that differs), else
  `errors.BAD_LABEL` when a label is outside [0, classes[field]) (detail:
  'key=value (num_classes=C)' per head), else `errors.OK`. A frame whose
  header cannot be read raises (a corrupt record).
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
  whole, end_detail = check_frame_ends(parsed['frames'])
  same_size, size_detail = tf.cond(
      n > 0, lambda: check_frame_sizes(parsed['frames']),
      lambda: (tf.constant(True), tf.constant('')))
  code = tf.where(n == 0, errors.NO_FRAMES,
                  tf.where(~whole, errors.TRUNCATED_FRAME,
                           tf.where(~same_size, errors.FRAME_SIZES,
                                    tf.where(label_ok, errors.OK, errors.BAD_LABEL))))
  detail = tf.where(code == errors.BAD_LABEL,
                    tf.strings.reduce_join(details, separator=', '),
                    tf.where(code == errors.FRAME_SIZES, size_detail,
                             tf.where(code == errors.TRUNCATED_FRAME, end_detail, '')))
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
