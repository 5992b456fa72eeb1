"""Training and evaluation input pipelines: tf.data in, numpy batches out.

    it = make_train_iterator(cfg, global_batch_size=B, seed=0, start_step=0)
    batch = next(it)  # {'inputs': u8 (b, T, H, W, 3), 'label': i32 (b,), 'mask': f32 (b,)}

    it = make_eval_iterator(cfg, split='test', global_batch_size=B)
    for batch in it: ...  # + 'video_index', 'view_index'; mask 0 = padding

`b = B // process_count` is the per-host batch. Multi-head datasets (a dict
`label_keys`) give one 'label/<head>' per head instead of 'label'.
'inputs' are uint8 pixels, augmented; `vvt.data.normalization.normalize`
turns them into the model's input on the device (the train and eval steps
do).

Training is an infinite stream, deterministic given (cfg.seed, seed): element
g of the stream is record (g mod n) of epoch (g div n), where each epoch reads
the host's files in an order shuffled by (seed, epoch) through a shuffle buffer
seeded by (seed, epoch), and its augmentation is seeded by (seed, g). Resuming
at `start_step=k` starts at epoch (k*b div n) and skips the first (k*b mod n)
records of that epoch before decoding, so it yields exactly batch k onwards.

Bad records (no frames, label out of range or missing, unparsable record or
undecodable frame) raise `DataError` naming the file and record under
`on_error='raise'`; under 'skip' they are dropped and counted, see
`error_counts()`.
"""
import math
import os
import re

import numpy as np
import tensorflow as tf

from vvt.data import augment
from vvt.data import normalization
from vvt.data import sampling
from vvt.data import sources
from vvt.data import tfrecord
from vvt.data import transforms
from vvt.data.tfrecord import DataError

try:  # tf.data runs on the host CPU; never let TF grab an accelerator.
  tf.config.set_visible_devices([], 'GPU')
except (RuntimeError, ValueError):
  pass

AUTOTUNE = tf.data.AUTOTUNE

# Per-record error codes; 0 = good.
ERROR_NAMES = ('ok', 'no_frames', 'bad_label', 'corrupt')
_REASONS = (
    'ok',
    'record has no frames (its frame feature list is missing or empty)',
    'label missing or outside [0, num_classes)',
    'record could not be parsed or a frame could not be decoded '
    '(corrupt SequenceExample or JPEG)',
)
_MARK_OPEN, _MARK_CLOSE = 'VVT_DATA_ERROR<<', '>>VVT_DATA_ERROR'

# ------------------------------------------------------------ error counts --
_COUNTERS = {}
_TRUNCATED_FILES = [0]


def _counter(name):
  if name not in _COUNTERS:
    with tf.init_scope():
      _COUNTERS[name] = tf.Variable(0, dtype=tf.int64, trainable=False,
                                    name=f'vvt_data_skipped_{name}')
  return _COUNTERS[name]


def error_counts():
  """Records skipped under on_error='skip' in this process, by reason.

  {'no_frames', 'bad_label', 'corrupt': records dropped by the pipelines
  (counted when tf.data processes them, i.e. up to a few batches ahead of what
  was consumed), 'truncated_files': truncated TFRecord files of which only the
  complete records were read}. All zero under on_error='raise'.
  """
  counts = {name: int(_counter(name).numpy()) for name in ERROR_NAMES[1:]}
  counts['truncated_files'] = _TRUNCATED_FILES[0]
  return counts


def reset_error_counts():
  for name in ERROR_NAMES[1:]:
    _counter(name).assign(0)
  _TRUNCATED_FILES[0] = 0


# ----------------------------------------------------------------- helpers --
def _process(process_index, process_count):
  if process_index is None or process_count is None:
    import jax  # pylint: disable=g-import-not-at-top
    process_index = jax.process_index() if process_index is None else process_index
    process_count = jax.process_count() if process_count is None else process_count
  return int(process_index), int(process_count)


