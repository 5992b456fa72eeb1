"""File patterns, sharded names and the split of records between hosts.

A pattern is a glob (`dir/train-*.tfrecord`), a sharded name
(`dir/train.tfrecord@16` -> `dir/train.tfrecord-00000-of-00016` ...), an
exact path, or a comma-separated list / sequence of those. Relative patterns
are taken relative to `data_dir` when it is set.

Records are numbered globally in file order (files in the order the patterns
list them, globs sorted) and a host reads a contiguous range of those numbers,
so every record has one global index and the hosts' shares differ by at most
one record.
"""
import dataclasses
import os
import re

import tensorflow as tf

from vvt.data import tfrecord

_SHARDED = re.compile(r'^(?P<base>.+)@(?P<n>\d+)$')


def shard_names(base, num_shards):
  """Names of `base@num_shards`: base-00000-of-0000N, ..."""
  return [f'{base}-{i:05d}-of-{num_shards:05d}' for i in range(num_shards)]


def _split_patterns(patterns):
  if isinstance(patterns, str):
    patterns = [p.strip() for p in patterns.split(',')]
  return [p for p in patterns if p]


def expand_patterns(patterns, data_dir=''):
  """Resolves patterns to an ordered list of existing files.

  Raises FileNotFoundError naming the pattern or the missing file.
  """
  parts = _split_patterns(patterns)
  if not parts:
    raise ValueError('no data files configured: set dataset.train_files / '
                     'dataset.eval_files (a glob or a name like dir/x.tfrecord@16)')
  files = []
  for pattern in parts:
    if data_dir and not os.path.isabs(pattern) and '://' not in pattern:
      pattern = os.path.join(data_dir, pattern)
    m = _SHARDED.match(pattern)
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

  @property
  def num_records(self):
    return sum(self.counts)


def index_files(files, on_error='raise'):
  """Counts the records of each file without reading their contents.

  A truncated file raises `tfrecord.TruncatedFileError` (naming the file and the
  record) under on_error='raise'; under 'skip' its complete records are kept
  and the file is listed in `truncated`.
  """
  counts, truncated = [], []
  for path in files:
    scan = tfrecord.scan_records(path)
    if scan.error is not None:
      if on_error != 'skip':
        raise tfrecord.TruncatedFileError(
            f'{path}: record {scan.num_records}: {scan.error} (the file is '
            'truncated or corrupt; re-create it, or set dataset.on_error='
            "'skip' to read only its complete records)")
      truncated.append((path, scan.error))
    counts.append(scan.num_records)
  return FileIndex(tuple(files), tuple(counts), tuple(truncated))


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
