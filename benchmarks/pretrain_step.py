"""A VideoMAE step (task.name='mae', 90% tube masking: the encoder on the visible tokens, the narrow decoder on
all of them) against the same model's unmasked step (classification: the encoder on every token), same batch, on
this machine: the two steps interleaved (ABAB...), the ratio of their median times (wall and the process's CPU
time, which holds better on a shared machine), TFLOP/s and MFU counted on the work each step does (XLA's cost
analysis of the compiled step: the masked encoder's gathered tokens only), and the compiled step's memory.

  python benchmarks/pretrain_step.py [--config configs/kinetics400/videomae_b.py] [--batch_size 4] [--steps 5]
                                     [--recipe] [--config.FIELD=VALUE ...]

By default a ViT-S/16-sized model of 6 blocks (width 384, 6 heads) on 16 frames of 112^2 (2x16x16 tubelets: a
grid of 8 x 7 x 7 = 392 tokens, 8 x 5 = 40 of them visible at 90%) with a 2-block decoder of width 192: what a CPU
runs in seconds. `--recipe`: the config as it is (VideoMAE-B: ViT-B/16 on 16 x 224^2, 1568 tokens, 8 x 20 = 160
visible; decoder 4 x 384). MFU is against the measured float32 matmul rate of this host (`vvt.train.flops`). The
first (compiling) step is excluded. Speed is measured here only, never in tests.
"""
import argparse
import os
import sys
import time

import jax
import numpy as np

SMALL = [('num_frames', '16'), ('image_size', '112'), ('model.variant', 'S/16x2'), ('model.hidden_size', '384'),
         ('model.num_layers', '6'), ('model.num_heads', '6'), ('model.mlp_dim', '1536'),
         ('task.mae.decoder_depth', '2'), ('task.mae.decoder_width', '192'), ('task.mae.decoder_heads', '3'),
         ('task.mae.mask_ratio', '0.9')]


def memory_bytes(compiled) -> int:
  """Arguments + outputs + temporaries of a compiled step, less what outputs alias (donated state)."""
  m = compiled.memory_analysis()
  return int(m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes - m.alias_size_in_bytes)


def build(run, mesh, batch_size: int) -> dict:
  """The train step of RunSpec `run` on a random batch, after its compiling call: {step, state, batch, flops,
  bytes}."""
  from vvt.train import flops
  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  program = program_lib.build_program(run, mesh, num_train_videos=100 * batch_size)
  rng = np.random.default_rng(0)
  batch = {'inputs': rng.normal(size=(batch_size, run.num_frames, *run.image_size, 3)).astype(np.float32),
           'mask': np.ones((batch_size,), np.float32)}
  for key, (shape, dtype) in program.task.label_specs(batch_size).items():
    batch[key] = np.zeros(shape, dtype)
  batch = mesh_lib.global_batch(batch, mesh, batch_size, program.logical_rules)
  state = program.init_state(jax.random.PRNGKey(0))
  compiled = program.training.step.lower(state, batch).compile()
  state, _, status = program.training.step(state, batch)
  jax.block_until_ready(status)
  return {'step': program.training.step, 'state': state, 'batch': batch, 'flops': flops.compiled_flops(compiled),
          'bytes': memory_bytes(compiled)}


def interleaved(steps: dict, rounds: int) -> dict:
  """{name: (median wall seconds, median CPU seconds of this process) per step} of the built `steps`, called in
  turn (ABAB...) `rounds` times each, so that a change of the machine's load falls on all of them alike."""
  times = {name: ([], []) for name in steps}
  for _ in range(rounds):
    for name, s in steps.items():
      wall, cpu = time.perf_counter(), time.process_time()
      s['state'], _, status = s['step'](s['state'], s['batch'])
      jax.block_until_ready(status)
      times[name][0].append(time.perf_counter() - wall)
      times[name][1].append(time.process_time() - cpu)
  return {name: (float(np.median(w)), float(np.median(c))) for name, (w, c) in times.items()}


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument('--config', default='configs/kinetics400/videomae_b.py')
  ap.add_argument('--batch_size', type=int, default=4)
  ap.add_argument('--steps', type=int, default=5)
  args, rest = ap.parse_known_args()
  extra = [tuple(a[len('--config.'):].split('=', 1)) for a in rest if a.startswith('--config.')]
  ap.add_argument('--recipe', action='store_true', help="the config's own model size, not the small one")
  args, rest = ap.parse_known_args()
  extra = [tuple(a[len('--config.'):].split('=', 1)) for a in rest if a.startswith('--config.')]
  from vvt.config import loader as config_loader
  from vvt.train import flops
  from vvt.train import mesh as mesh_lib
  mesh = mesh_lib.mesh_of_axes(None, jax.devices()[:1])
  common = ([] if args.recipe else SMALL) + extra + [('batch_size', str(args.batch_size))]
  mae = config_loader.load_run(args.config, common, files=(), init=False)
  full = config_loader.load_run(args.config, common + [('task.name', 'classification'), ('num_classes', '10')],
                                files=(), init=False)
  peak = flops.measured_matmul_rate('float32')
  m = mae.model
  print(f'{args.config}: {m.family}/{m.attention} width {m.hidden_size} x {m.num_layers} blocks, '
        f'{m.num_frames}x{m.image_size[0]}x{m.image_size[1]}, grid {"x".join(map(str, m.grid))}, '
        f'mask ratio {mae.task.mae.mask_ratio}, batch {args.batch_size}, {jax.devices()[0].platform} '
        f'({os.cpu_count()} cores), float32 matmul {peak / 1e9:.1f} GFLOP/s')
  built = {'unmasked (classification)': build(full, mesh, args.batch_size),
           f'mae, {mae.task.mae.mask_ratio:.0%} masked': build(mae, mesh, args.batch_size)}
  medians = interleaved(built, args.steps)
  for name, b in built.items():
    wall, cpu = medians[name]
    tflops = b['flops'] / wall / 1e12
    print(f'  {name:27s} {1 / wall:7.3f} steps/s  {cpu:7.2f} CPU s/step  {b["flops"] / 1e9:8.1f} GFLOP/step  '
          f'{tflops:6.3f} TFLOP/s  MFU {tflops * 1e12 / peak:5.1%}  memory {b["bytes"] / 2**20:7.1f} MiB')
  (a, wall_a, cpu_a), (b, wall_b, cpu_b) = [(built[k], *medians[k]) for k in built]
  print(f'  speed-up of the masked step (ratio of medians, {args.steps} interleaved steps each): '
        f'{wall_a / wall_b:.2f}x wall, {cpu_a / cpu_b:.2f}x CPU (FLOPs {a["flops"] / max(b["flops"], 1):.2f}x fewer)')


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())