def _local_batch(global_batch_size, process_count):
  if global_batch_size < 1 or global_batch_size % process_count:
    raise ValueError(f'global_batch_size {global_batch_size} must be a positive '
                     f'multiple of the process count {process_count}')
  return global_batch_size // process_count


def _is_mapping(x):
  return hasattr(x, 'keys') and hasattr(x, '__getitem__')


def label_heads(label_keys):
  """label_keys (str | 1-tuple | dict head->key) -> dict batch field -> key."""
  if isinstance(label_keys, str):
    return {'label': label_keys}
  if _is_mapping(label_keys):
    if not label_keys:
      raise ValueError('dataset.label_keys is an empty dict')
    return {f'label/{head}': key for head, key in label_keys.items()}
  keys = tuple(label_keys)
  if len(keys) != 1:
    raise ValueError('dataset.label_keys: give one key, or a dict head -> key for '
                     f'multi-head datasets; got {keys!r}')
  return {'label': keys[0]}


def _num_classes(cfg, fields):
  nc = cfg.num_classes
  out = {}
  for field in fields:
    head = field.split('/', 1)[1] if '/' in field else None
    if _is_mapping(nc):
      if head is None or head not in nc:
        raise ValueError(f'dataset.num_classes has no entry for head {head!r} '
                         f'(num_classes={dict(nc)!r})')
      value = nc[head]
    else:
      if head is not None:
        raise ValueError('dataset.num_classes must be a dict head -> int when '
                         'label_keys is a dict')
      value = nc
    if not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f'dataset.num_classes must be set to a positive int '
                       f'(per head), got {value!r}')
    out[field] = int(value)
  return out


def _check_choice(cfg, field, choices):
  value = cfg[field]
  if value not in choices:
    raise ValueError(f'dataset.{field} must be one of {choices}, got {value!r}')


def _validate(cfg):
  _check_choice(cfg, 'name', ('dmvr', 'tfds'))
  _check_choice(cfg, 'on_error', ('raise', 'skip'))
  _check_choice(cfg, 'short_video_policy', sampling.POLICIES)
  _check_choice(cfg, 'sampling', sampling.SCHEMES)
  _check_choice(cfg, 'normalization', normalization.NORMALIZATIONS)
  _check_choice(cfg, 'num_spatial_crops', (1, 3))
  for field in ('num_frames', 'stride', 'image_size', 'num_test_clips',
                'train_min_resize', 'train_max_resize', 'eval_resize'):
    if cfg[field] < 1:
      raise ValueError(f'dataset.{field} must be >= 1, got {cfg[field]!r}')
  if cfg.train_min_resize > cfg.train_max_resize:
    raise ValueError(f'dataset.train_min_resize ({cfg.train_min_resize}) > '
                     f'train_max_resize ({cfg.train_max_resize})')


def _mix(*values):
  """A 31-bit int from ints, stable across runs and platforms."""
  h = 0x9E3779B1
  for v in values:
    h = (h * 1000003 + int(v) + 0x7F4A7C15) % (2 ** 61 - 1)
  return h % (2 ** 31 - 1)


