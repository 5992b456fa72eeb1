"""Attention implementations (model.attention_impl) at ViViT-B/16x2 Model 1's size: time and memory.

One attention call: q, k, v of (1, 3137, 12, 64) float32 (16 x 14 x 14 tokens + the class token, 12 heads of 64),
forward + backward (gradients of sum(w * out) w.r.t. q, k, v); and a whole ViViT-B/16x2 Model 1 forward at
batch 1 (32 x 224^2). Each (case, impl) runs in its own process, so peak memory is that impl's alone:

  temp   XLA's compiled memory analysis of the jitted function: temporary buffers (nothing executed)
  peak   the process's peak resident memory (ru_maxrss) after the runs, minus its value before compiling
  time   mean wall time of --repeats runs after one warm-up run

    .venv/bin/python benchmarks/attention.py                    # every case and impl, markdown table
    .venv/bin/python benchmarks/attention.py --cases attention --impls einsum,chunked
    .venv/bin/python benchmarks/attention.py --tpu v3           # + temp memory of the attention call compiled
                                                                #   for one TPU core, deviceless (libtpu)
    .venv/bin/python benchmarks/attention.py --cases attention --impls einsum,chunked,chunked_keys,torch_sdpa

Besides model.attention_impl values, --impls takes `chunked_keys` (chunked tiled by keys, the GPU / TPU tiling,
run on the CPU) and `torch_sdpa` (the peer: torch.nn.functional.scaled_dot_product_attention on the same
(1, 12, 3137, 64) tensors, forward + backward; attention case only; `pip install -e '.[bench]'`).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

IMPLS = ('einsum', 'chunked', 'dot_product')
CASES = ('attention', 'model')
SHAPE = (1, 16 * 14 * 14 + 1, 12, 64)  # (G, L, H, d_h)


def _rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _attention_fn(impl: str):
  import jax
  import jax.numpy as jnp

  from vvt.models import kernels

  def loss(q, k, v, w):
    if impl == 'chunked_keys':
      return jnp.sum(w * kernels.chunked_attention(q, k, v, tiling='keys'))
    return jnp.sum(w * kernels.dot_product_attention(q, k, v, impl=impl, backend='cpu'))
  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))


def _inputs(shape=SHAPE):
  import jax
  keys = jax.random.split(jax.random.key(0), 4)
  return [jax.random.normal(k, shape) for k in keys]


def _model(impl: str):
  import jax

  import vvt.models as models
  cfg = models.get_config('vivit', attention='spatiotemporal', variant='B/16x2', num_frames=32, image_size=224,
                          num_classes=400, attention_impl=impl)
  module = models.build(cfg, backend='cpu')
  video = jax.random.normal(jax.random.key(0), (1, 32, 224, 224, 3))
  params = jax.jit(module.init)(jax.random.key(1), video)['params']
  return jax.jit(lambda p, v: module.apply({'params': p}, v, train=False)), (params, video)


def torch_child(repeats: int) -> dict:
  """torch's scaled_dot_product_attention, forward + backward, on SHAPE's tensors (heads before tokens)."""
  import torch
  g, l, h, d = SHAPE
  q, k, v, w = (torch.randn(g, h, l, d, requires_grad=i < 3) for i in range(4))
  before = _rss_mib()

  def run():
    q.grad = k.grad = v.grad = None
    (w * torch.nn.functional.scaled_dot_product_attention(q, k, v)).sum().backward()

  run()  # warm-up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    run()
    times.append(time.perf_counter() - t0)
  return dict(case='attention', impl='torch_sdpa', compile_s=0.0,
              time_s=sum(times) / len(times), peak_mib=_rss_mib() - before)


def child(case: str, impl: str, repeats: int) -> dict:
  import jax
  if case == 'attention':
    fn, args = _attention_fn(impl), _inputs()
  else:
    fn, args = _model(impl)
  before = _rss_mib()
  t0 = time.perf_counter()
  compiled = fn.lower(*args).compile()
  compile_s = time.perf_counter() - t0
  mem = compiled.memory_analysis()
  jax.block_until_ready(compiled(*args))  # warm-up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(*args))
    times.append(time.perf_counter() - t0)
  return dict(case=case, impl=impl, temp_mib=mem.temp_size_in_bytes / 2 ** 20, compile_s=compile_s,
              time_s=sum(times) / len(times), peak_mib=_rss_mib() - before)


def tpu_child(version: str, impl: str) -> dict:
  """Temp memory of the attention fwd+bwd compiled for one TPU core of `version`, without a TPU."""
  os.environ.setdefault('ALLOW_MULTIPLE_LIBTPU_LOAD', '1')
  import jax
  from jax.experimental import topologies
  import jax.numpy as jnp

  from vvt.models import kernels
  topo = topologies.get_topology_desc(platform='tpu', topology_name=f'{version}:1x1')
  sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])
  args = [jax.ShapeDtypeStruct(SHAPE, jnp.float32, sharding=sharding) for _ in range(4)]

  def loss(q, k, v, w):
    return jnp.sum(w * kernels.dot_product_attention(q, k, v, impl=impl, backend='tpu'))
  compiled = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2))).lower(*args).compile()
  return dict(case=f'tpu_{version}', impl=impl, temp_mib=compiled.memory_analysis().temp_size_in_bytes / 2 ** 20)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--cases', default=','.join(CASES))
  parser.add_argument('--impls', default=','.join(IMPLS))
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--tpu', default='', help='also compile the attention call for this TPU version (v3, v4...)')
  parser.add_argument('--child', nargs=2, metavar=('CASE', 'IMPL'), help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.child:
    case, impl = args.child
    if case.startswith('tpu_'):
      result = tpu_child(case[4:], impl)
    elif impl == 'torch_sdpa':
      result = torch_child(args.repeats)
    else:
      result = child(case, impl, args.repeats)
    print('RESULT ' + json.dumps(result), flush=True)
    return 0
  env = dict(os.environ)
  env.setdefault('JAX_PLATFORMS', 'cpu')
  runs = [(c, i) for c in args.cases.split(',') for i in args.impls.split(',') if c == 'attention' or i != 'torch_sdpa']
  if args.tpu:
    runs += [(f'tpu_{args.tpu}', i) for i in ('einsum', 'chunked', 'splash')]
  results = []
  for case, impl in runs:
    child_env = dict(env, JAX_PLATFORMS='') if case.startswith('tpu_') else env
    proc = subprocess.run([sys.executable, __file__, '--child', case, impl, '--repeats', str(args.repeats)],
                          capture_output=True, text=True, env=child_env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')]
    if proc.returncode or not lines:
      print(f'{case} {impl}: failed\n{proc.stderr[-2000:]}', file=sys.stderr)
      continue
    results.append(json.loads(lines[-1][len('RESULT '):]))
    print(json.dumps(results[-1]), file=sys.stderr, flush=True)
  print('| case | impl | temp memory (MiB) | vs einsum | peak RSS (MiB) | vs einsum | time (s) | vs einsum |')
  print('|---|---|---:|---:|---:|---:|---:|---:|')
  for r in results:
    base = next((b for b in results if b['case'] == r['case'] and b['impl'] == 'einsum'), None)
    ratio = lambda key, r=r, base=base: f'{r[key] / base[key]:.2f}' if base and key in r and base.get(key) else ''
    fmt = lambda key, spec, r=r: format(r[key], spec) if key in r else ''
    print(f"| {r['case']} | {r['impl']} | {fmt('temp_mib', '.1f')} | {ratio('temp_mib')} | {fmt('peak_mib', '.0f')} | "
          f"{ratio('peak_mib')} | {fmt('time_s', '.2f')} | {ratio('time_s')} |")
  return 0


if __name__ == '__main__':
  sys.exit(main())
