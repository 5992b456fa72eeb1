"""Subprocess helper for test_multihost: one of two processes (argv: data_dir workdir port process_id
[mesh.axes as a Python literal, e.g. "{'fsdp': -1}": then every parameter of >= 256 elements is sharded])."""
import ast
import json
import sys

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import train_helpers  # noqa: E402

from vvt.config import run_spec  # noqa: E402
from vvt.train import trainer  # noqa: E402

data_dir, workdir, port, pid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = train_helpers.tiny_config(data_dir)
if len(sys.argv) > 5:
  c.mesh.axes = ast.literal_eval(sys.argv[5])
  c.mesh.fsdp_min_size = 256
c.num_train_steps = 4
c.checkpoint.every_steps = 2
c.log_every_steps = 2
c.distributed.initialize = True
c.distributed.coordinator_address = f'127.0.0.1:{port}'
c.distributed.num_processes = 2
c.distributed.process_id = pid
res = trainer.train_and_evaluate(run_spec.resolve(c), workdir, log=lambda *a, **k: None)
import jax  # noqa: E402

print('RESULT ' + json.dumps({'process': jax.process_index(), 'processes': jax.process_count(),
                              'devices': jax.device_count(), 'local_devices': jax.local_device_count(), **{
    k: v for k, v in res.items() if isinstance(v, (int, float, str))}}), flush=True)
