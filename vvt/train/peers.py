"""A lost process in a multi-process run: every other process stops within a bounded time, naming it.

A process killed (SIGKILL, OOM, a host going down) leaves the others inside a collective that may never return
(NCCL / ICI wait; on CPU, gloo fails at once but orbax's commit barrier and jax's exit barrier then wait), and
jax's coordination service, after its own heartbeat timeout, aborts them with a native stack trace.

`PeerWatch` (one daemon thread per process, started once `jax.distributed` is up) sets the key
`vvt/heartbeat/<process>` of the coordination service's key-value store every `interval` seconds and reads the
others'. A process whose key has not changed for `timeout` seconds (`distributed.heartbeat_timeout_seconds`), or a
coordinator that cannot be reached for that long (process 0, which runs the service), is lost: the watching
process prints one line naming it (and where the last checkpoint is) and exits 1 at once, whatever its main thread
is waiting for. jax's own heartbeat timeout is set to twice vvt's (`jax_heartbeat_timeout`), so vvt's line comes
first. A process that finishes marks its key `done` (no longer watched). After an error in the main thread (a
collective failing because a peer is gone), `settle()` gives the watch one timeout to tell which process is lost.

A lost coordinator may also end this process before the watch does: jax's client aborts at once (a native fatal
record and stack trace) when its connection to the service breaks, and no Python code runs after that. So the
watch keeps, at each beat, where the last checkpoint is in the file named by `$VVT_STDERR_NOTE` (set by the
`vvt` program's stderr filter, `vvt.cli.native_stderr`), which puts vvt's line in place of that abort.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Callable, Optional

PREFIX = 'vvt/heartbeat/'
DONE = 'done'
NOTE_ENV = 'VVT_STDERR_NOTE'  # vvt.cli.native_stderr.NOTE_ENV


def jax_heartbeat_timeout(timeout_s: int) -> int:
  """jax.distributed's own heartbeat timeout for vvt's `timeout_s`: later, so that vvt names the lost process."""
  return 2 * int(timeout_s) + 5


class PeerWatch:
  """Heartbeats through the coordination service; see the module."""

  def __init__(self, client, process: int, num_processes: int, timeout_s: float,
               describe: Callable[[], str] = lambda: '', prog: str = 'vvt train'):
    self.client, self.me, self.n = client, process, num_processes
    self.timeout = float(timeout_s)
    self.interval = max(0.2, min(self.timeout / 5, 5.0))
    self.describe, self.prog = describe, prog
    now = time.monotonic()
    self.seen = {p: (None, now) for p in range(num_processes) if p != process}  # value, when it last changed
    self.changes = {p: 0 for p in self.seen}
    self.reached = now  # when the coordinator last answered
    self._stop = threading.Event()
    self._thread: Optional[threading.Thread] = None

  def start(self) -> 'PeerWatch':
    self._beat(0)
    self._thread = threading.Thread(target=self._run, name='vvt-peer-watch', daemon=True)
    self._thread.start()
    return self

  def stop(self) -> None:
    """This process is done: its key says so (the others stop watching it); the thread ends."""
    self._stop.set()
    try:
      self.client.key_value_set(f'{PREFIX}{self.me}', DONE, allow_overwrite=True)
    except Exception:
      pass

  def settle(self) -> None:
    """After an error in the main thread: waits until every other process has beaten since (the error is not a
    lost peer) or one timeout has passed; a lost peer found meanwhile ends this process with its line."""
    since, before = time.monotonic(), dict(self.changes)
    while time.monotonic() < since + self.timeout + 3 * self.interval:
      # two beats after the error: one may have been sent just before a peer died
      if all(self.seen[p][0] == DONE or self.changes[p] >= before[p] + 2 for p in self.seen):
        return
      time.sleep(0.1)

  def _beat(self, count: int) -> None:
    self.client.key_value_set(f'{PREFIX}{self.me}', str(count), allow_overwrite=True)

  def _run(self) -> None:
    count = 0
    while not self._stop.wait(self.interval):
      count += 1
      now = time.monotonic()
      try:
        self._beat(count)
        self.reached = now
        self._note()
      except Exception:
        if now - self.reached > self.timeout and not self._stop.is_set():
          self._lost(0, 'the coordinator, which runs jax\'s coordination service, cannot be reached')
        continue
      for p, (value, when) in list(self.seen.items()):
        try:
          new = self.client.key_value_try_get(f'{PREFIX}{p}')
        except Exception:  # (not set yet)
          new = value
        if new != value:
          self.seen[p] = (new, now)
          self.changes[p] += 1
        elif value != DONE and now - when > self.timeout and not self._stop.is_set():
          self._lost(p, f'no heartbeat for {self.timeout:g} s')

  def _note(self) -> None:
    """Where the last checkpoint is, for the stderr filter's line should jax abort this process (see the module)."""
    path = os.environ.get(NOTE_ENV)
    if not path:
      return
    try:
      where = self.describe()
      with open(path + '.tmp', 'w', encoding='utf-8') as f:
        f.write(where)
      os.replace(path + '.tmp', path)
    except Exception:  # (a note only)
      pass

  def _lost(self, process: int, why: str) -> None:
    try:
      where = self.describe()
    except Exception:
      where = ''
    print(f'{self.prog}: error: process {process} of {self.n} was lost ({why}: killed, crashed or its host is '
          f'down); process {self.me} stops' + (f'; {where}' if where else ''), file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def watch(timeout_s: float, describe: Callable[[], str] = lambda: '', prog: str = 'vvt train') -> Optional[PeerWatch]:
  """A started PeerWatch when this is one of several jax.distributed processes, else None."""
  import jax
  from jax._src import distributed
  client = getattr(distributed.global_state, 'client', None)
  if client is None or jax.process_count() < 2:
    return None
  return PeerWatch(client, jax.process_index(), jax.process_count(), timeout_s, describe, prog).start()
