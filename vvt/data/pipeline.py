"""Training and evaluation input pipelines: tf.data in, numpy batches out.

    it = make_train_iterator(spec, global_batch_size=B, seed=0, start_step=0)
    batch = next(it)  # {'inputs': u8 (b, T, H, W, 3), 'label': i32 (b,), 'mask': f32 (b,)}

    it = make_eval_iterator(spec, split='test', global_batch_size=B)
    for batch in it: ...  # + 'video_index', 'view_index'; mask 0 = padding
                          # (video_index -1) or a skipped bad video (its index)
    it.view_counts        # views of each of the host's videos
    it.skip_counts()      # what this iterator skipped under on_error='skip', by reason

With `num_test_clips='all'` each video gives as many non-overlapping clips as
cover it (`transforms.sampling.tile_indices`), so views differ per video: the
iterator counts them first (one pass over the host's records, no decoding),
and the hosts yield the batches of the one with most views.

`b = B // process_count` is the per-host batch. Multi-head datasets (a dict
`label_keys`) give one 'label/<head>' per head instead of 'label'.
'inputs' are uint8 pixels, augmented; `vvt.data.transforms.normalization.normalize`
turns them into the model's input on the device (the train and eval steps
do).

Training is an infinite stream, deterministic given (spec.seed, seed): element
g of the stream is record (g mod n) of epoch (g div n), where each epoch reads
the host's files in an order shuffled by (seed, epoch) through a shuffle buffer
seeded by (seed, epoch), and its augmentation is seeded by (seed, g). Resuming
at `start_step=k` starts at epoch (k*b div n) and skips the first (k*b mod n)
records of that epoch before decoding, so it yields exactly batch k onwards.
Each epoch's order is the source's (`records(lo, hi, shuffle_seed)`): TFRecord
files in a shuffled order, the rows of a video list permuted.
With `repeated_augmentation` = N > 1, each record of that stream is taken N
times in a row, each copy augmented on its own (seeded by (seed, g*N + r)):
a batch of b holds b/N videos, N independently augmented clips of each, with
the same label; the stream advances b/N records per batch, so resuming at
step k starts at record position k*b div N (`reading.streams.train_records`).

Bad records (no frames, label out of range or missing, unparsable record or
undecodable frame, frames of different sizes, a JPEG frame cut short, the
records of a TFRecord file past corrupt data) raise `DataError` naming the
file and record under `on_error='raise'`; under 'skip' they are counted (see
`error_counts()`, and `errors.skipped_records()` by file and record) and
dropped from training, and in evaluation their views come with mask 0 and the
video's index (`skipped_videos(batch)`), so an evaluator leaves those videos
out and reports them (`vvt.data.reading.skips`). Each file is read on its own: damage
in one never stops the others. After a data error the iterator is closed (its
tf.data threads stopped) before the error is raised.

Records come from the source `dataset.name` names (`reading.registry`; the
contract: `reading.source.Source`). This module batches (its DataSpec checked by the config layer);
the rest is in `reading.streams` (hosts, order, seeds), `examples` (the
construction path both pipelines share), `transforms.clips` and
`reading.errors` (`error_counts()`, `DataError`).
"""
import atexit
import dataclasses
import gc
import math
import weakref

import numpy as np
import tensorflow as tf

from vvt.data import examples
from vvt.data.reading import errors
from vvt.data.reading import frame_rate
from vvt.data.reading import labels
from vvt.data.reading import registry
from vvt.data.reading import skips
from vvt.data.reading import streams
from vvt.data.spec import DataSpec
from vvt.data.transforms import label_flip
from vvt.models import frame_size

try:  # tf.data runs on the host CPU; never let TF grab an accelerator.
  tf.config.set_visible_devices([], 'GPU')
except (RuntimeError, ValueError):
  pass


# ------------------------------------------------------------------ config --
def _process(process_index, process_count):
  if process_index is None or process_count is None:
    import jax
    process_index = jax.process_index() if process_index is None else process_index
    process_count = jax.process_count() if process_count is None else process_count
  return int(process_index), int(process_count)


def _local_batch(global_batch_size, process_count):
  if global_batch_size < 1 or global_batch_size % process_count:
    raise ValueError(f'global_batch_size {global_batch_size} must be a positive '
                     f'multiple of the process count {process_count}')
  return global_batch_size // process_count


def _source(spec, split):
  """The source of `split`; `spec` is a run's DataSpec (its fields checked by the config layer,
  `vvt.config.validation`, before it was resolved). num_classes unset (0: a pretraining task, whose config check
  allows it): the source reads no labels."""
  if not isinstance(spec, DataSpec):
    raise TypeError(f'the data pipeline takes a DataSpec (vvt.data.spec.DataSpec.of a validated dataset section), '
                    f'not {type(spec).__name__}')
  source = registry.make_source(spec, split)
  if not spec.num_classes:  # a run that reads no labels (pretraining): the records' labels, if any, are not read
    source.heads = {}
  return source


