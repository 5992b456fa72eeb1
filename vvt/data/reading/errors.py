"""Bad input: the errors the pipelines raise and the counters of what they skip.

A bad record (no frames, label missing or out of range, unparsable record or
undecodable frame, frames of different sizes, a JPEG frame cut short, a record
of a TFRecord file that cannot be read past corrupt data, a video file that
cannot be opened or holds fewer frames than its container declares, a record
with several labels read by a single-label run) gets an error code
in the pipeline. Under `on_error='raise'` the first one raises `DataError`
naming the file and the record; under 'skip' bad records are dropped and
counted per reason (`error_counts()`), and each is noted with its file and
record (`skipped_records()`).

A record's processing runs inside a one-element dataset with `ignore_errors`
(`isolate`), so a corrupt record can neither kill nor stall tf.data: its
failure becomes the element `fallback` gives, with code 3 ('corrupt').
"""
import re

import tensorflow as tf

# Per-record error codes (the index); 0 = good.
ERROR_NAMES = ('ok', 'no_frames', 'bad_label', 'corrupt', 'frame_sizes',
               'unreadable_tfrecord', 'truncated_frame', 'unreadable_video', 'partial_video',
               'several_labels')
(OK, NO_FRAMES, BAD_LABEL, CORRUPT, FRAME_SIZES, UNREADABLE,
 TRUNCATED_FRAME, UNREADABLE_VIDEO, PARTIAL_VIDEO, SEVERAL_LABELS) = range(len(ERROR_NAMES))
_REASONS = (
    'ok',
    'record has no frames (its frame feature list is missing or empty)',
    'label missing or outside [0, num_classes)',
    'record could not be parsed or a frame could not be decoded '
    '(corrupt SequenceExample, JPEG or video)',
    'frames differ in size',
    'TFRecord data cannot be read',
    'JPEG frame cut short',
    'video file cannot be read',
    'video file cut short',
    'record has several labels',
)
# Fields of an element that only serve the error handling.
ERROR_FIELDS = ('code', 'source', 'record', 'detail')
_MARK_OPEN, _MARK_CLOSE = 'VVT_DATA_ERROR<<', '>>VVT_DATA_ERROR'


class DataError(RuntimeError):
  """A bad record or file; the message names the file and the record."""
  user_error = True  # the CLI prints the message alone (vvt/cli/common.py)


class TruncatedFileError(DataError):
  """A TFRecord file ends in the middle of a record."""


# ------------------------------------------------------------ error counts --
_COUNTERS = {}
_TRUNCATED_FILES = set()  # (path, size, mtime) of each truncated file seen
_SKIPPED = {}  # (source, record) -> (reason name, detail), under 'skip'


def _counter(name):
  if name not in _COUNTERS:
    with tf.init_scope():
      _COUNTERS[name] = tf.Variable(0, dtype=tf.int64, trainable=False,
                                    name=f'vvt_data_skipped_{name}')
  return _COUNTERS[name]


def error_counts():
  """Records skipped under on_error='skip' in this process, by reason.

  {'no_frames', 'bad_label', 'corrupt', 'frame_sizes', 'unreadable_tfrecord',
  'truncated_frame', 'unreadable_video', 'partial_video', 'several_labels': records dropped by the pipelines
  (counted when tf.data processes them, i.e. up to a few batches ahead of what
  was consumed), 'truncated_files': distinct truncated TFRecord
  files of which only the complete records were read}. All zero under
  on_error='raise'.
  """
  counts = {name: int(_counter(name).numpy()) for name in ERROR_NAMES[1:]}
  counts['truncated_files'] = len(_TRUNCATED_FILES)
  return counts


def new_counters():
  """One pipeline's own skip counters (int64 variables, one per reason of `ERROR_NAMES[1:]`), for
  `raise_or_count(..., counters=...)`; read with `read_counters`."""
  with tf.init_scope():
    return tuple(tf.Variable(0, dtype=tf.int64, trainable=False, name=f'vvt_pipeline_skipped_{name}')
                 for name in ERROR_NAMES[1:])


def read_counters(counters) -> dict:
  """{reason name: records counted} of counters made by `new_counters`."""
  return {name: int(c.numpy()) for name, c in zip(ERROR_NAMES[1:], counters, strict=True)}


def reset_error_counts():
  """Zeroes the counts of `error_counts()` and forgets `skipped_records()`."""
  for name in ERROR_NAMES[1:]:
    _counter(name).assign(0)
  _TRUNCATED_FILES.clear()
  _SKIPPED.clear()


def damaged_files():
  """Sorted (path, why) of the TFRecord files of which only the records
  before the damage (truncation, a corrupt header) were indexed."""
  return sorted(_TRUNCATED_FILES)


def skipped_records():
  """{(source, record in file): (reason name, detail)} of the records this
  process skipped under on_error='skip' (each once, however often read)."""
  return dict(_SKIPPED)


def _note_skip(source, record, code, detail):
  """numpy_function: notes one skipped record."""
  key = (source.decode('utf-8', 'replace'), int(record))
  _SKIPPED.setdefault(key, (ERROR_NAMES[int(code)],
                            detail.decode('utf-8', 'replace')))
  return 0


