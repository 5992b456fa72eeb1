"""The DMVR source (`dataset.name='dmvr'`): TFRecord files of `tf.train.SequenceExample`s, one per video.

The files are spec.train_files for split 'train', spec.eval_files for any other split (patterns:
`vvt.data.reading.patterns`), indexed from their record headers (`tfrecord_index`). A host reads its records
file by file (`read_segment`): where a file's data turns out corrupt, the rest of that file comes as unread rows
naming the record, its byte and why, and the other files are read on. A record is parsed into its encoded frames
(feature list `spec.frames_key`), labels (context `spec.label_keys`) and id (`spec.video_id_key`), the format
`vvt.data.writing.dmvr_records` writes; its frames are images (`image_frames.ImageFrames`).
"""
import numpy as np
import tensorflow as tf

from vvt.data.reading import errors
from vvt.data.reading import image_frames
from vvt.data.reading import labels
from vvt.data.reading import names
from vvt.data.reading import source
from vvt.data.reading import tfrecord_framing
from vvt.data.reading import tfrecord_index


class DmvrSource:
  """TFRecord files of DMVR SequenceExamples: spec.train_files for split
  'train', spec.eval_files for any other split (a `vvt.data.reading.source.Source`)."""

  frames = image_frames.ImageFrames()

  def __init__(self, spec, split):
    patterns = spec.train_files if split == 'train' else spec.eval_files
    field = 'train_files' if split == 'train' else 'eval_files'
    if not patterns:
      raise ValueError(f'dataset.{field} is empty: point it at the {split!r} '
                       'TFRecords (a glob or a name like dir/x.tfrecord@16)')
    files = tfrecord_index.expand_patterns(patterns, spec.data_dir)
    self.index = tfrecord_index.index_files(files, spec.on_error)
    errors.count_truncated_files(self.index.truncated)  # once per file
    self.num_records = self.index.num_records
    self.description = f'{field}={patterns!r}'
    self.files = self.index.files
    self.damaged = self.index.damaged
    self.heads = labels.label_heads(spec.label_keys)
    self.class_names = names.dataset_class_names(spec)
    self._frames_key = spec.frames_key
    self._video_id_key = spec.video_id_key
    self.multi_label = bool(spec.multi_label)
    self._cycle_length = max(1, int(spec.cycle_length))
    self.num_captions = self._captions = int(spec.captions)

  def records(self, lo, hi, shuffle_seed=None):
    """(path, record index in file, global index, serialized, unread) for
    [lo, hi); `unread` is '' for a record read, else why it cannot be read.

    Files are read `cycle_length` at a time, interleaved record by record;
    `shuffle_seed` (a [2] int64 tensor) shuffles their order first. Each
    file is read on its own (`read_segment`): where its data turns out
    corrupt, its remaining records come with `unread` set and an empty
    record, and the other files are read on.
    """
    segs = tfrecord_index.segments(self.index, lo, hi)
    paths = tf.constant([s.path for s in segs], tf.string)
    starts = tf.constant([s.start for s in segs], tf.int64)
    counts = tf.constant([s.count for s in segs], tf.int64)
    offsets = tf.constant([s.offset for s in segs], tf.int64)
    first_byte = tf.constant([b for s in segs for b in self._bytes(s)], tf.int64)
    order = tf.range(len(segs))
    if shuffle_seed is not None:
      order = tf.random.experimental.stateless_shuffle(order, shuffle_seed)
    ds = tf.data.Dataset.from_tensor_slices(tuple(
        tf.gather(t, order) for t in (paths, starts, counts, offsets)))
    byte_of = lambda index: tf.gather(first_byte, index - lo)
    return ds.interleave(
        lambda *seg: read_segment(*seg, byte_of),
        cycle_length=min(self._cycle_length, len(segs)),
        block_length=1, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def _bytes(self, seg):
    """Start bytes of the segment's records (-1 where not known)."""
    i = self.index.files.index(seg.path)
    known = self.index.offsets[i] if i < len(self.index.offsets) else ()
    return [known[r] if r < len(known) else -1
            for r in range(seg.start, seg.start + seg.count)]

  def record(self, index):
    """The `Row` of record `index` (numpy values), read on its own from its file (`read_segment` of that one
    record): the row `records` yields for it where its file reads up to it."""
    path, rec = self.index.locate(index)
    byte = self._bytes(tfrecord_index.Segment(path, rec, 1, index))[0]
    one = tf.data.Dataset.from_tensors((path, tf.constant(rec, tf.int64), tf.constant(index, tf.int64)))
    rows = one.flat_map(lambda p, r, i: read_segment(p, r, tf.constant(1, tf.int64), i,
                                                     lambda _: tf.constant(byte, tf.int64)))
    return source.Row(*next(iter(rows.as_numpy_iterator())))

  def locate(self, index):
    return self.index.locate(index)

  def parse(self, raw):
    parsed = parse_record(raw, self._frames_key, self.heads, self._video_id_key, self.multi_label)
    if self._captions:
      parsed['captions'] = parse_captions(raw, self._captions)
    return parsed


def parse_record(serialized, frames_key, label_keys, video_id_key, multi_label=False):
  """tf.data: serialized SequenceExample -> {'frames', 'labels', 'video_id', 'label_counts'}.

  `label_keys` maps batch field -> context key. A missing label becomes -1 and
  a missing frame list an empty one, so `check_record` can name the problem
  instead of the parse failing here. `multi_label`: a label is the int64 vector
  of all the key's values (empty when missing); else its first value, and
  'label_counts' says how many the key holds (a multi-label record read by a
  single-label run is then named as such, `labels.several_labels`).
  """
  context_features = {key: tf.io.VarLenFeature(tf.int64) for key in label_keys.values()}
  if video_id_key:
    context_features[video_id_key] = tf.io.FixedLenFeature(
        [], tf.string, default_value='')
  context, sequence = tf.io.parse_single_sequence_example(
      serialized,
      context_features=context_features,
      sequence_features={frames_key: tf.io.FixedLenSequenceFeature(
          [], tf.string, allow_missing=True)})
  values = {head: tf.sparse.to_dense(context[key]) for head, key in label_keys.items()}
  first = {head: tf.concat([v, tf.constant([-1], tf.int64)], 0)[0] for head, v in values.items()}
  return {
      'frames': sequence[frames_key],
      'labels': values if multi_label else first,
      'label_counts': {head: tf.size(v) for head, v in values.items()},
      'video_id': context[video_id_key] if video_id_key else tf.constant(''),
  }


CAPTION_KEY = 'caption/string'  # DMVR's context feature of a video's captions (`vvt.data.writing.dmvr_records`)


def parse_captions(serialized, count: int):
  """tf.data: the first `count` captions (context `caption/string`) of a serialized SequenceExample, (count,)
  tf.string padded with '' (a record without captions: all '')."""
  context, _ = tf.io.parse_single_sequence_example(
      serialized, context_features={CAPTION_KEY: tf.io.VarLenFeature(tf.string)})
  values = tf.sparse.to_dense(context[CAPTION_KEY], default_value='')[:count]
  return tf.concat([values, tf.fill([count - tf.size(values)], '')], 0)


def _can_open(path):
  """numpy_function: whether the file `path` can be opened and read."""
  try:
    with tf.io.gfile.GFile(path.decode(), 'rb') as f:
      f.read(1)
    return np.bool_(True)
  except (OSError, tf.errors.OpError):
    return np.bool_(False)


def _unread_detail(path, first, end, byte):
  """Why records [first, end) of `path` were not read: the record at `byte`
  cannot be (`tfrecord_framing.check_record_at`)."""
  def describe(p, b):
    why = tfrecord_framing.check_record_at(p.decode(), int(b)) if b >= 0 else ''
    return (why or f'reading stopped at the record at byte {int(b)} (the file '
            'changed or cannot be read)').encode()
  why = tf.numpy_function(describe, [path, byte], tf.string, stateful=True)
  span = tf.where(end - first > 1, tf.strings.join(
      ['records ', tf.strings.as_string(first), '-',
       tf.strings.as_string(end - 1)]), tf.strings.join(
           ['record ', tf.strings.as_string(first)]))
  return tf.strings.join(['record ', tf.strings.as_string(first), ': ',
                          tf.reshape(why, []), '; ', span, ' of this file not read'])


def read_segment(path, start, count, offset, byte_of):
  """Records [start, start + count) of one file as (path, record, global
  index, serialized, unread), in order, every one of them once.

  The file is read until its data turns out corrupt (a record whose
  checksum does not match ends it: TFRecord framing cannot be resumed
  past it); the records not read follow with an empty serialized record
  and `unread` naming the first one, its byte (`byte_of(global index)`)
  and why.
  """
  end = start + count
  # A file that cannot be opened is read as no file (its records then come as unread): TFRecordDataset
  # would retry the open forever under ignore_errors.
  ok = tf.reshape(tf.numpy_function(_can_open, [path], tf.bool, stateful=True), [1])
  read = tf.data.TFRecordDataset(tf.boolean_mask(tf.reshape(path, [1]), ok))
  read = read.skip(start).take(count)
  read = read.ignore_errors(log_warning=False).map(lambda r: (r, tf.constant(False)))
  stop = tf.data.Dataset.from_tensors((tf.constant(b''), tf.constant(True)))

  def rows(i, x):
    """State: the next record; a record read -> itself, the stop -> the records not read."""
    r, is_end = x
    n = tf.where(is_end, end - i, tf.constant(1, tf.int64))
    unread = tf.cond(is_end & (n > 0),
                     lambda: _unread_detail(path, i, end, byte_of(offset + i - start)),
                     lambda: tf.constant(''))
    rec = tf.range(i, i + n)
    return i + 1, (tf.fill([n], path), rec, offset + rec - start, tf.fill([n], r), tf.fill([n], unread))

  return read.concatenate(stop).scan(start, rows).unbatch()