def num_videos(spec, split):
  """Number of videos (records) of `split` ('train' or an eval split)."""
  return _source(spec, split).num_records


# ---------------------------------------------------------------- batches --
def _options(ds):
  opts = tf.data.Options()
  opts.deterministic = True
  opts.experimental_optimization.map_parallelization = True
  return ds.with_options(opts)


class DataIterator:
  """Numpy batches from a tf.data pipeline, with data errors made readable.

  On a data error the tf.data iterator is closed before the `DataError` is
  raised (its threads stopped while the interpreter is whole), so a process
  that dies of the error exits promptly; `close()` does the same on purpose,
  and live iterators are closed at interpreter exit.
  """

  def __init__(self, ds, description, num_batches=None, view_counts=None, counters=(), damaged=()):
    self._ds = ds
    self._counters = counters  # this pipeline's own skip counts (errors.new_counters)
    self._damaged = damaged    # the source's records past damage in its files (never indexed)
    self._it = iter(ds.as_numpy_iterator())
    self._description = description
    self.num_batches = num_batches
    self.view_counts = view_counts  # evaluation: views of each of the host's videos
    _LIVE.add(self)

  def __iter__(self):
    return self

  def __len__(self):
    if self.num_batches is None:
      raise TypeError('the training iterator is infinite')
    return self.num_batches

  def __next__(self):
    if self._it is None:
      raise StopIteration
    error = None
    try:
      return next(self._it)
    except errors.TF_READ_ERRORS as e:
      error = errors.as_data_error(e, self._description)
    # Out of the except block: TF's exception (and its frames holding the
    # iterator) is gone, so closing really releases the pipeline.
    self.close()
    raise error

  def close(self):
    """Stops the pipeline's threads and frees it; later `next` ends."""
    self._it = None
    self._ds = None
    _LIVE.discard(self)

  def skip_counts(self) -> dict:
    """What this iterator's pipeline skipped under on_error='skip' so far, by reason: {'no_frames',
    'bad_label', 'corrupt', 'frame_sizes', 'unreadable_tfrecord', 'truncated_frame', 'unreadable_video',
    'partial_video', 'several_labels': records dropped (counted when tf.data processes them, up to a few
    batches ahead of what was consumed), 'truncated_files': files of its source read up to their damage}.
    All zero under on_error='raise'."""
    counts = errors.read_counters(self._counters) if self._counters else {n: 0 for n in errors.ERROR_NAMES[1:]}
    counts['truncated_files'] = len({entry[0] for entry in self._damaged}) if self._counters else 0
    return counts

  @staticmethod
  def new_skips_line(prefix: str = '[train]'):
    """One line naming the records newly skipped under on_error='skip' since the last call, by file (None when
    there are none; `vvt.data.reading.skips.new_skips_line`)."""
    return skips.new_skips_line(prefix)


_LIVE = weakref.WeakSet()


@atexit.register
def _close_live_iterators():
  """Closes every live iterator before the interpreter tears down: tf.data
  threads still inside a numpy_function at finalization hang or abort it."""
  for it in list(_LIVE):
    it.close()
  gc.collect()


# ---------------------------------------------------------------- training --
def make_train_iterator(spec, global_batch_size, seed=0, start_step=0,
                        process_index=None, process_count=None):
  """Infinite iterator of this host's training batches (numpy dicts) of the run's DataSpec `spec`.

  Its `class_names` (label order; None: the dataset's own class list) are
  read by the label-aware flip (`dataset.label_aware_flip`) only.
  """
  pi, pc = _process(process_index, process_count)
  local_batch = _local_batch(global_batch_size, pc)
  source = _source(spec, 'train')
  classes = labels.num_classes(spec, source.heads)
  lo, hi = streams.host_range(source.num_records, pi, pc)
  if lo == hi:
    raise ValueError(f'host {pi} of {pc} has no training records in '
                     f'{source.description} ({source.num_records} in all)')
  mode = examples.train_mode(spec, streams.data_seed(spec.seed, seed),
                             start=int(start_step) * local_batch)
  if spec.label_aware_flip:
    mode = label_flip.with_label_aware_flip(
        mode, spec, source.heads, spec.class_names or source.class_names)
  mode = dataclasses.replace(mode, rate=frame_rate.ratio_fn(spec, source))
  frame_rate.note_once(spec, source, pi)
  counters = _counters(spec)
  ds = examples.build(source, lo, hi, classes, mode, spec.on_error, counters)
  ds = ds.batch(local_batch, drop_remainder=True).prefetch(int(spec.prefetch))
  return DataIterator(_options(ds), source.description, counters=counters, damaged=source.damaged)