def count_truncated_files(keys):
  """Counts truncated files (read up to their last whole record), each once
  however often it is indexed: `keys` identify a file's state, e.g. (path,
  where it ends)."""
  _TRUNCATED_FILES.update(keys)


# -------------------------------------------------------- in the pipeline --
def isolate(ds, fn, fallback, cycle_length):
  """Maps fn over ds; an element whose fn raises becomes fallback(element).

  The map runs in a one-element dataset with ignore_errors, so a corrupt
  record cannot kill or stall the pipeline; it is named or counted downstream
  (`raise_or_count`). Elements keep their order.
  """
  def one(*args):
    good = tf.data.Dataset.from_tensors(args).map(lambda *a: fn(*a))
    good = good.ignore_errors()
    bad = tf.data.Dataset.from_tensors(args).map(lambda *a: fallback(*a))
    return good.concatenate(bad).take(1)
  return ds.interleave(one, cycle_length=cycle_length, block_length=1,
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _raise_bad(x, reasons):
  """The element, behind an assertion that fails with a marked message
  naming its source and record when its code is not 0."""
  message = tf.strings.join([
      _MARK_OPEN, x['source'], ': record ', tf.strings.as_string(x['record']),
      ': ', tf.gather(reasons, x['code']),
      tf.where(x['detail'] == '', '', tf.strings.join([': ', x['detail']])),
      _MARK_CLOSE])
  with tf.control_dependencies(
      [tf.debugging.Assert(x['code'] == 0, [message])]):
    return dict(x, code=tf.identity(x['code']))


def _count(x, counters):
  """Ops counting a bad element under its reason (and noting it); `counters` holds one or more sets of
  `len(ERROR_NAMES) - 1` counters, each set in the order of ERROR_NAMES[1:]."""
  note = tf.cond(
      x['code'] != 0,
      lambda: tf.numpy_function(_note_skip, [x['source'], x['record'], x['code'], x['detail']],
                                tf.int64, stateful=True),
      lambda: tf.constant(0, tf.int64))
  reasons = len(ERROR_NAMES) - 1
  return [c.assign_add(tf.cast(x['code'] == i % reasons + 1, tf.int64))
          for i, c in enumerate(counters)] + [note]


def _keep_good(x, counters):
  """True for a good element; counts a bad one under its reason."""
  with tf.control_dependencies(_count(x, counters)):
    return tf.equal(x['code'], 0)


def _mask_bad(x, counters):
  """The element with 'mask' zeroed when it is bad (counted)."""
  with tf.control_dependencies(_count(x, counters)):
    good = tf.cast(tf.equal(x['code'], 0), x['mask'].dtype)
  return dict(x, mask=x['mask'] * good)


def raise_or_count(ds, on_error, keep_skipped=False, counters=()):
  """Raises (naming source and record) or counts bad elements.

  Elements are dicts with the ERROR_FIELDS ('code' int32, 'source' string,
  'record' int64, 'detail' string) and 'mask'; they leave without the
  ERROR_FIELDS. Under 'skip' a bad element is dropped, or with `keep_skipped`
  kept with 'mask' 0 (evaluation: the rows of a skipped video still carry its
  'video_index', so the evaluator knows which videos it leaves out). A bad element is counted in the
  process's counts (`error_counts()`) and in `counters` (a pipeline's own, `new_counters()`), if given.
  """
  if on_error == 'raise':
    reasons = tf.constant(_REASONS)
    ds = ds.map(lambda x: _raise_bad(x, reasons))
  else:
    process = [_counter(name) for name in ERROR_NAMES[1:]]
    counted = process + list(counters) if counters else process
    if keep_skipped:
      ds = ds.map(lambda x: _mask_bad(x, counted))
    else:
      ds = ds.filter(lambda x: _keep_good(x, counted))
  return ds.map(lambda x: {k: v for k, v in x.items()
                           if k not in ERROR_FIELDS})


# ------------------------------------------------------- out of the pipeline --
# What tf.data raises for a bad element or file while a pipeline is iterated.
TF_READ_ERRORS = (tf.errors.InvalidArgumentError, tf.errors.DataLossError,
                  tf.errors.NotFoundError)


def as_data_error(error, description):
  """One of TF_READ_ERRORS -> a readable `DataError`.

  A marked message of `raise_or_count` becomes that message (file, record,
  reason); other errors name `description` (the split's files) and TF's
  message with the path.
  """
  if isinstance(error, tf.errors.DataLossError):
    return DataError(f'corrupt TFRecord data in {description}: {error.message}')
  if isinstance(error, tf.errors.NotFoundError):  # a file vanished after indexing
    return DataError(f'reading {description}: {error.message}')
  text = str(error.message)
  m = re.search(re.escape(_MARK_OPEN) + '(.*?)' + re.escape(_MARK_CLOSE),
                text, re.S)
  if m:
    return DataError(m.group(1).replace('\\"', '"').replace("\\'", "'"))
  return DataError(f'reading {description}: {text}')
