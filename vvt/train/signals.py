"""SIGINT (Ctrl-C) and SIGTERM (a preempted VM) during a training run: one line, never a traceback.

  record_early()                 from the very start of `vvt train` (before the heavy imports): a signal is
                                 recorded, not raised inside whatever library code happens to run
  with StopSignals(log) as stop: the trainer's handlers (they take over a signal recorded early)

What the first signal does depends on where the run is:
  start-up (`starting`)          recorded; `stop.check()` between the start-up phases (config checks, program,
                                 restore, init) raises `Interrupted`: no step was run, nothing to save
  training steps (`deferred`)    recorded; the loop saves a checkpoint at the step reached, then raises
  periodic evaluation            `Interrupted` at once (the state of the step before it is saved)
A second signal prints one line and exits at once (`os._exit(128 + signum)`): an asynchronous save in flight
stays uncommitted, the previous checkpoint is intact. A SIGTERM repeated within REPEAT_S of the first is the same
request delivered twice, and ignored. Once a signal was received the handlers stay installed until the
process ends: a signal after the run's one line (the interpreter shutting down, library threads ending) exits at
once, quietly.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_early: dict = {'signum': None, 'at': 0.0}
# A SIGTERM within this many seconds of the first SIGTERM is the same request delivered twice (a cluster signals
# every process of a job while a parent process, e.g. a sweep worker, passes its own on): it is ignored.
REPEAT_S = 3.0


def _repeated(first: Optional[int], first_at: float, signum: int) -> bool:
  """Whether `signum` repeats the first signal's SIGTERM within REPEAT_S (then it is not a second request)."""
  return first == signum == signal.SIGTERM and time.monotonic() - first_at < REPEAT_S


class Interrupted(KeyboardInterrupt):
  """A SIGINT / SIGTERM stopped the run (after saving a checkpoint if it was training).

  `exit_code` is 128 + the signal number (130 for SIGINT, 143 for SIGTERM), which the CLI returns.
  """

  def __init__(self, message: str, signum: int):
    super().__init__(message)
    self.signum = signum
    self.exit_code = 128 + signum


def signal_name(signum: int) -> str:
  return signal.Signals(signum).name


def _again(signum: int) -> None:
  print(f'vvt: {signal_name(signum)} again: exiting at once', file=sys.stderr, flush=True)
  os._exit(128 + signum)


def _exit_quietly(signum, frame):
  os._exit(128 + signum)


def _record_early(signum, frame):
  if _repeated(_early['signum'], _early['at'], signum):
    return
  if _early['signum'] is not None:
    _again(signum)
  _early['signum'], _early['at'] = signum, time.monotonic()


def record_early() -> dict:
  """Records SIGINT / SIGTERM from now on (main thread only), for `StopSignals` to act on. Returns the handlers
  it replaced, for `stop_recording`."""
  previous = {}
  if threading.current_thread() is threading.main_thread():
    _early['signum'] = None
    for sig in SIGNALS:
      previous[sig] = signal.signal(sig, _record_early)
  return previous


def stop_recording(previous: dict) -> None:
  """Puts back the handlers `record_early` replaced where it is still recording (the command ended before the
  trainer took over, e.g. on a config error); the trainer's own handlers stay."""
  for sig, handler in previous.items():
    if signal.getsignal(sig) is _record_early:
      signal.signal(sig, handler)
  _early['signum'] = None


class StopSignals:
  """SIGINT and SIGTERM handlers for a training run (main thread only; a no-op elsewhere): see the module."""

  SIGNALS = SIGNALS

  def __init__(self, log: Callable = print):
    self.signum: Optional[int] = _early['signum']
    self._first_at = _early['at']
    self.starting = True
    self.deferred = False
    self.log = log
    self._previous = {}

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for sig in self.SIGNALS:
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      if self.signum is not None:  # the run ends with its one line: a later signal ends it at once, quietly
        signal.signal(sig, _exit_quietly)
      else:
        signal.signal(sig, handler if handler is not _record_early else signal.default_int_handler
                      if sig == signal.SIGINT else signal.SIG_DFL)
    self._previous = {}
    return False

  def check(self) -> None:
    """Between start-up phases: `Interrupted` if a signal came (nothing was trained, nothing to save)."""
    if self.signum is not None and not self.deferred:
      name = signal_name(self.signum)
      raise Interrupted(f'interrupted ({name}) during start-up, before the first training step: nothing to '
                        'save', self.signum)

  def _handle(self, signum, frame):
    if _repeated(self.signum, self._first_at, signum):
      return
    if self.signum is not None:
      _again(signum)
    self.signum, self._first_at = signum, time.monotonic()
    name = signal_name(signum)
    if self.deferred:
      self.log(f'[train] {name}: saving a checkpoint at the step reached, then exiting '
               f'({name} again exits at once)')
    elif not self.starting:
      raise Interrupted(f'interrupted ({name})', signum)
