"""File patterns, sharded names, host ranges and TFRecord scanning."""
import os

import pytest

from vvt.data.reading import patterns
from vvt.data.reading import streams
from vvt.data.reading import tfrecord_framing
from vvt.data.reading import tfrecord_index
from vvt.data.writing import dmvr_records


def _touch_records(path, n):
  dmvr_records.write_records(path, [b'x' * (i + 1) for i in range(n)])


def test_sharded_names_globs_lists_and_data_dir(tmp_path):
  for name in patterns.shard_names(str(tmp_path / 'tr.tfrecord'), 3):
    _touch_records(name, 1)
  _touch_records(str(tmp_path / 'extra-b.rec'), 1)
  _touch_records(str(tmp_path / 'extra-a.rec'), 1)
  files = tfrecord_index.expand_patterns(f'{tmp_path}/tr.tfrecord@3, {tmp_path}/extra-*.rec')
  assert [os.path.basename(f) for f in files] == [
      'tr.tfrecord-00000-of-00003', 'tr.tfrecord-00001-of-00003',
      'tr.tfrecord-00002-of-00003', 'extra-a.rec', 'extra-b.rec']
  assert tfrecord_index.expand_patterns(['extra-a.rec'], data_dir=str(tmp_path)) == [
      str(tmp_path / 'extra-a.rec')]
  os.remove(tmp_path / 'tr.tfrecord-00001-of-00003')
  with pytest.raises(FileNotFoundError, match='1 of 3 shards .*00001-of-00003'):
    tfrecord_index.expand_patterns(f'{tmp_path}/tr.tfrecord@3')
  with pytest.raises(ValueError, match='no data files'):
    tfrecord_index.expand_patterns(' , ')


def test_host_ranges_partition_the_records():
  for n in (0, 1, 7, 100):
    for count in (1, 2, 3, 8):
      ranges = [streams.host_range(n, p, count) for p in range(count)]
      assert ranges[0][0] == 0 and ranges[-1][1] == n
      assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
      sizes = [b - a for a, b in ranges]
      assert max(sizes) - min(sizes) <= 1
  with pytest.raises(ValueError):
    streams.host_range(10, 2, 2)


def test_segments_cover_a_range_across_files():
  index = tfrecord_index.FileIndex(('a', 'b', 'c'), (3, 0, 4), ())
  segs = tfrecord_index.segments(index, 2, 6)
  assert segs == [tfrecord_index.Segment('a', 2, 1, 2), tfrecord_index.Segment('c', 0, 3, 3)]


def test_scan_counts_records_and_finds_truncation(tmp_path):
  path = str(tmp_path / 'f.tfrecord')
  _touch_records(path, 5)
  assert tfrecord_framing.scan_records(path) == tfrecord_framing.Scan(5, None)
  size = os.path.getsize(path)
  with open(path, 'r+b') as f:
    f.truncate(size - 2)
  scan = tfrecord_framing.scan_records(path)
  assert scan.num_records == 4 and 'declares 5 bytes' in scan.error
  with open(path, 'r+b') as f:
    f.truncate(size - 2 - 9 - 6)  # cut inside the 5th record's header
  scan = tfrecord_framing.scan_records(path)
  assert scan.num_records == 4 and 'header' in scan.error
  empty = str(tmp_path / 'empty.tfrecord')
  open(empty, 'wb').close()
  assert tfrecord_framing.scan_records(empty) == tfrecord_framing.Scan(0, None)
