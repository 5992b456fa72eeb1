"""Throughput of the jitted train step (no input pipeline): clips/s and steps/s.

  python benchmarks/train_step.py [--config configs/synthetic.py:divided] [--batch_sizes 8,32]
                                  [--steps 30] [--devices N]

Random inputs of the config's shape, the config's optimiser and loss; the first
(compiling) step is excluded. Speed is measured here only, never in tests.
"""
import argparse
import os
import sys
import time

import jax
import numpy as np


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument('--config', default="configs/synthetic.py:divided")
  ap.add_argument('--batch_sizes', default='8,32')
  ap.add_argument('--steps', type=int, default=30)
  ap.add_argument('--devices', type=int, default=-1)
  args = ap.parse_args()
  from vvt.cli import config as config_loader
  from vvt.train import mesh as mesh_lib, model_state, optimizers, steps
  config = config_loader.load(args.config, files=(), init=False)
  mesh = mesh_lib.make_mesh(args.devices)
  m = config.model
  print(f'{args.config}: {m.family}/{m.attention}, {m.num_frames}x{m.image_size}^2, '
        f'{mesh.devices.size} device(s) [{jax.devices()[0].platform}]')
  for bs in [int(b) for b in args.batch_sizes.split(',')]:
    config.batch_size = bs
    sched = optimizers.make_schedule(config.schedule, 1000, 100)
    tx = optimizers.make_optimizer(config.optimizer, sched)
    module = model_state.build_model(config)
    init_fn = model_state.init_fn(module, config, tx)
    state = jax.jit(init_fn, out_shardings=mesh_lib.replicated(mesh))(jax.random.PRNGKey(0))
    step = steps.make_train_step(module, tx, sched, config, mesh)
    rng = np.random.default_rng(0)
    batch = {'inputs': rng.normal(size=(bs, m.num_frames, m.image_size, m.image_size, 3)
                                  ).astype(np.float32),
             'label': rng.integers(0, int(m.num_classes), bs).astype(np.int32),
             'mask': np.ones((bs,), np.float32)}
    gb = mesh_lib.global_batch(batch, mesh, bs)
    state, _, status = step(state, gb)
    jax.block_until_ready(status)
    t0 = time.perf_counter()
    for _ in range(args.steps):
      state, _, status = step(state, gb)
    jax.block_until_ready(status)
    dt = time.perf_counter() - t0
    print(f'  batch {bs:4d}: {args.steps / dt:7.2f} steps/s  {args.steps * bs / dt:8.1f} clips/s')


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())
