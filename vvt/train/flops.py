"""FLOPs of a compiled step (XLA's cost analysis) and a measured matmul rate for hosts without a peak table entry.

  flops = compiled_flops(step.lower(state, batch).compile())    # per device, a multiply-add counts 2
  flops = step_flops(step, state, batch)                        # the same for a jitted step already called
  rate = measured_matmul_rate('float32')                        # FLOP/s of an n^3 matmul on this device

XLA counts what it executes as HLO: dots, convolutions and elementwise ops; a custom call (cuDNN / splash
attention) counts nothing and a loop body (`chunked` attention, scanned layers) counts once. One loop is put
right: gradient accumulation scans the step's micro-batches, so `train_step_flops` multiplies XLA's count of
such a step by `optimizer.accumulation_steps` (the step `vvt memory` plans and whose MFU `vvt train` logs).
"""
import time


def compiled_flops(compiled) -> float:
  """FLOPs per device of one call of `compiled` (a `jax.stages.Compiled`), 0 where XLA gives none."""
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float((cost or {}).get('flops', 0.0))


def train_step_flops(compiled_count: float, accumulation_steps: int) -> float:
  """FLOPs of a train step from XLA's count of it (`compiled_flops`). A step of `accumulation_steps` > 1 scans
  its micro-batches, and XLA counts the scan's body, one micro-batch's forward and backward pass, once: the count
  times the micro-batches is the step's (the optimiser's update, outside the scan, is then counted that many times
  too: a few FLOPs per parameter against the passes' 6 per parameter per token, so a fraction of a percent of a
  real model's step; 2% of the tests' toy, which has 16 tokens a clip)."""
  return compiled_count * max(1, int(accumulation_steps))


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
