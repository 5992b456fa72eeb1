"""One contrastive training step (task retrieval) against one classification step of the same video tower: memory
and time.

  python benchmarks/contrastive_step.py [--config configs/synthetic_video_text.py] [--batch_size 8] [--steps 5]

Both programs are `vvt train`'s (`vvt.train.program`), built from the same config: the video-text model with
`task.name='retrieval'` (one caption of `model.text.max_length` tokens per video: the video tower, the text tower
and the symmetric InfoNCE over the batch), and the same video tower with a classification head of 10 classes
(`model.text=None`, softmax cross-entropy). Memory: XLA's compiled memory analysis of the jitted step (temporary
buffers, nothing executed); time: the mean of `--steps` executed steps after the compiling one. Speed is measured
here only, never in tests.
"""
import argparse
import os
import sys

import jax
import numpy as np
import train_step  # benchmarks/train_step.py, beside this script

EPOCH_BATCHES = 100


def random_batch(run, task, batch_size: int, rng) -> dict:
  """Float pixels (B, T, H, W, 3), mask, and the task's targets (`label_specs`) filled with ones: class 1, token 1,
  every token real."""
  batch = {'inputs': rng.normal(size=(batch_size, run.num_frames, *run.image_size, 3)).astype(np.float32),
           'mask': np.ones((batch_size,), np.float32)}
  batch.update({k: np.ones(shape, dtype) for k, (shape, dtype) in task.label_specs(batch_size).items()})
  return batch


def measure(config: str, overrides, batch_size: int, steps: int, mesh) -> tuple:
  """(temp memory MiB, seconds per step) of the train step of `config` with `overrides`."""
  from vvt.config import loader
  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  run = loader.load_run(config, [('batch_size', str(batch_size)), *overrides], files=(), init=False)
  program = program_lib.build_program(run, mesh, num_train_videos=EPOCH_BATCHES * batch_size)
  state = program.init_state(jax.random.PRNGKey(0))
  batch = mesh_lib.global_batch(random_batch(run, program.task, batch_size, np.random.default_rng(0)), mesh,
                                batch_size, program.logical_rules)
  step = program.training.step
  memory = step.lower(state, batch).compile().memory_analysis().temp_size_in_bytes / 2**20
  return memory, 1.0 / train_step.steps_per_second(step, state, batch, steps)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument('--config', default='configs/synthetic_video_text.py')
  ap.add_argument('--batch_size', type=int, default=8)
  ap.add_argument('--steps', type=int, default=5)
  args = ap.parse_args()
  from vvt.train import mesh as mesh_lib
  mesh = mesh_lib.mesh_of_axes(None, None)
  runs = {'contrastive (task retrieval)': [('task.name', 'retrieval'), ('dataset.captions', '1')],
          'classification (same video tower)': [('model.text', 'None'), ('num_classes', '10')]}
  print(f'{args.config}, batch {args.batch_size}, {mesh.devices.size} device(s) [{jax.devices()[0].platform}]')
  got = {}
  for name, overrides in runs.items():
    got[name] = measure(args.config, overrides, args.batch_size, args.steps, mesh)
    print(f'  {name:36s} temp memory {got[name][0]:8.1f} MiB  {got[name][1]:.3f} s/step')
  (mc, tc), (mk, tk) = got.values()
  print(f'  ratio contrastive / classification: memory {mc / mk:.2f}x, time {tc / tk:.2f}x')


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(main())
