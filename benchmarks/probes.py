"""Frozen-backbone probes: 1 vs N probes in one run (`task.name='probe'`), time per step and memory.

  python benchmarks/probes.py [--config configs/synthetic.py:divided] [--batch_size 8] [--probes 1,20]
                              [--heads linear,attentive] [--steps 10] [--set FIELD=VALUE ...]

For each head and number of probes (a grid of N learning rates x 1 weight decay): the train step `vvt train`
builds (`vvt.train.program`) on random inputs of the config's shape; seconds per step (mean of `--steps` after
the compiling call) and XLA's compiled memory analysis of the step (arguments: params, optimiser state, batch;
temporaries). The first row is the same backbone fine-tuned (classification) for reference. Speed and memory
are measured here only, never in tests.
"""
import argparse
import os
import sys
import time

import jax
import numpy as np

EPOCH_BATCHES = 100
MIB = 2 ** 20


def random_batch(config, batch_size: int, rng) -> dict:
  t, s = int(config.num_frames), int(config.image_size)
  return {'inputs': rng.integers(0, 255, size=(batch_size, t, s, s, 3)).astype(np.uint8),
          'label': rng.integers(0, int(config.model.num_classes), batch_size).astype(np.int32),
          'mask': np.ones((batch_size,), np.float32)}


def measure(config, mesh, batch_size: int, steps: int) -> dict:
  """{s_per_step, opt_state_mib, temp_mib, args_mib} of the config's train step."""
  from vvt.config import run_spec
  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  run = run_spec.resolve(config, purpose='train')
  program = program_lib.build_program(run, mesh, num_train_videos=EPOCH_BATCHES * batch_size)
  state = program.init_state(jax.random.PRNGKey(0))
  batch = mesh_lib.global_batch(random_batch(config, batch_size, np.random.default_rng(0)), mesh, batch_size,
                                program.logical_rules)
  mem = program.training.step.lower(state, batch).compile().memory_analysis()
  state, _, status = program.training.step(state, batch)
  jax.block_until_ready(status)
  t0 = time.perf_counter()
  for _ in range(steps):
    state, _, status = program.training.step(state, batch)
  jax.block_until_ready(status)
  opt = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.opt_state))
  return dict(s_per_step=(time.perf_counter() - t0) / steps, opt_state_mib=opt / MIB,
              temp_mib=mem.temp_size_in_bytes / MIB, args_mib=mem.argument_size_in_bytes / MIB)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument('--config', default='configs/synthetic.py:divided')
  ap.add_argument('--batch_size', type=int, default=8)
  ap.add_argument('--probes', default='1,20')
  ap.add_argument('--heads', default='linear,attentive')
  ap.add_argument('--steps', type=int, default=10)
  ap.add_argument('--set', nargs='*', default=[], help='config overrides FIELD=VALUE (e.g. model.hidden_size=192)')
  args = ap.parse_args()
  from vvt.config import loader as config_loader
  from vvt.train import mesh as mesh_lib
  overrides = [tuple(kv.split('=', 1)) for kv in args.set]
  config = config_loader.load(args.config, overrides, files=(), init=False)
  config.batch_size = args.batch_size
  config.optimizer.name, config.schedule.base_lr = 'adamw', 1e-3
  mesh = mesh_lib.make_mesh(-1)
  m = config.model
  print(f'{args.config} {" ".join(args.set)}: {m.family}/{m.attention} {config.num_frames}x{config.image_size}^2, '
        f'batch {args.batch_size}, {jax.devices()[0].platform}')
  print('| run | s/step | optimiser state (MiB) | arguments (MiB) | temporaries (MiB) |')
  print('|---|---:|---:|---:|---:|')

  def row(name, r):
    print(f'| {name} | {r["s_per_step"]:.3f} | {r["opt_state_mib"]:.2f} | {r["args_mib"]:.1f} | '
          f'{r["temp_mib"]:.1f} |', flush=True)

  row('fine-tune (classification)', measure(config, mesh, args.batch_size, args.steps))
  config.task.name = 'probe'
  for head in args.heads.split(','):
    for n in [int(x) for x in args.probes.split(',')]:
      config.task.probe.head = head
      config.task.probe.lrs, config.task.probe.weight_decays = tuple(1e-3 * 0.7 ** i for i in range(n)), (0.01,)
      row(f'{n} {head} probe(s)', measure(config, mesh, args.batch_size, args.steps))


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())
