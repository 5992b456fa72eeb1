"""Subprocess helper for test_sharding: trains the tiny config on N devices.

argv: data_dir workdir num_devices accum
"""
import json
import sys

import jax

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import train_helpers  # noqa: E402

from vvt.config import run_spec  # noqa: E402
from vvt.train import trainer  # noqa: E402

data_dir, workdir, num_devices, accum = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = train_helpers.tiny_config(data_dir)
c.batch_size = 16
c.num_train_steps = 4
c.checkpoint.every_steps = 4
c.log_every_steps = 2
c.optimizer.accumulation_steps = accum
c.mesh.num_devices = num_devices
res = trainer.train_and_evaluate(run_spec.resolve(c), workdir, log=lambda *a, **k: None)
print('RESULT ' + json.dumps({'devices': len(jax.devices()), **{
    k: v for k, v in res.items() if isinstance(v, (int, float, str))}}))
