"""Throughput of the jitted train step (no input pipeline): clips/s and steps/s.

  python benchmarks/train_step.py [--config configs/synthetic.py:divided] [--batch_sizes 8,32]
                                  [--steps 30] [--devices N]

The step `vvt train` builds (`vvt.train.program`) on random inputs of the config's shape, with the config's
optimiser and loss; its schedule counts epochs of 100 batches. The first (compiling) step is excluded.
Speed is measured here only, never in tests.
"""
import argparse
import os
import sys
import time

import jax
import numpy as np

EPOCH_BATCHES = 100  # the schedule's epoch (throughput does not depend on it)


def random_batch(run, batch_size: int, rng) -> dict:
  """Float pixels (B, T, H, W, 3), labels and mask of the shape of RunSpec `run`."""
  return {'inputs': rng.normal(size=(batch_size, run.num_frames, *run.image_size, 3)).astype(np.float32),
          'label': rng.integers(0, int(run.model.num_classes), batch_size).astype(np.int32),
          'mask': np.ones((batch_size,), np.float32)}


def steps_per_second(step, state, batch, num_steps: int) -> float:
  """Updates per second of `step` after one compiling call."""
  state, _, status = step(state, batch)
  jax.block_until_ready(status)
  t0 = time.perf_counter()
  for _ in range(num_steps):
    state, _, status = step(state, batch)
  jax.block_until_ready(status)
  return num_steps / (time.perf_counter() - t0)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument('--config', default="configs/synthetic.py:divided")
  ap.add_argument('--batch_sizes', default='8,32')
  ap.add_argument('--steps', type=int, default=30)
  ap.add_argument('--devices', type=int, default=-1)
  args = ap.parse_args()
  from vvt.config import loader as config_loader
  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  mesh = mesh_lib.mesh_of_axes(None, jax.devices()[:args.devices] if args.devices > 0 else None)
  for i, bs in enumerate(int(b) for b in args.batch_sizes.split(',')):
    run = config_loader.load_run(args.config, [('batch_size', str(bs))], files=(), init=False)
    if i == 0:
      m = run.model
      print(f'{args.config}: {m.family}/{m.attention}, {m.num_frames}x{m.image_size[0]}x{m.image_size[1]}, '
            f'{mesh.devices.size} device(s) [{jax.devices()[0].platform}]')
    program = program_lib.build_program(run, mesh, num_train_videos=EPOCH_BATCHES * bs)
    state = program.init_state(jax.random.PRNGKey(0))
    batch = mesh_lib.global_batch(random_batch(run, bs, np.random.default_rng(0)), mesh, bs, program.logical_rules)
    rate = steps_per_second(program.training.step, state, batch, args.steps)
    print(f'  batch {bs:4d}: {rate:7.2f} steps/s  {rate * bs:8.1f} clips/s')


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())
