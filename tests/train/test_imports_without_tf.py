"""vvt.train (the trainer, the train step, model state, mesh and shardings) and the CLI modules import on a host
without TensorFlow (a GPU host with JAX but no TF): TensorFlow, TensorBoard and clu's TF-backed metric writers
are blocked in a fresh interpreter, which then imports them and runs one train step of the tiny config.

clu.metrics itself needs no TensorFlow; clu.metric_writers does (imported where the writers are made) and so
does the data pipeline (vvt.data.pipeline, imported where a run reads data).
"""
import subprocess

import train_helpers as common

BLOCKED = ('tensorflow', 'tensorboard', 'tensorflow_datasets', 'clu.metric_writers')

SCRIPT = f'''
import sys
for name in {BLOCKED!r}:
  sys.modules[name] = None  # `import name` now raises ImportError

import vvt.train.steps, vvt.train.trainer  # noqa: E401
import vvt.cli.train, vvt.cli.predict, vvt.cli.summary, vvt.cli.results, vvt.cli.sweep  # noqa: E401

import jax
import numpy as np
from vvt.train import mesh as mesh_lib, program as program_lib
from vvt.config import run_spec

# The tiny config file itself (configs/common.py's synthetic recipe: its class names come from
# vvt.data.writing.synthetic, which needs TensorFlow only to write the files).
sys.path.insert(0, 'tests/train')
import tiny_config
config = tiny_config.get_config('unused')
config.batch_size = 8
m = config.model
mesh = mesh_lib.make_mesh()
program = program_lib.build_program(run_spec.resolve(config), mesh, num_train_videos=config.batch_size)
state = program.init_state(jax.random.PRNGKey(0))
step = program.training.step
bs = config.batch_size
rng = np.random.default_rng(0)
batch = {{'inputs': rng.integers(0, 256, (bs, m.num_frames, m.image_size, m.image_size, 3), dtype=np.uint8),
          'label': rng.integers(0, int(m.num_classes), bs).astype(np.int32),
          'mask': np.ones((bs,), np.float32)}}
state, metrics, status = step(state, mesh_lib.global_batch(batch, mesh, bs))
loss = float(status['loss'])
assert np.isfinite(loss) and int(state.step) == 1, (loss, int(state.step))
loaded = sorted({{k.split('.')[0] for k, v in sys.modules.items() if v is not None}}
                & {{'tensorflow', 'tensorboard', 'tensorflow_datasets'}})
assert not loaded, loaded
print('TRAIN STEP OK', loss)
'''


def test_train_step_without_tensorflow():
  proc = subprocess.run([common.PY, '-c', SCRIPT], cwd=common.REPO, env=common.env(), capture_output=True,
                        text=True, timeout=600)
  assert proc.returncode == 0 and 'TRAIN STEP OK' in proc.stdout, proc.stderr[-5000:]


def test_metric_writers_still_write_tensorboard_and_jsonl(tmp_path):
  """The writers, now made where they are used, still write TensorBoard events and metrics.jsonl."""
  from vvt.train import metrics
  train, _ = metrics.make_writers(str(tmp_path), is_chief=True)
  train.write_scalars(3, {'loss': 1.5})
  train.flush()
  assert metrics.read_jsonl(str(tmp_path))[0] | {'time': 0} == {'step': 3, 'kind': 'train', 'loss': 1.5,
                                                                 'time': 0}
  assert list((tmp_path / 'tensorboard' / 'train').iterdir())
  silent, _ = metrics.make_writers(str(tmp_path / 'other'), is_chief=False)
  silent.write_scalars(1, {'loss': 1.0})
  assert not (tmp_path / 'other').exists()