# ----------------------------------------------------------------- sources --
class _DmvrSource:
  """TFRecord files of DMVR SequenceExamples."""

  def __init__(self, cfg, split):
    patterns = cfg.train_files if split == 'train' else cfg.eval_files
    field = 'train_files' if split == 'train' else 'eval_files'
    if not patterns:
      raise ValueError(f'dataset.{field} is empty: point it at the {split!r} '
                       'TFRecords (a glob or a name like dir/x.tfrecord@16)')
    files = sources.expand_patterns(patterns, cfg.data_dir)
    self.index = sources.index_files(files, cfg.on_error)
    _TRUNCATED_FILES[0] += len(self.index.truncated)
    self.num_records = self.index.num_records
    self.description = f'{field}={patterns!r}'
    self.heads = label_heads(cfg.label_keys)
    self._frames_key = cfg.frames_key
    self._video_id_key = cfg.video_id_key
    self._cycle_length = max(1, int(cfg.cycle_length))

  def records(self, lo, hi, shuffle_seed=None):
    """(source, record index in source, global index, serialized) for [lo, hi)."""
    segs = sources.segments(self.index, lo, hi)
    paths = tf.constant([s.path for s in segs], tf.string)
    starts = tf.constant([s.start for s in segs], tf.int64)
    counts = tf.constant([s.count for s in segs], tf.int64)
    offsets = tf.constant([s.offset for s in segs], tf.int64)
    order = tf.range(len(segs))
    if shuffle_seed is not None:
      order = tf.random.experimental.stateless_shuffle(order, shuffle_seed)
    ds = tf.data.Dataset.from_tensor_slices(tuple(
        tf.gather(t, order) for t in (paths, starts, counts, offsets)))

    def read(path, start, count, offset):
      recs = tf.data.TFRecordDataset(path).skip(start).take(count)
      return recs.enumerate(start).map(
          lambda i, r: (path, i, offset + i - start, r))
    return ds.interleave(read, cycle_length=min(self._cycle_length, len(segs)),
                         block_length=1, num_parallel_calls=AUTOTUNE,
                         deterministic=True)

  def parse(self, raw):
    return tfrecord.parse_record(raw, self._frames_key, self.heads,
                                 self._video_id_key)


class _TfdsSource:
  """A tensorflow-datasets video dataset, read with its frames still encoded."""

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
    self.heads = label_heads(cfg.tfds_label_keys)
    self._video_key = cfg.tfds_video_key
    self._name = f'tfds:{cfg.tfds_name}/{tfds_split}'

  def records(self, lo, hi, shuffle_seed=None):
    del shuffle_seed  # TFDS files are read in order; the shuffle buffer mixes.
    if lo >= hi:
      raise ValueError(f'{self._name}: empty host range [{lo}, {hi})')
    ds = self._builder.as_dataset(
        split=f'{self._split}[{lo}:{hi}]', shuffle_files=False,
        decoders={self._video_key: self._tfds.decode.SkipDecoding()})
    name = self._name
    return ds.enumerate(lo).map(lambda i, ex: (tf.constant(name), i, i, ex))

  def parse(self, raw):
    return {'frames': raw[self._video_key],
            'labels': {f: tf.cast(raw[k], tf.int64) for f, k in self.heads.items()},
            'video_id': tf.constant('')}


def _make_source(cfg, split):
  _validate(cfg)
  if cfg.name == 'tfds':
    return _TfdsSource(cfg, split)
  return _DmvrSource(cfg, split)


def num_videos(cfg, split):
  """Number of videos (records) of `split` ('train' or an eval split)."""
  return _make_source(cfg, split).num_records


# ------------------------------------------------------ per-record checks --
def _check_record(parsed, num_classes, heads):
  """Error code (int32) and a message detail for one parsed record."""
  n = tf.size(parsed['frames'])
  label_ok = tf.constant(True)
  details = []
  for field, key in heads.items():
    label = parsed['labels'][field]
    label_ok &= (label >= 0) & (label < num_classes[field])
    details.append(tf.strings.join(
        [f'{key}=', tf.strings.as_string(label),
         f' (num_classes={num_classes[field]})']))
  code = tf.where(n == 0, 1, tf.where(label_ok, 0, 2))
  detail = tf.where(code == 2, tf.strings.reduce_join(details, separator=', '), '')
  return tf.cast(code, tf.int32), detail


def _dummy_frames():
  return tf.io.encode_jpeg(tf.zeros([8, 8, 3], tf.uint8))[None]


def _parallelism(limit):
  return max(2, min(limit, os.cpu_count() or 2))


