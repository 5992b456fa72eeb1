"""Model benchmark: training-step memory (XLA's compiled memory analysis, no execution) with and without
remat and bf16 for full-size configs, and measured step time for a small config on this machine.

    .venv/bin/python benchmarks/models.py [--quick]

Prints a Markdown table for BENCHMARKS.md.
"""
import argparse
import os
import platform
import time

os.environ.setdefault('JAX_PLATFORMS', 'cpu')

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import vvt.models as models  # noqa: E402


def train_step_fn(module):
  def loss(params, video, labels, key):
    logits = module.apply({'params': params}, video, train=True, rngs={'dropout': key})
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, logits.shape[-1]), -1))
  return jax.jit(jax.value_and_grad(loss))


def abstract_inputs(cfg, batch):
  rcfg = models.resolve(cfg)
  module = models.build(rcfg)
  video = jax.ShapeDtypeStruct((batch, rcfg.num_frames, rcfg.image_size, rcfg.image_size, 3), jnp.float32)
  params = jax.eval_shape(lambda v: module.init({'params': jax.random.key(0)}, v), video)['params']
  labels = jax.ShapeDtypeStruct((batch,), jnp.int32)
  return module, params, video, labels


def memory_gib(cfg, batch):
  module, params, video, labels = abstract_inputs(cfg, batch)
  compiled = train_step_fn(module).lower(params, video, labels, jax.random.key(0)).compile()
  m = compiled.memory_analysis()
  return m.temp_size_in_bytes / 2**30


def step_time(cfg, batch, steps=5):
  module, params, video, labels = abstract_inputs(cfg, batch)
  params = jax.jit(lambda v: module.init({'params': jax.random.key(0)}, v))(jnp.zeros(video.shape))['params']
  video = jax.random.normal(jax.random.key(1), video.shape)
  labels = jnp.zeros(labels.shape, jnp.int32)
  step = train_step_fn(module)
  jax.block_until_ready(step(params, video, labels, jax.random.key(0)))
  start = time.perf_counter()
  for i in range(steps):
    jax.block_until_ready(step(params, video, labels, jax.random.key(i)))
  return (time.perf_counter() - start) / steps


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument('--quick', action='store_true', help='only the small timed config')
  args = parser.parse_args()
  print(f'machine: {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, {jax.devices()[0].platform}')
  if not args.quick:
    print('\n| model (train step, batch 4) | dtype | remat | temp memory (GiB) |\n|---|---|---|---:|')
    for name, cfg in [
        ('TimeSformer-B/16 divided 8x224', models.get_config('timesformer', attention='divided')),
        ('ViViT-B/16x2 FE 32x224', models.get_config('vivit', attention='factorised_encoder')),
    ]:
      for dtype in ('float32', 'bfloat16'):
        for remat in (False, True):
          c = cfg.copy_and_resolve_references()
          c.dtype, c.remat = dtype, remat
          print(f'| {name} | {dtype} | {remat} | {memory_gib(c, 4):.2f} |', flush=True)
  print('\n| small model (train step, batch 8) | dtype | s/step |\n|---|---|---:|')
  for dtype in ('float32', 'bfloat16'):
    c = models.get_config('timesformer', attention='divided', variant='Ti/16', num_frames=8, image_size=112,
                          num_classes=10, dtype=dtype)
    print(f'| TimeSformer-Ti/16 divided 8x112 | {dtype} | {step_time(c, 8):.3f} |', flush=True)


if __name__ == '__main__':
  main()
