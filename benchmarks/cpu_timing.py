"""What the data benchmarks measure of a piece of work: wall-clock rate and CPU time of this process per item
(all its threads, a decoder's included)."""
import os
import time


def cpu_seconds() -> float:
  """User + system CPU seconds of this process so far."""
  t = os.times()
  return t.user + t.system


def timed(items: int, fn) -> dict:
  """Runs `fn()`: {'rate': items per wall-clock second, 'cpu_ms': CPU milliseconds per item}."""
  start, cpu = time.perf_counter(), cpu_seconds()
  fn()
  return {'rate': items / (time.perf_counter() - start), 'cpu_ms': 1000 * (cpu_seconds() - cpu) / items}
