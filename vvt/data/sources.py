"""Where records come from: file patterns, the split between hosts, readers.

A pattern is a glob (`dir/train-*.tfrecord`), a sharded name
(`dir/train.tfrecord@16` -> `dir/train.tfrecord-00000-of-00016` ...), an
exact path, or a comma-separated list / sequence of those. Relative patterns
are taken relative to `data_dir` when it is set.

Records are numbered globally in file order (files in the order the patterns
list them, globs sorted) and a host reads a contiguous range of those numbers,
so every record has one global index and the hosts' shares differ by at most
one record.

A source (`make_source`: `DmvrSource` for TFRecord files, `TfdsSource` for a
prepared TFDS dataset) knows its number of records, reads a host's range of
them as (source name, record in file, global index, raw record, unread) and
parses a raw record (`vvt.data.records`). `unread` is '' for a record read,
else why it could not be (a file whose data turns out corrupt: the rest of
that file, with its byte offset; the other files are read on).
"""
import dataclasses
import os

import numpy as np
import tensorflow as tf

from vvt.data import errors
from vvt.data import patterns as file_patterns
from vvt.data import records
from vvt.data import tfrecord

shard_names = file_patterns.shard_names


def expand_patterns(patterns, data_dir=''):
  """Resolves patterns to an ordered list of existing files.

  Raises FileNotFoundError naming the pattern or the missing file.
  """
  parts = file_patterns.split_patterns(patterns)
  if not parts:
    raise ValueError('no data files configured: set dataset.train_files / '
                     'dataset.eval_files (a glob or a name like dir/x.tfrecord@16)')
  files = []
  for pattern in parts:
    if data_dir and not os.path.isabs(pattern) and '://' not in pattern:
      pattern = os.path.join(data_dir, pattern)
    m = file_patterns.SHARDED.match(pattern)
    if m:
      names = shard_names(m.group('base'), int(m.group('n')))
      missing = [n for n in names if not tf.io.gfile.exists(n)]
      if missing:
        raise FileNotFoundError(
            f'{len(missing)} of {len(names)} shards of {pattern!r} are missing, '
            f'first: {missing[0]}')
      files.extend(names)
    elif any(ch in pattern for ch in '*?['):
      found = sorted(tf.io.gfile.glob(pattern))
      if not found:
        raise FileNotFoundError(f'no file matches the pattern {pattern!r}')
      files.extend(found)
    else:
      if not tf.io.gfile.exists(pattern):
        raise FileNotFoundError(f'data file not found: {pattern}')
      files.append(pattern)
  return files


@dataclasses.dataclass(frozen=True)
class Segment:
  """Records [start, start + count) of `path`; `offset` = global index of start."""
  path: str
  start: int
  count: int
  offset: int


@dataclasses.dataclass(frozen=True)
class FileIndex:
  """Files with their (readable) record counts."""
  files: tuple
  counts: tuple
  truncated: tuple  # (path, reason) for files whose tail cannot be read
  # per file, the start byte of each readable record (empty when not known)
  offsets: tuple = dataclasses.field(default=(), compare=False, repr=False)
  # per file whose tail cannot be read: (path, record, byte, reason, lost)
  damaged: tuple = dataclasses.field(default=(), compare=False)

  @property
  def num_records(self):
    return sum(self.counts)

  def locate(self, index):
    """Global record `index` -> (path, record in file)."""
    for path, count in zip(self.files, self.counts):
      if index < count:
        return path, index
      index -= count
    raise IndexError(f'record {index} is past the {self.num_records} records')


def index_files(files, on_error='raise'):
  """Counts the records of each file without reading their contents.

  A truncated file raises `errors.TruncatedFileError` (naming the file and the
  record) under on_error='raise'; under 'skip' its complete records are kept
  and the file is listed in `truncated`.
  """
  counts, truncated, offsets, damaged = [], [], [], []
  for path in files:
    scan = tfrecord.scan_records(path)
    if scan.error is not None:
      if on_error != 'skip':
        raise errors.TruncatedFileError(
            f'{path}: record {scan.num_records}: {scan.error} (the file is '
            'truncated or corrupt; re-create it, or set dataset.on_error='
            "'skip' to read only its complete records)")
      truncated.append((path, scan.error))
      damaged.append((path, scan.num_records, scan.error_offset, scan.error,
                      scan.lost))
    counts.append(scan.num_records)
    offsets.append(scan.offsets)
  return FileIndex(tuple(files), tuple(counts), tuple(truncated),
                   tuple(offsets), tuple(damaged))


def host_range(num_records, process_index, process_count):
  """[lo, hi): the contiguous share of global record indices of one host."""
  if not 0 <= process_index < process_count:
    raise ValueError(f'process_index {process_index} not in [0, {process_count})')
  lo = num_records * process_index // process_count
  hi = num_records * (process_index + 1) // process_count
  return lo, hi


