"""Which records a host reads, in which order, and the seed of each.

Host p of P reads the contiguous range [lo, hi) of the global record indices (`host_range`), so the hosts'
shares differ by at most one record. Both streams yield (position, *Row): the position in the stream, then the
source's `Row` (source name, record in file, global index, raw record, unread; `vvt.data.reading.source`); a
clip's randomness is seeded by (data seed, position).

* Training (`train_records`) is infinite and deterministic given the data
  seed: the element at position g is record (g mod n) of epoch (g div n) of
  the host's n records, where each epoch reads the host's records in an order
  the source draws from (seed, epoch) (TFRecords: the files shuffled; a video
  list: the records themselves) through a shuffle buffer seeded by (seed, epoch).
  Starting at position `start` skips the records before it without decoding
  them, so a resumed stream is exactly the tail of a fresh one.
  With `repeats` = N > 1 (`dataset.repeated_augmentation`) each record is
  yielded N times in a row: copy r of the record at record position g has
  position g * N + r, so every copy gets its own augmentation seed, and the
  stream of positions p is record position p div N, copy p mod N.
* Evaluation (`eval_records`) reads the host's records once, in global order;
  the position is the global index.
"""
import tensorflow as tf


def host_range(num_records, process_index, process_count):
  """[lo, hi): the contiguous share of global record indices of one host."""
  if not 0 <= process_index < process_count:
    raise ValueError(f'process_index {process_index} not in [0, {process_count})')
  lo = num_records * process_index // process_count
  hi = num_records * (process_index + 1) // process_count
  return lo, hi


def data_seed(*values):
  """A 31-bit int from ints (e.g. cfg.seed and the iterator's seed), stable
  across runs and platforms."""
  h = 0x9E3779B1
  for v in values:
    h = (h * 1000003 + int(v) + 0x7F4A7C15) % (2 ** 61 - 1)
  return h % (2 ** 31 - 1)


def _epoch_records(source, lo, hi, seed, cache):
  """fn(epoch int64 tensor) -> the host's records of that epoch, files in an
  order shuffled by (seed, epoch); with `cache`, the first epoch's records
  (file order unshuffled) kept in memory for all."""
  if cache:
    cached = source.records(lo, hi, None).cache()
    return lambda e: cached
  return lambda e: source.records(
      lo, hi, tf.stack([tf.constant(seed, tf.int64), e]))


def train_records(source, lo, hi, seed, shuffle_buffer, cache=False, start=0,
                  repeats=1):
  """Infinite stream of the host's records [lo, hi) from position `start`,
  each record `repeats` times in a row (repeated augmentation)."""
  n = hi - lo
  first, copy = divmod(int(start), int(repeats))
  start_epoch, skip = divmod(first, n)
  records_of = _epoch_records(source, lo, hi, seed, cache)

  def epoch(e):
    ds = records_of(e)
    if shuffle_buffer > 1:
      ds = ds.shuffle(int(shuffle_buffer),
                      seed=tf.constant(seed, tf.int64) * 7919 + e)
    return ds.enumerate().map(lambda i, x: (e * n + i,) + tuple(x))

  ds = tf.data.Dataset.range(start_epoch, 2 ** 62).flat_map(epoch)
  ds = ds.skip(skip)  # before decoding: skipped clips are never decoded
  if repeats > 1:
    ds = ds.flat_map(lambda g, *rest: _copies(g, rest, int(repeats))).skip(copy)
  return ds


def _copies(position, rest, repeats):
  """The `repeats` copies of one record: positions position * repeats + r."""
  r = tf.data.Dataset.range(repeats)
  return r.map(lambda i: (position * repeats + i,) + tuple(rest))


def eval_records(source, lo, hi):
  """The host's records [lo, hi) once, in global order."""
  return source.records(lo, hi, None).map(
      lambda src, rec, index, raw, unread: (index, src, rec, index, raw, unread))
