"""Subprocess helper for test_sharding: trains the tiny config once per run, each on its own number of the
process's devices, one after another in this one process (one start-up for all).

argv: data_dir workdir:num_devices:accum [workdir:num_devices:accum ...]; a `RESULT {...}` line per run, in order.
"""
import json
import sys

import jax

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import train_helpers  # noqa: E402

from vvt.config import run_spec  # noqa: E402
from vvt.train import trainer  # noqa: E402


def train(data_dir, workdir, num_devices, accum):
  c = train_helpers.tiny_config(data_dir)
  c.batch_size = 16
  c.num_train_steps = 4
  c.checkpoint.every_steps = 4
  c.log_every_steps = 2
  c.optimizer.accumulation_steps = accum
  c.mesh.num_devices = num_devices
  res = trainer.train_and_evaluate(run_spec.resolve(c), workdir, log=lambda *a, **k: None)
  print('RESULT ' + json.dumps({'devices': len(jax.devices()), **{
      k: v for k, v in res.items() if isinstance(v, (int, float, str))}}), flush=True)


for run in sys.argv[2:]:
  workdir, num_devices, accum = run.rsplit(':', 2)
  train(sys.argv[1], workdir, int(num_devices), int(accum))
