"""XLA:CPU compile options for tiny programs: the CPU seconds XLA spends compiling the test suite's kind of program
(a one-block model's loss and gradients, five attention schemes, einsum and chunked attention) under several
XLA_FLAGS sets, and what the compiled programs then cost to run.

    .venv/bin/python benchmarks/compile_options.py [--rounds 3] [--runs 20] [--json OUT]

Each round starts one fresh process per option set, in a rotating order (so no set always runs first), with
jax's compilation cache off. A process compiles the five programs (`jax.jit(jax.value_and_grad(loss))` of a
1-block model on a (2, 4, 16, 16, 3) clip), then runs each `--runs` times. It reports XLA's backend compile
time (jax's `/jax/core/compile/backend_compile_duration` events), the tracing and lowering time, the process's
CPU seconds for all of it, the run time of the compiled programs, and a checksum of their outputs. The figures to
read are the ratios to `default` within a round (a shared machine's speed drifts between minutes).

Option sets:
  default      nothing added
  opt0         --xla_backend_optimization_level=0               LLVM's optimisation of the generated code skipped
  tests        opt0 + --xla_cpu_use_fusion_emitters=false       and fusions emitted as LLVM IR directly, without
                                                                 the MLIR fusion emitters (tests/conftest.py)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = {
    'default': '',
    'opt0': '--xla_backend_optimization_level=0',
    'tests': '--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false',
}
# (row of tests/models/test_models.py's SCHEMES, attention_impl): einsum and the chunked kernel
PROGRAMS = ((0, 'einsum'), (0, 'chunked'), (5, 'einsum'), (8, 'chunked'), (14, 'chunked'))


def child(runs: int) -> dict:
  """In a fresh process: compile and run PROGRAMS; the figures as a dict."""
  import collections

  import jax
  import jax.numpy as jnp
  import numpy as np
  jax.config.update('jax_enable_compilation_cache', False)
  sums = collections.Counter()
  jax.monitoring.register_event_duration_secs_listener(lambda e, d, **k: sums.__setitem__(e, sums[e] + d))
  sys.path.insert(0, REPO)
  from tests.models.params import random_params
  from tests.models.test_models import SCHEMES
  from tests.models.test_models import tiny
  from tests.models.test_models import video
  import vvt.models as models
  from vvt.models import kernels
  kernels.CHUNK_SIZE, kernels.QUERY_TILE = 4, 4  # several tiles, as the tests run it
  x = video(b=2)
  w = jax.random.normal(jax.random.key(5), (2, 3))
  cpu0 = time.process_time()
  compiled, checksum = [], 0.0
  for row, impl in PROGRAMS:
    family, attention, kw = SCHEMES[row]
    module = models.build(tiny(family, attention, attention_impl=impl, **dict(kw, num_layers=1)))
    params = random_params(module, x)

    def loss(p, module=module):
      out = module.apply({'params': p}, x)
      return jnp.sum(w * out), out
    step = jax.jit(jax.value_and_grad(loss, has_aux=True))
    (_, out), grads = step(params)
    checksum += float(out.sum()) + sum(float(jnp.abs(g).sum()) for g in jax.tree.leaves(grads))
    compiled.append((step, params))
  compile_cpu = time.process_time() - cpu0
  cpu0 = time.process_time()
  for step, params in compiled:
    for _ in range(runs):
      jax.block_until_ready(step(params))
  run_cpu = time.process_time() - cpu0
  return {'backend_compile_s': sums['/jax/core/compile/backend_compile_duration'],
          'trace_and_lower_s': sums['/jax/core/compile/jaxpr_trace_duration']
          + sums['/jax/core/compile/jaxpr_to_mlir_module_duration'],
          'compile_cpu_s': compile_cpu, 'run_cpu_s': run_cpu, 'checksum': float(np.float32(checksum))}


def run_one(name: str, runs: int) -> dict:
  env = dict(os.environ, JAX_PLATFORMS='cpu', TF_CPP_MIN_LOG_LEVEL='3')
  env['XLA_FLAGS'] = ' '.join(filter(None, [env.get('XLA_FLAGS', ''), OPTIONS[name]]))
  out = subprocess.run([sys.executable, __file__, '--child', str(runs)], env=env, capture_output=True, text=True,
                       check=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  ap.add_argument('--rounds', type=int, default=3)
  ap.add_argument('--runs', type=int, default=20, help='runs of each compiled program')
  ap.add_argument('--json')
  ap.add_argument('--child', type=int, help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  if args.child is not None:
    print(json.dumps(child(args.child)))
    return 0
  names = list(OPTIONS)
  rounds = []
  for r in range(args.rounds):
    order = names[r % len(names):] + names[:r % len(names)]
    result = {}
    for name in order:
      result[name] = run_one(name, args.runs)
      print(f'round {r + 1} {name}: {result[name]}', file=sys.stderr, flush=True)
    rounds.append(result)
  print(f'{len(PROGRAMS)} programs, {args.rounds} rounds, {args.runs} runs of each; XLA_FLAGS of the environment: '
        f'{os.environ.get("XLA_FLAGS", "") or "none"}')
  print()
  print('| options | backend compile s (median) | / default, min / median | compile CPU s | / default | '
        'run CPU s | / default | checksum |')
  print('|---|---:|---:|---:|---:|---:|---:|---|')
  for name in names:
    med = {k: statistics.median(r[name][k] for r in rounds) for k in ('backend_compile_s', 'compile_cpu_s',
                                                                        'run_cpu_s')}
    ratio = [r[name]['backend_compile_s'] / r['default']['backend_compile_s'] for r in rounds]
    cpu_ratio = statistics.median(r[name]['compile_cpu_s'] / r['default']['compile_cpu_s'] for r in rounds)
    run_ratio = statistics.median(r[name]['run_cpu_s'] / r['default']['run_cpu_s'] for r in rounds)
    print(f'| {name} | {med["backend_compile_s"]:.1f} | {min(ratio):.2f} / {statistics.median(ratio):.2f} | '
          f'{med["compile_cpu_s"]:.1f} | {cpu_ratio:.2f} | {med["run_cpu_s"]:.2f} | {run_ratio:.2f} | '
          f'{rounds[0][name]["checksum"]:.6g} |')
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(dict(args=vars(args), options=OPTIONS, rounds=rounds), f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
