"""Reading order: epochs, shuffles and resume positions of the record streams."""
import tensorflow as tf

from vvt.data.reading import streams


class _Source:
  """Records 'r<i>' of one file 'f', as a source yields them."""

  def records(self, lo, hi, shuffle_seed=None):
    del shuffle_seed
    i = tf.data.Dataset.range(lo, hi)
    return i.map(lambda k: (tf.constant('f'), k, k,
                            tf.strings.join(['r', tf.strings.as_string(k)]), tf.constant('')))


def _take(ds, n):
  return [(int(p), int(g)) for p, _, _, g, _, _ in ds.take(n).as_numpy_iterator()]


def test_train_stream_positions_epochs_and_resume():
  source = _Source()
  fresh = _take(streams.train_records(source, 2, 7, seed=3, shuffle_buffer=4), 15)
  assert [p for p, _ in fresh] == list(range(15))
  for epoch in range(3):  # each epoch reads the host's 5 records once
    assert sorted(g for _, g in fresh[5 * epoch:5 * epoch + 5]) == [2, 3, 4, 5, 6]
  orders = [[g for _, g in fresh[a:a + 5]] for a in (0, 5, 10)]
  assert len({tuple(o) for o in orders}) > 1  # reshuffled per epoch
  for start in (1, 5, 8):
    resumed = streams.train_records(source, 2, 7, seed=3, shuffle_buffer=4,
                                    start=start)
    assert _take(resumed, 15 - start) == fresh[start:]


def test_eval_stream_reads_the_range_once_in_order():
  got = _take(streams.eval_records(_Source(), 3, 8), 100)
  assert got == [(g, g) for g in range(3, 8)]


def test_data_seed_is_stable():
  assert streams.data_seed(0, 0) == streams.data_seed(0, 0)
  assert streams.data_seed(0, 1) != streams.data_seed(1, 0)
  assert 0 <= streams.data_seed(2 ** 40, -5) < 2 ** 31 - 1