def _safe_interleave(ds, fn, fallback, cycle_length):
  """Maps fn over ds; an element whose fn raises becomes fallback(element).

  The map runs in a one-element dataset with ignore_errors, so a corrupt
  record cannot kill or stall the pipeline; it is named or counted downstream.
  """
  def one(*args):
    good = tf.data.Dataset.from_tensors(args).map(lambda *a: fn(*a))
    good = good.ignore_errors()
    bad = tf.data.Dataset.from_tensors(args).map(lambda *a: fallback(*a))
    return good.concatenate(bad).take(1)
  return ds.interleave(one, cycle_length=cycle_length, block_length=1,
                       num_parallel_calls=AUTOTUNE, deterministic=True)


def _handle_errors(ds, on_error):
  """Raises (naming source and record) or drops-and-counts bad elements."""
  reasons = tf.constant(_REASONS)
  if on_error == 'raise':
    def check(x):
      message = tf.strings.join([
          _MARK_OPEN, x['source'], ': record ', tf.strings.as_string(x['record']),
          ': ', tf.gather(reasons, x['code']),
          tf.where(x['detail'] == '', '', tf.strings.join([': ', x['detail']])),
          _MARK_CLOSE])
      with tf.control_dependencies(
          [tf.debugging.Assert(x['code'] == 0, [message])]):
        return dict(x, code=tf.identity(x['code']))
    ds = ds.map(check)
  else:
    counters = [_counter(name) for name in ERROR_NAMES[1:]]

    def keep(x):
      ops = [c.assign_add(tf.cast(x['code'] == i + 1, tf.int64))
             for i, c in enumerate(counters)]
      with tf.control_dependencies(ops):
        return tf.equal(x['code'], 0)
    ds = ds.filter(keep)
  return ds.map(lambda x: {k: v for k, v in x.items()
                           if k not in ('code', 'source', 'record', 'detail')})


def _options(ds):
  opts = tf.data.Options()
  opts.deterministic = True
  opts.experimental_optimization.map_parallelization = True
  return ds.with_options(opts)


class DataIterator:
  """Numpy batches from a tf.data pipeline, with data errors made readable."""

  def __init__(self, ds, description, num_batches=None):
    self._ds = ds
    self._it = iter(ds.as_numpy_iterator())
    self._description = description
    self.num_batches = num_batches

  def __iter__(self):
    return self

  def __len__(self):
    if self.num_batches is None:
      raise TypeError('the training iterator is infinite')
    return self.num_batches

  def __next__(self):
    try:
      return next(self._it)
    except tf.errors.InvalidArgumentError as e:
      text = str(e.message)
      m = re.search(re.escape(_MARK_OPEN) + '(.*?)' + re.escape(_MARK_CLOSE),
                    text, re.S)
      if m:
        raise DataError(m.group(1).replace('\\"', '"')) from None
      raise DataError(f'reading {self._description}: {text}') from None
    except tf.errors.DataLossError as e:
      raise DataError(f'corrupt TFRecord data in {self._description}: '
                      f'{e.message}') from None
    except tf.errors.NotFoundError as e:  # a file vanished after indexing
      raise DataError(f'reading {self._description}: {e.message}') from None

  @staticmethod
  def error_counts():
    return error_counts()


