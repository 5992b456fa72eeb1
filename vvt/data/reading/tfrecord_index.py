"""TFRecord files as one numbered sequence of records: patterns -> files -> record counts -> per-file segments.

Records are numbered globally in file order (files in the order the patterns list them, globs sorted); a host's
range of global indices [lo, hi) maps onto per-file `Segment`s. Counting reads only the record headers
(`tfrecord_framing.scan_records`); a file whose framing breaks is either refused (`errors.TruncatedFileError`)
or, under on_error='skip', indexed up to its damage (`FileIndex.damaged`). Local files are found and counted
with Python's own I/O, so `count_records` imports no TensorFlow; a URL (`gs://...`) goes through `tf.io.gfile`.
"""
import dataclasses
import glob
import os

from vvt.data.reading import patterns
from vvt.data.reading import tfrecord_framing


def _exists(path):
  if patterns.is_remote(path):
    import tensorflow as tf
    return tf.io.gfile.exists(path)
  return os.path.exists(path)


def _glob(pattern):
  """The files matching `pattern`, sorted (hidden names included, as tf.io.gfile.glob matches them)."""
  if patterns.is_remote(pattern):
    import tensorflow as tf
    return sorted(tf.io.gfile.glob(pattern))
  return sorted(glob.glob(pattern, include_hidden=True))


def expand_patterns(file_patterns, data_dir=''):
  """Resolves `file_patterns` (a pattern, a comma-separated list or a sequence) to an ordered list of existing
  files; relative ones are taken from `data_dir` (`patterns.resolve`).

  Raises FileNotFoundError naming the pattern or the missing file.
  """
  parts = patterns.split_patterns(file_patterns)
  if not parts:
    raise ValueError('no data files configured: set dataset.train_files / '
                     'dataset.eval_files (a glob or a name like dir/x.tfrecord@16)')
  files = []
  for pattern in parts:
    pattern = patterns.resolve(pattern, data_dir)
    m = patterns.SHARDED.match(pattern)
    if m:
      names = patterns.shard_names(m.group('base'), int(m.group('n')))
      missing = [n for n in names if not _exists(n)]
      if missing:
        raise FileNotFoundError(
            f'{len(missing)} of {len(names)} shards of {pattern!r} are missing, '
            f'first: {missing[0]}')
      files.extend(names)
    elif any(ch in pattern for ch in '*?['):
      found = _glob(pattern)
      if not found:
        raise FileNotFoundError(f'no file matches the pattern {pattern!r}')
      files.extend(found)
    else:
      if not _exists(pattern):
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
    for path, count in zip(self.files, self.counts, strict=True):
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
    scan = tfrecord_framing.scan_records(path)
    if scan.error is not None:
      if on_error != 'skip':
        from vvt.data.reading import errors  # TensorFlow's error types: imported only to refuse
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


def count_records(file_patterns, data_dir='', on_error='raise'):
  """The number of records in the files of `file_patterns` (`expand_patterns`), from their record headers; a
  damaged file raises `errors.TruncatedFileError` (under on_error='skip': its complete records count, as
  `index_files`). Imports no TensorFlow for local files."""
  return index_files(expand_patterns(file_patterns, data_dir), on_error).num_records


def segments(index, lo, hi):
  """The per-file segments covering global records [lo, hi)."""
  out, offset = [], 0
  for path, count in zip(index.files, index.counts, strict=True):
    a, b = max(lo, offset), min(hi, offset + count)
    if a < b:
      out.append(Segment(path, a - offset, b - a, a))
    offset += count
  return out
