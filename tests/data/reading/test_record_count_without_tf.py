"""Counting the records of local TFRecord files without TensorFlow: the counts equal what TensorFlow reads from
files TensorFlow wrote, the glob finds what tf.io.gfile.glob finds, and the count imports no TensorFlow."""
import os
import subprocess
import sys

from tests.conftest import REPO
from vvt.data.reading import tfrecord_index

# records per file: none, one empty record, a few, and one past 64 KiB (a length above two bytes)
RECORDS = {'a.tfrecord': [], 'b.tfrecord': [b''], 'c.tfrecord': [b'x' * n for n in (1, 7, 300)],
           '.d.tfrecord': [bytes(range(256)) * 300, b'y']}


def _write_with_tensorflow(folder):
  import tensorflow as tf
  for name, records in RECORDS.items():
    with tf.io.TFRecordWriter(os.path.join(folder, name)) as w:
      for r in records:
        w.write(r)


def test_counts_and_files_equal_tensorflow_s(tmp_path):
  import tensorflow as tf
  _write_with_tensorflow(str(tmp_path))
  pattern = str(tmp_path / '*.tfrecord')
  files = tfrecord_index.expand_patterns(pattern)
  assert files == sorted(tf.io.gfile.glob(pattern)) and len(files) == len(RECORDS)
  by_tensorflow = [sum(1 for _ in tf.data.TFRecordDataset(f)) for f in files]
  assert list(tfrecord_index.index_files(files).counts) == by_tensorflow == [
      len(RECORDS[os.path.basename(f)]) for f in files]
  assert tfrecord_index.count_records(pattern) == sum(by_tensorflow) == 6
  assert tfrecord_index.count_records('c.tfrecord,b.tfrecord', data_dir=str(tmp_path)) == 4


def test_the_count_imports_no_tensorflow(tmp_path):
  _write_with_tensorflow(str(tmp_path))
  code = ('import sys; from vvt.data.reading import tfrecord_index; '
          f'n = tfrecord_index.count_records({str(tmp_path / "*.tfrecord")!r}); '
          'print(n, sorted(m for m in sys.modules if m.split(".")[0] == "tensorflow"))')
  env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get('PYTHONPATH', ''))
  res = subprocess.run([sys.executable, '-c', code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.split() == ['6', '[]'], res.stdout
