"""The ActionFormer head of `task.name='localization'`: params, memory of its train step, time per epoch.

  python benchmarks/localization.py [--recipes synthetic,thumos14] [--steps 5]

For each recipe of configs/localization.py, the train step of a localisation run (`vvt train`,
`vvt.train.localization`) on random feature sequences of the recipe's shape (synthetic: 32-dim features, 128 steps,
batch 4; THUMOS14: I3D's 2048-dim features, 2304 steps, batch 2): the head's params, XLA's compiled memory analysis
of the step (arguments: params, optimiser state, batch; temporaries), seconds per step (mean of `--steps` after the
compiling call) and the time of an epoch (the synthetic dataset has 30 training videos, THUMOS14's validation set
200).
Measured here only, never in tests.
"""
import argparse
import dataclasses
import time

import jax
import numpy as np

from configs import localization as recipes
from vvt.config import run_spec
from vvt.tasks import registry
from vvt.train import localization as loc_train
from vvt.train import optimizers
from vvt.train import state as state_lib

MIB = 2 ** 20
FEATURES = {'synthetic': 32, 'thumos14': 2048}


def random_batch(batch_size: int, length: int, dim: int, segments: int, rng) -> dict:
  starts = rng.uniform(0, length - 40, (batch_size, segments))
  return {'inputs': rng.normal(0, 1, (batch_size, length, dim)).astype(np.float32),
          'steps': np.ones((batch_size, length), bool),
          'segments': np.stack([starts, starts + rng.uniform(2, 40, starts.shape)], -1).astype(np.float32),
          'segment_labels': rng.integers(0, 20, (batch_size, segments)).astype(np.int32),
          'mask': np.ones((batch_size,), np.float32)}


def measure(recipe: str, steps: int, videos: int) -> dict:
  config = recipes.get_config(f'dir=unused,recipe={recipe}')
  run = run_spec.resolve(config, purpose='train')
  spec = run.task.localization
  task = dataclasses.replace(registry.task_of(run), num_classes=20, truth_segments=16)
  module = task.build_model()
  tx = optimizers.make_optimizer(run.optimizer, optimizers.make_schedule(run.schedule, 1000, 100))
  batch = random_batch(run.batch_size, spec.max_seq_len, FEATURES[recipe], 16, np.random.default_rng(0))
  params = jax.jit(module.init)(jax.random.PRNGKey(0), batch['inputs'][:1], batch['steps'][:1])['params']
  state, step = state_lib.create(params, tx, jax.random.PRNGKey(1)), loc_train.train_step(task, module, tx)
  t0 = time.perf_counter()
  compiled = step.lower(state, batch).compile()
  compile_s = time.perf_counter() - t0
  mem = compiled.memory_analysis()
  state, out = step(state, batch)
  jax.block_until_ready(out)
  t0 = time.perf_counter()
  for _ in range(steps):
    state, out = step(state, batch)
  jax.block_until_ready(out)
  per_step = (time.perf_counter() - t0) / steps
  count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))
  return {'recipe': recipe, 'params_m': count / 1e6, 'batch': run.batch_size, 'length': spec.max_seq_len,
          'args_mib': mem.argument_size_in_bytes / MIB, 'temp_mib': mem.temp_size_in_bytes / MIB,
          'compile_s': compile_s, 's_per_step': per_step,
          'epoch_s': per_step * int(np.ceil(videos[recipe] / run.batch_size))}


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--recipes', default='synthetic,thumos14')
  p.add_argument('--steps', type=int, default=5)
  a = p.parse_args(argv)
  videos = {'synthetic': 30, 'thumos14': 200}
  print(f'jax {jax.__version__}, {jax.devices()[0].platform}, {jax.device_count()} device(s)')
  print('| recipe | params (M) | batch x steps | args (MiB) | temp (MiB) | compile (s) | s/step | s/epoch |')
  print('|---|---:|---|---:|---:|---:|---:|---:|')
  for recipe in a.recipes.split(','):
    r = measure(recipe, a.steps, videos)
    print(f'| {r["recipe"]} | {r["params_m"]:.2f} | {r["batch"]} x {r["length"]} | {r["args_mib"]:.1f} | '
          f'{r["temp_mib"]:.1f} | {r["compile_s"]:.1f} | {r["s_per_step"]:.3f} | {r["epoch_s"]:.1f} |', flush=True)


if __name__ == '__main__':
  main()
