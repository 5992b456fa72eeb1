"""The source contract: what every reader of videos provides to the input pipelines.

A source is made by the registry (`vvt.data.reading.registry.make_source(spec, split)`) from the dataset section
and one split ('train': `train_files`, any other split: `eval_files`, or a TFDS split). Its records are numbered
0 .. num_records - 1 in one global order; host p of P reads a contiguous range of them
(`vvt.data.reading.streams.host_range`), so every record has one global index. What it provides:

* `num_records`, `description` (names the split's data in messages), `files` (the files the records are in:
  messages and the manifests beside them; may be empty), `damaged` (records it knows exist but cannot number:
  `(file, first record, byte, why, count)` for a TFRecord file past its damage; usually empty);
* `heads`: batch label field -> the record's label key ('label', or 'label/<head>' per head), and
  `class_names`: the class names in label order that the data carries, or None;
* `records(lo, hi, shuffle_seed=None)`: a `tf.data.Dataset` of `Row`s for records [lo, hi), every one once, in
  a fixed order (global order, or the source's: DMVR interleaves its files), or with a [2] int64 `shuffle_seed`
  in an order drawn from it (the same seed, the same order);
* `record(index)`: random access, the `Row` of one record as numpy values: the same row `records` yields for
  that index; `locate(index)`: its (source, record) without reading it (messages, skip reports);
* `parse(raw)`: a row's raw record -> `Parsed` (tf ops, run inside tf.data);
* `frames`: its `FrameReader`, which turns a parsed record's frames into pixels.

A `Row` is (source, record, index, raw, unread): `source` names the file (or list) the record is in, `record` is
its number there, `index` its global index, `raw` the raw record (a string, or any nest of tensors the source's
`parse` takes) and `unread` '' for a record read, else why it could not be (its raw record is then empty). The
streams put the position in the stream in front (`vvt.data.reading.streams`): (position, *Row), the 6-tuple of
the pipelines. Bad records never raise in a source: they get an error code downstream (`errors`).
"""
from typing import Any, NamedTuple, Optional, Protocol, runtime_checkable


class Row(NamedTuple):
  """One record as a source yields it: in tf.data (scalar tensors, `raw` any nest) or from `record(i)` (numpy)."""
  source: Any   # string: the file (or list) the record is in
  record: Any   # int64: its number in that file
  index: Any    # int64: its global index
  raw: Any      # the raw record: a serialized string or a nest of tensors
  unread: Any   # string: '' when read, else why not


class Parsed(dict):
  """What `Source.parse` returns (a dict, built in tf.data): 'frames' (what the source's `FrameReader` takes),
  'labels' ({label field: int64 scalar}, -1 where missing) and 'video_id' (string, '' when unknown); optionally
  'label_counts' ({label field: int32 scalar}: how many values the record's label key holds, so that a record of
  several labels read by a single-label run is named as such, `labels.several_labels`)."""


@runtime_checkable
class FrameReader(Protocol):
  """The frames of a parsed record -> pixels, as tf ops: encoded images (`image_frames.ImageFrames`) or a video
  file decoded with PyAV (`video_folder.VideoFiles`)."""

  def inspect(self, frames) -> tuple:
    """(frames to count and decode, int32 error code, string detail): `errors.OK`, or why the record's frames are
    bad (no frames, a frame cut short, frames of different sizes, a video that cannot be opened), with a stand-in
    that still decodes in place of bad frames (the record is then raised or dropped by its code)."""

  def count(self, frames):
    """int32 scalar: the number of frames (of what `inspect` returns)."""

  def decode(self, frames, indices, window_of=None):
    """uint8 (len(indices), h, w, 3): the frames at the static-length int32 `indices`; `window_of(height, width)`
    -> [y, x, h, w] int32 cuts every frame to that window of its full size (decoding only it where the format
    allows)."""


@runtime_checkable
class Source(Protocol):
  """A reader of the records of one split (see the module doc)."""
  description: str
  num_records: int
  heads: dict
  class_names: Optional[tuple]
  files: tuple
  damaged: tuple
  frames: FrameReader

  def records(self, lo: int, hi: int, shuffle_seed=None):
    """tf.data.Dataset of `Row`s of records [lo, hi)."""

  def record(self, index: int) -> Row:
    """The `Row` of record `index` (numpy values): what `records` yields for it."""

  def locate(self, index: int) -> tuple:
    """(source, record) of record `index`: the first two fields of its `Row`, without reading it."""

  def parse(self, raw) -> Parsed:
    """A raw record -> `Parsed` (tf ops)."""
