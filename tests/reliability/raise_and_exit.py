"""Subprocess body of the exit test: iterate a pipeline until a bad record raises, print the error, exit 1.

    python raise_and_exit.py {train|eval} FILE [--old-iterator]

Module-level code, as a script's: the iterator is a global, alive until interpreter shutdown unless closed.
`--old-iterator` puts back the `DataIterator.__next__` before the fix (no close on a data error) to show that
the test can fail.
"""
import sys
import time

sys.path.insert(0, __file__.rsplit('/', 2)[0] + '/data')
from data_helpers import small_config

from vvt.data import pipeline
from vvt.data.reading import errors

MODE, PATH = sys.argv[1], sys.argv[2]
if '--old-iterator' in sys.argv:
  def old_next(self):
    try:
      return next(self._it)
    except errors.TF_READ_ERRORS as e:
      raise errors.as_data_error(e, self._description) from None
  pipeline.DataIterator.__next__ = old_next
  pipeline.DataIterator.close = lambda self: None

cfg = small_config(PATH, PATH, num_classes=4, image_size=32, train_min_resize=40, train_max_resize=48,
                   eval_resize=32, prefetch=4, shuffle_buffer=64, color_jitter=0.5,
                   randaugment={'num_layers': 2, 'magnitude': 9}, random_erasing=0.5, num_frames=8, stride=2)
try:
  if MODE == 'train':
    it = pipeline.make_train_iterator(cfg, 8, process_index=0, process_count=1)
    for _ in range(10 ** 6):
      next(it)
  else:
    it = pipeline.make_eval_iterator(cfg, 'test', 8, process_index=0, process_count=1)
    for _ in it:
      pass
except errors.DataError as e:
  print(f'ERROR {time.time():.3f} {e}', flush=True)
  sys.exit(1)
print('no error', flush=True)