# ----------------------------------------------------------------- training --
def make_train_iterator(cfg, global_batch_size, seed=0, start_step=0,
                        process_index=None, process_count=None):
  """Infinite iterator of this host's training batches (numpy dicts)."""
  pi, pc = _process(process_index, process_count)
  local_batch = _local_batch(global_batch_size, pc)
  source = _make_source(cfg, 'train')
  heads = source.heads
  num_classes = _num_classes(cfg, heads)
  lo, hi = sources.host_range(source.num_records, pi, pc)
  n = hi - lo
  if n == 0:
    raise ValueError(f'host {pi} of {pc} has no training records in '
                     f'{source.description} ({source.num_records} in all)')
  data_seed = _mix(cfg.seed, seed)
  start_epoch, skip = divmod(int(start_step) * local_batch, n)
  num_frames, size = int(cfg.num_frames), int(cfg.image_size)
  make_clip = augment.train_clip_fn(cfg)

  if cfg.cache:
    cached = source.records(lo, hi, None).cache()
    epoch_records = lambda e: cached
  else:
    epoch_records = lambda e: source.records(
        lo, hi, tf.stack([tf.constant(data_seed, tf.int64), e]))

  def epoch(e):
    ds = epoch_records(e)
    if cfg.shuffle_buffer > 1:
      ds = ds.shuffle(int(cfg.shuffle_buffer),
                      seed=tf.constant(data_seed, tf.int64) * 7919 + e)
    return ds.enumerate().map(lambda i, x: (e * n + i,) + tuple(x))

  ds = tf.data.Dataset.range(start_epoch, 2 ** 62).flat_map(epoch)
  ds = ds.skip(skip)  # before decoding: skipped clips are never decoded

  def process(pos, src, rec, gid, raw):
    del gid
    key = tf.stack([tf.constant(data_seed, tf.int64), pos])
    parsed = source.parse(raw)
    code, detail = _check_record(parsed, num_classes, heads)
    frames = tf.cond(code == 0, lambda: parsed['frames'], _dummy_frames)
    idx = sampling.train_indices(
        tf.size(frames), num_frames, int(cfg.stride), transforms.fold_in(key, 1),
        cfg.short_video_policy, cfg.sampling)
    encoded = tf.gather(frames, idx)
    h, w = tf.unstack(transforms.frame_shape(encoded[0]))
    window = transforms.train_crop_window(
        h, w, size, cfg.train_min_resize, cfg.train_max_resize,
        transforms.fold_in(key, 2))
    flip = (transforms.random_flip_flag(transforms.fold_in(key, 4))
            if cfg.horizontal_flip else tf.constant(False))
    video = make_clip(transforms.decode_frames(encoded, num_frames, window),
                      flip, transforms.fold_in(key, 3))
    out = {'inputs': video}
    for field in heads:
      out[field] = tf.cast(tf.maximum(parsed['labels'][field], 0), tf.int32)
    out.update(code=code, source=src, record=rec, detail=detail)
    return out

  def fallback(pos, src, rec, gid, raw):
    del pos, gid, raw
    out = {'inputs': tf.zeros([num_frames, size, size, 3], tf.uint8)}
    out.update({field: tf.constant(0, tf.int32) for field in heads})
    out.update(code=tf.constant(3, tf.int32), source=src, record=rec,
               detail=tf.constant(''))
    return out

  ds = _safe_interleave(ds, process, fallback, _parallelism(16))
  ds = _handle_errors(ds, cfg.on_error)
  ds = ds.map(lambda x: dict(x, mask=tf.constant(1.0, tf.float32)))
  ds = ds.batch(local_batch, drop_remainder=True).prefetch(int(cfg.prefetch))
  return DataIterator(_options(ds), source.description)


# --------------------------------------------------------------- evaluation --
def eval_layout(num_records, num_views, global_batch_size, process_count):
  """(per-host batch, batches every host yields) for a multi-view eval."""
  local_batch = _local_batch(global_batch_size, process_count)
  most = max(b - a for a, b in (sources.host_range(num_records, p, process_count)
                                for p in range(process_count)))
  return local_batch, math.ceil(most * num_views / local_batch)