def _counters(spec):
  """The pipeline's own skip counters under on_error='skip' (none under 'raise')."""
  return errors.new_counters() if spec.on_error == 'skip' else ()


# -------------------------------------------------------------- evaluation --
def eval_layout(num_records, num_views, global_batch_size, process_count):
  """(per-host batch, batches every host yields) for a multi-view eval."""
  local_batch = _local_batch(global_batch_size, process_count)
  most = max(b - a for a, b in (streams.host_range(num_records, p, process_count)
                                for p in range(process_count)))
  return local_batch, math.ceil(most * num_views / local_batch)


def _most_batches(batches, count_all, process_count):
  """The most batches of any host, given this host's: gathered from every process when this is one of
  `process_count` JAX processes, else (hosts simulated in one process) `count_all()`, every host's counted here."""
  if process_count == 1:
    return batches
  import jax
  if jax.process_count() == process_count:
    from jax.experimental import multihost_utils
    return int(np.max(multihost_utils.process_allgather(np.int64(batches))))
  return max(count_all())


def _padding(spec, heads, classes):
  """One padding view: zero inputs and labels (`labels.zeros`), index -1, mask 0."""
  out = {'inputs': tf.zeros([int(spec.num_frames), *frame_size.parse(spec.image_size), 3], tf.uint8),
         'video_index': tf.constant(-1, tf.int32),
         'view_index': tf.constant(-1, tf.int32),
         'mask': tf.constant(0.0, tf.float32)}
  out.update(labels.zeros(heads, classes, bool(spec.multi_label)))
  return out


def make_eval_iterator(spec, split='test', global_batch_size=1,
                       process_index=None, process_count=None):
  """Finite iterator over every view of every video of `split`, padded.

  Each video gives num_test_clips x num_spatial_crops views, view_index =
  clip * num_spatial_crops + crop; with num_test_clips='all', the clips that
  tile it (`iterator.view_counts`: each video's views). Host p reads videos
  [lo_p, hi_p) of the global order; all hosts yield `len(iterator)` batches,
  the tail padded with mask 0, video_index -1, view_index -1. Under
  on_error='skip' a bad video keeps its rows (one, if it cannot be parsed),
  with mask 0 and its video_index (`skipped_videos`).
  """
  pi, pc = _process(process_index, process_count)
  source = _source(spec, split)
  classes = labels.num_classes(spec, source.heads)
  if source.num_records == 0:
    raise ValueError(f'no evaluation videos in {source.description}')
  lo, hi = streams.host_range(source.num_records, pi, pc)
  mode = dataclasses.replace(examples.eval_mode(spec), rate=frame_rate.ratio_fn(spec, source))
  if mode.views == examples.VARIES:
    local_batch = _local_batch(global_batch_size, pc)
    ranges = [streams.host_range(source.num_records, p, pc) for p in range(pc)]
    batches_of = lambda counts: math.ceil(int(counts.sum()) / local_batch)
    view_counts = examples.view_counts(source, lo, hi, mode)
    num_batches = _most_batches(batches_of(view_counts), lambda: [
        batches_of(examples.view_counts(source, a, b, mode)) for a, b in ranges], pc)
  else:
    view_counts = np.full((hi - lo,), mode.views, np.int64)
    local_batch, num_batches = eval_layout(source.num_records, mode.views, global_batch_size, pc)
  frame_rate.note_once(spec, source, pi)
  padding = tf.data.Dataset.from_tensors(_padding(spec, source.heads, classes)).repeat()
  counters = _counters(spec)
  if lo < hi:
    ds = examples.build(source, lo, hi, classes, mode, spec.on_error, counters)
    ds = ds.unbatch().concatenate(padding)
  else:
    ds = padding
  ds = ds.take(num_batches * local_batch).batch(local_batch)
  ds = ds.prefetch(int(spec.prefetch))
  return DataIterator(_options(ds), source.description, num_batches, view_counts, counters, source.damaged)


def skipped_videos(batch):
  """Sorted global indices of the videos of an evaluation batch (numpy, or a
  dict with 'mask' and 'video_index') that were skipped as bad under
  on_error='skip': rows with mask 0 and a video_index >= 0 (padding rows have
  -1)."""
  mask = np.asarray(batch['mask'])
  index = np.asarray(batch['video_index'])
  return np.unique(index[(mask == 0) & (index >= 0)]).astype(np.int64)
