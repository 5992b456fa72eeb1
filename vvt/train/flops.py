"""FLOPs of a compiled step (XLA's cost analysis) and a measured matmul rate for hosts without a peak table entry.

  flops = compiled_flops(step.lower(state, batch).compile())    # per device, a multiply-add counts 2
  flops = step_flops(step, state, batch)                        # the same for a jitted step already called
  rate = measured_matmul_rate('float32')                        # FLOP/s of an n^3 matmul on this device

XLA counts what it executes as HLO: dots, convolutions and elementwise ops; a custom call (cuDNN / splash
attention) counts nothing and a loop body (`chunked` attention, scanned layers) counts once.
"""
import time


def compiled_flops(compiled) -> float:
  """FLOPs per device of one call of `compiled` (a `jax.stages.Compiled`), 0 where XLA gives none."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float((cost or {}).get('flops', 0.0))


def step_flops(jitted, *args) -> float:
  """FLOPs per device of `jitted(*args)`. After the step has run once its executable comes from jax's
  cache (no second compilation); donated (deleted) arguments are fine, only their shapes are read."""
  return compiled_flops(jitted.lower(*args).compile())


def measured_matmul_rate(dtype: str = 'float32', n: int = 1024, repeats: int = 3) -> float:
  """FLOP/s of the fastest of `repeats` (n, n) @ (n, n) matmuls in `dtype` on the default device."""
  import jax
  import jax.numpy as jnp
  a = jnp.ones((n, n), dtype)
  f = jax.jit(lambda x: x @ x)
  f(a).block_until_ready()
  best = float('inf')
  for _ in range(repeats):
    t = time.perf_counter()
    f(a).block_until_ready()
    best = min(best, time.perf_counter() - t)
  return 2.0 * n ** 3 / max(best, 1e-9)
