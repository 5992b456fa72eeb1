"""Records -> examples: the one construction path of both pipelines.

    read (`reading.streams`) -> parse (the source) -> check (the source's frame
    reader, `reading.labels`) -> sample -> decode -> augment | views
    (`transforms.clips`) -> bad records raised or counted (`reading.errors`)

`build(source, lo, hi, classes, mode, on_error)` runs it for the host's
records [lo, hi) of any `vvt.data.reading.source.Source`; a `Mode`
(`train_mode(spec, ...)` or `eval_mode(spec)`) says what training and evaluation
do differently. An example is a dict:

* training: {'inputs': uint8 (T, S, S, 3), 'label': int32 (), 'mask': float32
  () 1}, one per record;
* evaluation: {'inputs': uint8 (V, T, S, S, 3), 'label': int32 (V,),
  'video_index': int32 (V,) (the global record index), 'view_index': int32
  (V,), 'mask': float32 (V,)}, all the views of one video (V varies per video
  with num_test_clips='all': `view_counts` gives each without decoding); under
  on_error='skip' a bad video keeps its rows with mask 0 (and zero inputs or
  inputs of stand-in frames; one row where the record cannot be parsed), so
  evaluators can leave it out by index;

with one 'label/<head>' per head instead of 'label' for multi-head data, and 'caption' tf.string (K,) (evaluation:
(V, K)) of a source reading `dataset.captions` = K captions per video (padded with '').
"""
import dataclasses
import functools
import os
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from vvt.data.reading import errors
from vvt.data.reading import labels as labels_lib
from vvt.data.reading import streams
from vvt.data.transforms import clips
from vvt.models import frame_size


@dataclasses.dataclass(frozen=True)
class Mode:
  """What training and evaluation do differently with the host's records.

  records: fn(source, lo, hi) -> dataset of (position, *Row), see
    `vvt.data.reading.streams`.
  clip: fn(reader) -> fn(frames, seed [2] int64, ratio) -> uint8 inputs of
    `shape`, for the source's `FrameReader` and a record's frames as it takes
    them (`ratio`: see `rate`).
  shape: (T, S, S, 3) of a training clip, (V, T, S, S, 3) of a video's views
    (V = 1 under VARIES: the zero rows of a record that cannot be parsed).
  views: None (one clip per record: scalar labels), V (fields per view, and
    'video_index', 'view_index') or VARIES (as many as each video needs).
  seed: the data seed; the record at position g is seeded by (seed, g).
  parallelism: most records decoded at once.
  labels: None, or fn(labels dict, seed [2]) -> labels of the clip (the
    label-aware flip, `vvt.data.transforms.label_flip`).
  rate: None, or fn(parsed record) -> float scalar: the video's stored frame
    rate over dataset.fps (`vvt.data.reading.frame_rate.ratio_fn`), with which
    clips map their frames onto the stored ones (`transforms.sampling`).
  count: evaluation: fn(reader) -> fn(frames, ratio) -> int32 views of a
    video, without decoding (`transforms.clips.num_views`).
  """
  records: Callable
  clip: Callable
  shape: tuple
  views: Optional[int]
  seed: int
  parallelism: int
  labels: Optional[Callable] = None
  rate: Optional[Callable] = None
  count: Optional[Callable] = None


VARIES = -1  # Mode.views of whole-video evaluation: each video has its own number of views


def _parallelism(limit):
  return max(2, min(limit, os.cpu_count() or 2))


def train_mode(spec, seed, start=0):
  """Training: the infinite stream from position `start`, one augmented
  random clip per record (per copy of a record with
  `dataset.repeated_augmentation` > 1)."""
  size = frame_size.parse(spec.image_size)
  return Mode(
      records=functools.partial(
          streams.train_records, seed=seed, shuffle_buffer=spec.shuffle_buffer,
          cache=spec.cache, start=start,
          repeats=int(spec.repeated_augmentation)),
      clip=functools.partial(clips.train_clip, spec),
      shape=(int(spec.num_frames), *size, 3),
      views=None, seed=seed, parallelism=_parallelism(16))


def eval_mode(spec):
  """Evaluation: the host's records once, all the views of each video."""
  size = frame_size.parse(spec.image_size)
  tiled = clips.tiles_video(spec)
  views = VARIES if tiled else int(spec.num_test_clips) * int(spec.num_spatial_crops)
  # A video's views are one element (V x T x H x W x 3 bytes): keep few in
  # flight.
  return Mode(records=streams.eval_records, clip=functools.partial(clips.eval_views, spec),
              shape=(1 if tiled else views, int(spec.num_frames), *size, 3),
              views=views, seed=0, parallelism=_parallelism(4),
              count=functools.partial(clips.num_views, spec))