def make_eval_iterator(cfg, split='test', global_batch_size=1,
                       process_index=None, process_count=None):
  """Finite iterator over every view of every video of `split`, padded.

  Each video gives num_test_clips x num_spatial_crops views, view_index =
  clip * num_spatial_crops + crop. Host p reads videos [lo_p, hi_p) of the
  global order; all hosts yield `len(iterator)` batches, the tail padded with
  mask 0, video_index -1, view_index -1.
  """
  pi, pc = _process(process_index, process_count)
  source = _make_source(cfg, split)
  heads = source.heads
  num_classes = _num_classes(cfg, heads)
  clips, crops = int(cfg.num_test_clips), int(cfg.num_spatial_crops)
  views = clips * crops
  if source.num_records == 0:
    raise ValueError(f'no evaluation videos in {source.description}')
  local_batch, num_batches = eval_layout(source.num_records, views,
                                         global_batch_size, pc)
  lo, hi = sources.host_range(source.num_records, pi, pc)
  num_frames, size = int(cfg.num_frames), int(cfg.image_size)
  def process(src, rec, gid, raw):
    parsed = source.parse(raw)
    code, detail = _check_record(parsed, num_classes, heads)
    frames = tf.cond(code == 0, lambda: parsed['frames'], _dummy_frames)
    idx = sampling.eval_indices(tf.size(frames), num_frames, int(cfg.stride),
                                clips, cfg.short_video_policy, cfg.sampling)
    encoded = tf.gather(frames, tf.reshape(idx, [-1]))
    video = transforms.decode_frames(encoded, clips * num_frames)
    h, w = tf.shape(video)[1], tf.shape(video)[2]
    windows = transforms.eval_crop_windows(h, w, size, cfg.eval_resize, crops)
    per_crop = []
    for k in range(crops):
      y, x, ch, cw = tf.unstack(windows[k])
      per_crop.append(augment.resize_tf(video[:, y:y + ch, x:x + cw], size))
    # (crops, clips*T, S, S, 3) -> (clips, crops, T, S, S, 3) -> (views, ...)
    v = tf.reshape(tf.stack(per_crop), [crops, clips, num_frames, size, size, 3])
    v = tf.reshape(tf.transpose(v, [1, 0, 2, 3, 4, 5]),
                   [views, num_frames, size, size, 3])
    out = {'inputs': v}
    for field in heads:
      label = tf.cast(tf.maximum(parsed['labels'][field], 0), tf.int32)
      out[field] = tf.fill([views], label)
    out.update(video_index=tf.fill([views], tf.cast(gid, tf.int32)),
               view_index=tf.range(views, dtype=tf.int32),
               code=code, source=src, record=rec, detail=detail)
    return out

  def fallback(src, rec, gid, raw):
    del raw
    out = {'inputs': tf.zeros([views, num_frames, size, size, 3], tf.uint8)}
    out.update({field: tf.zeros([views], tf.int32) for field in heads})
    out.update(video_index=tf.fill([views], tf.cast(gid, tf.int32)),
               view_index=tf.range(views, dtype=tf.int32),
               code=tf.constant(3, tf.int32), source=src, record=rec,
               detail=tf.constant(''))
    return out

  padding = {'inputs': tf.zeros([num_frames, size, size, 3], tf.uint8),
             'video_index': tf.constant(-1, tf.int32),
             'view_index': tf.constant(-1, tf.int32),
             'mask': tf.constant(0.0, tf.float32)}
  padding.update({field: tf.constant(0, tf.int32) for field in heads})

  if lo < hi:
    ds = source.records(lo, hi, None)
    # A video's views are one element (views x T x S x S x 3 bytes): keep
    # few in flight.
    ds = _safe_interleave(ds, process, fallback, _parallelism(4))
    ds = _handle_errors(ds, cfg.on_error).unbatch()
    ds = ds.map(lambda x: dict(x, mask=tf.constant(1.0, tf.float32)))
    ds = ds.concatenate(tf.data.Dataset.from_tensors(padding).repeat())
  else:
    ds = tf.data.Dataset.from_tensors(padding).repeat()
  ds = ds.take(num_batches * local_batch).batch(local_batch)
  ds = ds.prefetch(int(cfg.prefetch))
  return DataIterator(_options(ds), source.description, num_batches)
