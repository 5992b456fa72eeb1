"""Frames stored as encoded images (JPEG, PNG), one string each: the frames of DMVR records and TFDS examples.

`ImageFrames` is their `FrameReader` (`vvt.data.reading.source`): `inspect` checks a record's (N,) string frames
from their headers and ends only (no frames, a JPEG cut short, frames of different sizes; about 0.1 ms for 300
JPEG frames), `count` is N, and `decode` gathers the sampled frames and decodes only them, and of a JPEG only the
crop window (`decode_and_crop_jpeg`). Frames of different sizes, or undecodable data, raise in `decode` (the
pipeline turns that into a named error or a counted skip).
"""
import numpy as np
import tensorflow as tf

from vvt.data.reading import errors


def frame_shape(encoded):
  """(height, width) int32 of one encoded frame (JPEG: header only)."""
  return tf.cond(
      tf.io.is_jpeg(encoded),
      lambda: tf.io.extract_jpeg_shape(encoded)[:2],
      lambda: tf.shape(tf.io.decode_image(
          encoded, channels=3, expand_animations=False))[:2])


def _decode_one(encoded, window):
  if window is None:
    return tf.io.decode_image(encoded, channels=3, expand_animations=False)

  def jpeg():
    return tf.io.decode_and_crop_jpeg(encoded, window, channels=3)

  def other():
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    return image[window[0]:window[0] + window[2], window[1]:window[1] + window[3]]
  return tf.cond(tf.io.is_jpeg(encoded), jpeg, other)


def decode_frames(encoded, num, window=None):
  """Decodes `num` (static) encoded frames -> uint8 (num, h, w, 3).

  `window` = [y, x, height, width] decodes only that window. Frames of
  different sizes, or undecodable data, raise (the pipeline turns that into a
  named error or a counted skip).
  """
  frames = [_decode_one(encoded[i], window) for i in range(num)]
  return tf.stack(frames)


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
  frames), `frame_shape` for the rest (other formats, long
  headers). An unreadable header raises (the record is corrupt)."""
  heads = tf.io.decode_raw(tf.strings.substr(frames, 0, _HEADER_BYTES),
                           tf.uint8, fixed_length=_HEADER_BYTES)
  sizes = tf.numpy_function(header_sizes, [heads], tf.int32, stateful=False)
  sizes = tf.ensure_shape(sizes, [None, 2])
  unknown = tf.where(sizes[:, 0] < 0)[:, 0]
  rest = tf.map_fn(frame_shape, tf.gather(frames, unknown),
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


def _dummy_frames():
  """(1,) string: one 8x8 black JPEG, decodable stand-in frames."""
  return tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8))[None]


class ImageFrames:
  """The `FrameReader` of (N,) encoded image strings."""

  def inspect(self, frames):
    """(frames, code, detail): `errors.NO_FRAMES` when there are none, else `errors.TRUNCATED_FRAME` when a JPEG
    frame is cut short (detail: the first), else `errors.FRAME_SIZES` when the frames differ in size (every
    frame's header is read, not only the sampled ones), else `errors.OK`; a dummy frame stands in for bad frames.
    A frame whose header cannot be read raises (a corrupt record)."""
    n = tf.size(frames)
    whole, end_detail = check_frame_ends(frames)
    same_size, size_detail = tf.cond(
        n > 0, lambda: check_frame_sizes(frames), lambda: (tf.constant(True), tf.constant('')))
    code = tf.where(n == 0, errors.NO_FRAMES,
                    tf.where(~whole, errors.TRUNCATED_FRAME,
                             tf.where(~same_size, errors.FRAME_SIZES, errors.OK)))
    detail = tf.where(code == errors.FRAME_SIZES, size_detail,
                      tf.where(code == errors.TRUNCATED_FRAME, end_detail, ''))
    usable = tf.cond(code == errors.OK, lambda: frames, _dummy_frames)
    return usable, tf.cast(code, tf.int32), detail

  def count(self, frames):
    return tf.size(frames)

  def decode(self, frames, indices, window_of=None):
    """uint8 (len(indices), h, w, 3): the frames at `indices`, of a JPEG only the window `window_of(height,
    width)` of the first frame's size."""
    encoded = tf.gather(frames, indices)
    window = None
    if window_of is not None:
      h, w = tf.unstack(frame_shape(encoded[0]))
      window = window_of(h, w)
    return decode_frames(encoded, indices.shape[0], window)
