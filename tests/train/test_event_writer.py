"""The TensorBoard writer without TensorFlow writes what clu's TensorFlow-backed writer writes: the same events
(tags, steps, tensors, plugin metadata), read back by TensorBoard's own readers; images equal pixel for pixel."""
import io
import subprocess

import numpy as np
from PIL import Image
import train_helpers as common

SCALARS = {'loss': 1.5, 'num_videos': 7, 'top1': np.float32(0.3), 'lr': np.float64(1e-3)}
IMAGES = {'clip': np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape(2, 3, 4, 3),
          'float': np.linspace(-0.1, 1.1, 2 * 5 * 3).reshape(2, 5, 3), 'gray': np.full((1, 2, 3, 1), 200, np.uint8)}
TEXTS = {'note': 'hé, *markdown*'}


def _write(writer):
  writer.write_scalars(3, SCALARS)
  writer.write_images(3, IMAGES)
  writer.write_texts(4, TEXTS)
  writer.write_scalars(8, {'loss': 0.25})
  writer.close()


def _events(logdir):
  """[(step, tag, dtype, shape, plugin, data class, tensor values)] of the one event file in `logdir`."""
  from tensorboard.backend.event_processing import event_file_loader
  from tensorboard.util import tensor_util
  files = list(logdir.iterdir())
  assert len(files) == 1 and files[0].name.startswith('events.out.tfevents.') and files[0].name.endswith('.v2')
  events = list(event_file_loader.EventFileLoader(str(files[0])).Load())
  assert events[0].file_version == 'brain.Event:2'
  out = []
  for e in events[1:]:
    (v,) = e.summary.value
    values = tensor_util.make_ndarray(v.tensor).tolist()
    if v.metadata.plugin_data.plugin_name == 'images':
      values = values[:2] + [np.asarray(Image.open(io.BytesIO(png))).tolist() for png in values[2:]]
    out.append((e.step, v.tag, v.tensor.dtype, list(v.tensor.tensor_shape.dim), v.metadata.plugin_data.plugin_name,
                v.metadata.plugin_data.content, v.metadata.data_class, values))
  return out


def test_events_read_back_equal_to_clus_writer(tmp_path):
  from clu import metric_writers

  from vvt.train import event_writer
  _write(metric_writers.SummaryWriter(str(tmp_path / 'clu')))
  _write(event_writer.EventWriter(str(tmp_path / 'vvt')))
  ours = _events(tmp_path / 'vvt')
  assert ours == _events(tmp_path / 'clu')
  assert [(step, tag) for step, tag, *_ in ours] == ([(3, t) for t in [*SCALARS, *IMAGES]] + [(4, t) for t in TEXTS]
                                                  + [(8, 'loss')])


def test_the_writers_import_no_tensorflow_and_the_pipeline_none_of_keras(tmp_path):
  """The writers of a run import neither TensorFlow nor Keras, and TensorBoard's EventAccumulator reads their
  scalars; the pipeline's TensorFlow then comes without Keras (`vvt.data.tensorflow_import`), the environment as
  it was, and `tf.keras` still loads when asked for."""
  script = f'''
import os, sys
from vvt.train import metrics
train, ev = metrics.make_writers({str(tmp_path)!r}, is_chief=True)
train.write_scalars(2, {{'loss': 0.5}})
ev.write_scalars(2, {{'video_top1': 0.25}})
train.close(); ev.close()
print(sorted(m for m in ('tensorflow', 'keras', 'clu.metric_writers') if m in sys.modules))
from vvt import data
data.make_train_iterator
import tensorflow as tf
print('keras' in sys.modules, 'TF_USE_LEGACY_KERAS' in os.environ, None in tf.__path__)
tf.keras.layers.Dense
print('keras' in sys.modules)
'''
  proc = subprocess.run([common.PY, '-c', script], cwd=common.REPO, env=common.env(), capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert proc.stdout.split('\n') == ['[]', 'False False False', 'True', '']
  from tensorboard.backend.event_processing import event_accumulator
  from tensorboard.util import tensor_util
  for kind, tag, value in (('train', 'loss', 0.5), ('eval', 'video_top1', 0.25)):
    acc = event_accumulator.EventAccumulator(str(tmp_path / 'tensorboard' / kind)).Reload()
    (event,) = acc.Tensors(tag)
    assert (event.step, tensor_util.make_ndarray(event.tensor_proto).item()) == (2, value)