def _example(mode, inputs, labels, index):
  """The example dict of a record's `inputs` and int32 scalar `labels`."""
  out = {'inputs': inputs}
  if mode.views is None:
    out.update(labels, mask=tf.constant(1.0, tf.float32))
    return out
  views = tf.shape(inputs)[0]
  out.update({field: tf.fill([views], label) if label.shape.rank == 0 else
              tf.tile(label[None], [views, 1]) for field, label in labels.items()})
  out.update(video_index=tf.fill([views], tf.cast(index, tf.int32)),
             view_index=tf.range(views, dtype=tf.int32),
             mask=tf.ones([views], tf.float32))
  return out


def _per_view(mode, example, captions):
  """A record's captions (K,) tf.string as its example carries them: (K,) in training, (V, K) in evaluation."""
  if mode.views is None:
    return captions
  return tf.tile(captions[None], [tf.shape(example['mask'])[0], 1])


def _ratio(mode, parsed):
  return None if mode.rate is None else mode.rate(parsed)


# The datasets are built with AutoGraph off (`tf.autograph.experimental.do_not_convert` turns it off for every
# function traced inside): the transforms branch on tensors with `tf.where` / `tf.cond`, never Python's `if`, so
# AutoGraph would give the same graph, after seconds converting them. Python control flow on a tensor fails to
# trace without it: a loud error, not other values.
@tf.autograph.experimental.do_not_convert
def build(source, lo, hi, classes, mode, on_error, counters=()):
  """Dataset of the examples of records [lo, hi) of `source`.

  `classes`: dict label field -> number of classes (`labels.num_classes`).
  Bad records raise `errors.DataError` when iterated (on_error='raise') or
  are counted and dropped ('skip'; evaluation keeps their rows with mask 0), in the process's counts and in
  `counters` (`errors.new_counters()`: the pipeline's own).
  """
  heads = source.heads
  make_inputs = mode.clip(source.frames)

  def process(position, src, rec, index, raw, unread):
    parsed = source.parse(raw)
    frames, code, detail = source.frames.inspect(parsed['frames'])
    label_ok, label_detail = labels_lib.check(parsed, classes, heads)
    several, several_detail = labels_lib.several_labels(parsed, heads)
    several &= code == errors.OK
    code, detail = tf.where(several, errors.SEVERAL_LABELS, code), tf.where(several, several_detail, detail)
    bad_label = (code == errors.OK) & ~label_ok
    code = tf.where(bad_label, errors.BAD_LABEL, code)
    detail = tf.where(bad_label, label_detail, detail)
    code = tf.where(unread == '', code, errors.UNREADABLE)
    detail = tf.where(unread == '', detail, unread)
    seed = tf.stack([tf.constant(mode.seed, tf.int64), position])
    inputs = make_inputs(frames, seed, _ratio(mode, parsed))
    labels = labels_lib.labels(parsed, heads, classes)
    if mode.labels is not None:
      labels = mode.labels(labels, seed)
    out = _example(mode, inputs, labels, index)
    if 'captions' in parsed:
      out['caption'] = _per_view(mode, out, parsed['captions'])
    out.update(code=code, source=src, record=rec, detail=detail)
    return out

  def fallback(position, src, rec, index, raw, unread):
    del position, raw, unread
    zeros = labels_lib.zeros(heads, classes, getattr(source, 'multi_label', False))
    out = _example(mode, tf.zeros(mode.shape, tf.uint8), zeros, index)
    if getattr(source, 'num_captions', 0):
      out['caption'] = _per_view(mode, out, tf.fill([source.num_captions], ''))
    out.update(code=tf.constant(errors.CORRUPT, tf.int32), source=src,
               record=rec, detail=tf.constant(''))
    return out

  ds = errors.isolate(mode.records(source, lo, hi), process, fallback,
                      mode.parallelism)
  return errors.raise_or_count(ds, on_error, keep_skipped=mode.views is not None, counters=counters)


@tf.autograph.experimental.do_not_convert  # as `build`
def view_counts(source, lo, hi, mode) -> np.ndarray:
  """int64 (hi - lo,): the number of views `build` gives each record of [lo, hi) (in global order), from its
  frame count without decoding (one pass over the records); 1 for a record that cannot be parsed. A record found
  bad only when decoded gets fewer rows than counted here (one, masked), never more."""
  count = mode.count(source.frames)

  def one(position, src, rec, index, raw, unread):
    del position, src, rec, unread
    parsed = source.parse(raw)
    frames, _, _ = source.frames.inspect(parsed['frames'])
    return index, tf.cast(count(frames, _ratio(mode, parsed)), tf.int64)

  def fallback(position, src, rec, index, raw, unread):
    del position, src, rec, raw, unread
    return index, tf.constant(1, tf.int64)

  out = np.ones((hi - lo,), np.int64)
  if hi <= lo:
    return out
  ds = errors.isolate(mode.records(source, lo, hi), one, fallback, mode.parallelism)
  for index, views in ds.as_numpy_iterator():
    out[int(index) - lo] = views
  return out
