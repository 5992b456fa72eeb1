"""What a training run shows of its own speed: a `jax.profiler` trace of a few steps, and per log interval the
TFLOP/s per device, the model-FLOPs utilisation (MFU) and the share of time spent waiting for input.

  perf = Performance.of(run, workdir, is_chief, first_step, total_steps, log)   # run: the RunSpec
  it = perf.timed(iterator)              # time blocked in next(it) is counted as input wait
  perf.before_step(step + 1); ...; perf.after_step(step, state)       # starts / stops the trace
  perf.start(step, flops_per_device)     # after the first (compiling) step: FLOPs of the compiled step
  perf.scalars(step)                     # {'tflops_per_device', 'mfu', 'input_wait_fraction'} since the last call

`run.profile.steps` (a `ProfileSpec`): None (the default) traces steps first + AUTO_START .. first + AUTO_START +
AUTO_STEPS - 1 of this process's run (first: the step it started or resumed at), if the run has them; () traces nothing;
(A, B) traces optimiser steps A to B (1-based, as in metrics.jsonl). Only process 0 traces. The trace goes to
WORKDIR/tensorboard/plugins/profile/<time>/ (`<host>.xplane.pb` for TensorBoard's profile plugin / XProf,
`perfetto_trace.json.gz` for ui.perfetto.dev). Setting AUTO_OFF_ENV=0 in the environment turns the default
trace off (the test suite does); an explicit `profile.steps` still traces.

TFLOP/s per device: FLOPs of one step from XLA's cost analysis of the compiled step, once per run (its shapes
are fixed: one compile), times steps per second of wall time. MFU: that over the device's peak rate
(`vvt.train.peaks`); on a CPU, which has no published peak, over the rate of a 1024^3 matmul in the model's
dtype measured once at the start (the log line says which). input_wait_fraction: seconds blocked on the data
iterator over the wall time of the interval.
"""
import os
import time
from typing import Callable, Iterator, Optional

from vvt.train import flops as flops_lib
from vvt.train import peaks

AUTO_START, AUTO_STEPS = 5, 3
AUTO_OFF_ENV = 'VVT_DEFAULT_PROFILE'
TRACE_DIR = 'tensorboard'


def check_window(run, num_train_videos: int) -> None:
  """ConfigError naming `profile.steps` when the steps it traces start after the last step of RunSpec `run` on a
  training set of `num_train_videos` (no trace would be written); a run of `num_train_steps` is checked as its
  config is validated (`vvt.config.validation`), a run of epochs here, once its length is known."""
  from vvt.config import validation
  from vvt.config.errors import ConfigError
  from vvt.train import program
  epoch = program.steps_per_epoch(num_train_videos, run.batch_size)
  total = program.total_steps(run.num_train_steps, run.num_epochs, epoch)
  given = f'num_epochs={run.num_epochs}, {epoch} steps per epoch' if run.num_train_steps <= 0 else \
      f'num_train_steps={total}'
  line = validation.profile_past_end(run.profile.steps, total, f' ({given})')
  if line:
    raise ConfigError(line)


def trace_window(steps, first_step: int, total_steps: int) -> Optional[tuple[int, int]]:
  """(A, B): the optimiser steps to trace, or None. `steps` is `run.profile.steps`."""
  if steps is None:
    if os.environ.get(AUTO_OFF_ENV, '1') == '0':
      return None
    a = first_step + AUTO_START
    b = a + AUTO_STEPS - 1
  elif len(steps) == 0:
    return None
  else:
    a, b = int(steps[0]), int(steps[1])
  if a <= first_step or a > total_steps:
    return None  # already done (a resumed run) or beyond the run
  return a, min(b, total_steps)


class Performance:
  """The trace window and the per-interval performance scalars of one training loop."""

  def __init__(self, window: Optional[tuple[int, int]], trace_dir: str, peak: Optional[peaks.Peak],
               log: Callable = print):
    self.window = window
    self.trace_dir = trace_dir
    self.peak = peak
    self.log = log
    self.tracing = False
    self.flops_per_device = 0.0
    self.waited = 0.0
    self._last_t = None
    self._last_step = 0

  @classmethod
  def of(cls, run, workdir: str, is_chief: bool, first_step: int, total_steps: int,
         log: Callable = print) -> 'Performance':
    """The performance of a run's training loop (`run`: its RunSpec: `profile.steps`, `model.dtype`)."""
    import jax
    window = trace_window(run.profile.steps, first_step, total_steps) if is_chief else None
    device = jax.devices()[0]
    dtype = str(run.model.dtype)
    if device.platform == 'cpu':
      rate = flops_lib.measured_matmul_rate(dtype)
      peak = peaks.Peak(rate / 1e12, f'no published CPU peak: measured 1024^3 {dtype} matmul on this host, '
                                     f'{rate / 1e9:.1f} GFLOP/s')
    else:
      peak = peaks.peak_for(device.device_kind, dtype, peaks.matmul_precision())
    if peak is None:
      log(f'[train] mfu: no peak rate known for {device.device_kind!r} ({dtype}); mfu is not logged')
    else:
      log(f'[train] mfu against: {peak.basis}')
    return cls(window, f'{workdir.rstrip("/")}/{TRACE_DIR}', peak, log)

  # ----------------------------------------------------------------------------- input wait

  def timed(self, iterator: Iterator) -> Iterator:
    """`iterator`, the seconds blocked in each `next` added to the input wait."""
    while True:
      t = time.perf_counter()
      try:
        item = next(iterator)
      except StopIteration:
        return
      self.waited += time.perf_counter() - t
      yield item

  # ----------------------------------------------------------------------------- trace

  def before_step(self, step: int) -> None:
    """Starts the trace before optimiser step `step` is dispatched, if it opens the window."""
    if self.window and step == self.window[0] and not self.tracing:
      import jax
      jax.profiler.start_trace(self.trace_dir, create_perfetto_trace=True)
      self.tracing = True

  def after_step(self, step: int, state) -> None:
    """Stops the trace once step `step`, the window's last, has finished."""
    if self.tracing and step >= self.window[1]:
      import jax
      jax.block_until_ready(state)
      jax.profiler.stop_trace()
      self.tracing = False
      self.log(f'[train] profile of steps {self.window[0]}-{self.window[1]}: {self.trace_dir}/plugins/profile '
               '(TensorBoard profile plugin, or perfetto_trace.json.gz in ui.perfetto.dev)')

  def close(self) -> None:
    """Stops a trace still running (the loop ended inside the window)."""
    if self.tracing:
      import jax
      jax.profiler.stop_trace()
      self.tracing = False

  # ----------------------------------------------------------------------------- scalars

  def start(self, step: int, flops_per_device: float) -> None:
    """After the first (compiling) step: intervals are timed from here; the compiled step's FLOPs."""
    self.flops_per_device = float(flops_per_device)
    self._last_t, self._last_step, self.waited = time.perf_counter(), step, 0.0

  def scalars(self, step: int) -> dict:
    """tflops_per_device, mfu (where a peak is known) and input_wait_fraction since the last call."""
    if self._last_t is None or step <= self._last_step:
      return {}
    now = time.perf_counter()
    dt = max(now - self._last_t, 1e-9)
    tflops = self.flops_per_device * (step - self._last_step) / dt / 1e12
    out = {'tflops_per_device': tflops, 'input_wait_fraction': min(1.0, self.waited / dt)}
    if self.peak is not None and self.peak.tflops > 0:
      out['mfu'] = tflops / self.peak.tflops
    self._last_t, self._last_step, self.waited = now, step, 0.0
    return out