def segments(index, lo, hi):
  """The per-file segments covering global records [lo, hi)."""
  out, offset = [], 0
  for path, count in zip(index.files, index.counts):
    a, b = max(lo, offset), min(hi, offset + count)
    if a < b:
      out.append(Segment(path, a - offset, b - a, a))
    offset += count
  return out


# ----------------------------------------------------------------- readers --
class DmvrSource:
  """TFRecord files of DMVR SequenceExamples: cfg.train_files for split
  'train', cfg.eval_files for any other split."""

  def __init__(self, cfg, split):
    patterns = cfg.train_files if split == 'train' else cfg.eval_files
    field = 'train_files' if split == 'train' else 'eval_files'
    if not patterns:
      raise ValueError(f'dataset.{field} is empty: point it at the {split!r} '
                       'TFRecords (a glob or a name like dir/x.tfrecord@16)')
    files = expand_patterns(patterns, cfg.data_dir)
    self.index = index_files(files, cfg.on_error)
    errors.count_truncated_files(self.index.truncated)  # once per file
    self.num_records = self.index.num_records
    self.description = f'{field}={patterns!r}'
    self.heads = records.label_heads(cfg.label_keys)
    self._frames_key = cfg.frames_key
    self._video_id_key = cfg.video_id_key
    self._cycle_length = max(1, int(cfg.cycle_length))

  def records(self, lo, hi, shuffle_seed=None):
    """(path, record index in file, global index, serialized, unread) for
    [lo, hi); `unread` is '' for a record read, else why it cannot be read.

    Files are read `cycle_length` at a time, interleaved record by record;
    `shuffle_seed` (a [2] int64 tensor) shuffles their order first. Each
    file is read on its own (`read_segment`): where its data turns out
    corrupt, its remaining records come with `unread` set and an empty
    record, and the other files are read on.
    """
    segs = segments(self.index, lo, hi)
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
    byte_of = lambda index: tf.gather(first_byte, index - lo)  # pylint: disable=unnecessary-lambda-assignment
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

  def parse(self, raw):
    return records.parse_record(raw, self._frames_key, self.heads,
                                self._video_id_key)


class TfdsSource:
  """A tensorflow-datasets video dataset, read with its frames still encoded:
  split cfg.tfds_train_split for 'train', else the split of that name."""

  def __init__(self, cfg, split):
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    if not cfg.tfds_name:
      raise ValueError("dataset.tfds_name must be set when dataset.name == 'tfds'")
    try:
      self._builder = tfds.builder(cfg.tfds_name, data_dir=cfg.data_dir or None)
    except Exception as e:  # pylint: disable=broad-except
      raise FileNotFoundError(
          f'TFDS dataset {cfg.tfds_name!r} not found in data_dir '
          f'{cfg.data_dir!r}: {e}') from e
    if not tf.io.gfile.exists(str(self._builder.data_path)):
      raise FileNotFoundError(
          f'TFDS dataset {cfg.tfds_name!r} is not prepared in data_dir '
          f'{cfg.data_dir!r} (looked for {self._builder.data_path}); vvt never '
          'downloads at run time: prepare it with tfds first')
    tfds_split = cfg.tfds_train_split if split == 'train' else split
    splits = self._builder.info.splits
    if tfds_split not in splits:
      raise ValueError(f'TFDS dataset {cfg.tfds_name!r} has no split '
                       f'{tfds_split!r}; it has {sorted(splits.keys())}')
    self._split = tfds_split
    self._tfds = tfds
    self.num_records = int(splits[tfds_split].num_examples)
    self.description = f'tfds {cfg.tfds_name}:{tfds_split}'
    self.heads = records.label_heads(cfg.tfds_label_keys)
    self._video_key = cfg.tfds_video_key
    self._name = f'tfds:{cfg.tfds_name}/{tfds_split}'

  def records(self, lo, hi, shuffle_seed=None):
    """('tfds:name/split', index, index, example, '') for examples [lo, hi)."""
    del shuffle_seed  # TFDS files are read in order; the shuffle buffer mixes.
    if lo >= hi:
      raise ValueError(f'{self._name}: empty host range [{lo}, {hi})')
    ds = self._builder.as_dataset(
        split=f'{self._split}[{lo}:{hi}]', shuffle_files=False,
        decoders={self._video_key: self._tfds.decode.SkipDecoding()})
    name = self._name
    return ds.enumerate(lo).map(
        lambda i, ex: (tf.constant(name), i, i, ex, tf.constant('')))

  def parse(self, raw):
    return records.parse_tfds_example(raw, self._video_key, self.heads)


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
  cannot be (`tfrecord.check_record_at`)."""
  def describe(p, b):
    why = tfrecord.check_record_at(p.decode(), int(b)) if b >= 0 else ''
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


def make_source(cfg, split):
  """The source of `split` ('train' or an eval split) for cfg.name."""
  if cfg.name == 'tfds':
    return TfdsSource(cfg, split)
  return DmvrSource(cfg, split)
