"""The framing of a TFRecord file, walked without reading its payloads: count the records, find damage.

A record is `uint64 length, uint32 masked crc32c(length), data[length], uint32 masked crc32c(data)`
(little-endian). `scan_records` walks a file's record headers (verifying their length checksums) to count its
records and find truncation or damage; `check_record_at` says why the record at a byte cannot be read. Local
files are read with Python's own I/O (no TensorFlow imported); a URL (`gs://...`) through `tf.io.gfile`.
"""
import dataclasses
import os
import struct

import numpy as np

from vvt.data.reading import patterns

_HEADER, _FOOTER = 12, 4


def _crc32c_table():
  table = []
  for n in range(256):
    c = n
    for _ in range(8):
      c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
  return tuple(table)


_CRC_TABLE = _crc32c_table()


def masked_crc32c(data):
  """The masked CRC-32C (Castagnoli) of `data` that TFRecord framing stores."""
  crc = 0xFFFFFFFF
  for b in bytes(data):
    crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
  crc ^= 0xFFFFFFFF
  return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _header_error(header, pos, size):
  """Why the 12-byte record header at byte `pos` of a `size`-byte file is
  unusable, or None; and the record's end."""
  if len(header) < _HEADER:
    return f'truncated record header at byte {pos}', None
  (length,) = struct.unpack('<Q', header[:8])
  (crc,) = struct.unpack('<I', header[8:])
  if masked_crc32c(header[:8]) != crc:
    return (f'the length field of the record at byte {pos} does not match its '
            'checksum (corrupt header)'), None
  end = pos + _HEADER + length + _FOOTER
  if end > size:
    return (f'record at byte {pos} declares {length} bytes but the file '
            f'ends at byte {size}'), None
  return None, end


@dataclasses.dataclass(frozen=True)
class Scan:
  """A TFRecord file's framing, from its record headers.

  num_records: whole records before any damage; offsets: their start bytes.
  error: why reading stops early (None when the file is whole), at byte
  `error_offset`; lost: records after that byte that cannot be read (the
  damaged one, then the well-framed ones found past it), at least 1.
  """
  num_records: int
  error: str = None
  offsets: tuple = dataclasses.field(default=(), compare=False, repr=False)
  error_offset: int = None
  lost: int = 0


_SCAN_CACHE = {}


def _open(path):
  if patterns.is_remote(path):
    import tensorflow as tf
    return tf.io.gfile.GFile(path, 'rb')
  return open(path, 'rb')


def _size_and_mtime(path):
  """(bytes, mtime in ns) of a local file (os.stat) or a URL (tf.io.gfile.stat)."""
  if patterns.is_remote(path):
    import tensorflow as tf
    stat = tf.io.gfile.stat(path)
    return stat.length, stat.mtime_nsec
  stat = os.stat(path)
  return stat.st_size, stat.st_mtime_ns


def _read_errors(path):
  """The exceptions reading `path` may raise: OSError, and TensorFlow's for a URL."""
  if patterns.is_remote(path):
    import tensorflow as tf
    return (OSError, tf.errors.OpError)
  return (OSError,)


def _walk(f, pos, size):
  """(offsets of the whole records from byte `pos`, error, error byte)."""
  offsets = []
  while pos < size:
    f.seek(pos)
    error, end = _header_error(f.read(_HEADER), pos, size)
    if error:
      return offsets, error, pos
    offsets.append(pos)
    pos = end
  return offsets, None, None


def _next_header(f, pos, size, chunk=1 << 22):
  """Byte of the first valid record header after `pos`, or None: a length
  that fits the file whose checksum matches (2^-32 odds by chance)."""
  start = pos + 1
  while start + _HEADER <= size:
    f.seek(start)
    buf = np.frombuffer(f.read(chunk + _HEADER - 1), np.uint8)
    if len(buf) < _HEADER:
      return None
    # a length's top 3 bytes are zero below 2^40 bytes: cheap first filter
    windows = len(buf) - _HEADER + 1
    zero = (buf[5:5 + windows] == 0) & (buf[6:6 + windows] == 0) & (buf[7:7 + windows] == 0)
    for k in np.flatnonzero(zero).tolist():
      error, _ = _header_error(bytes(buf[k:k + _HEADER]), start + k, size)
      if error is None:
        return start + k
    start += windows
  return None


def _count_lost(f, pos, size):
  """Records that cannot be read from the damaged record at byte `pos` on:
  1, plus the well-framed records found past the damage."""
  lost, at = 1, _next_header(f, pos, size)
  while at is not None:
    offsets, error, bad = _walk(f, at, size)
    lost += len(offsets)
    if error is None:
      break
    lost += 1
    at = _next_header(f, bad, size)
  return lost


def scan_records(path):
  """Counts the records of a TFRecord file by walking its record headers.

  Only the 12-byte headers are read, and their length checksums verified;
  past a damaged header the rest of the file is searched for the records
  that cannot be read (`Scan.lost`). Results are cached per (path, size,
  mtime).
  """
  size, mtime = _size_and_mtime(path)
  key = (path, size, mtime)
  if key in _SCAN_CACHE:
    return _SCAN_CACHE[key]
  with _open(path) as f:
    offsets, error, bad = _walk(f, 0, size)
    lost = _count_lost(f, bad, size) if error else 0
  result = Scan(len(offsets), error, tuple(offsets), bad, lost)
  _SCAN_CACHE[key] = result
  return result


def check_record_at(path, offset):
  """Why the record at byte `offset` of `path` cannot be read ('' if it can):
  its header, length or data checksum, or the file itself."""
  try:
    size, _ = _size_and_mtime(path)
    with _open(path) as f:
      f.seek(offset)
      header = f.read(_HEADER)
      error, end = _header_error(header, offset, size)
      if error:
        return error
      data = f.read(end - offset - _HEADER - _FOOTER)
      (crc,) = struct.unpack('<I', f.read(_FOOTER))
  except _read_errors(path) as e:
    return f'the file cannot be read ({type(e).__name__}: {e})'
  if masked_crc32c(data) != crc:
    return (f'the data of the record at byte {offset} do not match their '
            'checksum (corrupt bytes)')
  return ''
