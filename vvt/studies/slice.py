"""A multi-process JAX job as ONE sweep worker: all hosts of a TPU slice (or of several slices run as one program),
the tasks of a SLURM step, or processes given `--config.distributed.*` run `vvt sweep DIR` each, and together they
train one trial at a time as one program.

How the processes agree (jax.distributed's key-value store; no device is touched by `vvt sweep`):

  join     every process calls `jax.distributed.initialize` as `vvt train` would (the `distributed.*` fields given
           to `vvt sweep`, or jax's own detection on Cloud TPU VMs, GKE and SLURM): the *sweep's* coordinator at
           HOST:PORT; process 0 first checks that PORT is free on its host (`vvt.train.coordinator`: one line
           naming the port, instead of two coordinators sharing it).
  round r  process 0 claims the next trial like any worker (`vvt.studies.claims`: it alone claims and renews),
           picks a free port of its host for the trial's trainers (each trainer initialises jax.distributed itself,
           with its own coordinator: HOST:that port) and sets `vvt/sweep/<r>` to {trial, index, attempt, argv,
           trainers}, or to {end} when no trial is left. The others read it (a blocking get, looped) and start
           `vvt train` with the same arguments plus their own
           `distributed.{initialize, coordinator_address, num_processes, process_id}` (`trainer_args`). The
           trainers' port is the OS's pick, not one beside the sweep's: slices started on adjacent ports of one host
           never meet at the same coordinator.
  done     each process sets `vvt/sweep/<r>/done/<p>` to its trainer's exit (code, last error line) once that has
           ended; process 0 records the trial only when every process has reported (finished: every trainer exited
           0 and the final evaluation is written) and only then claims the next one. A process whose trainer failed
           while process 0's still runs ends process 0's trainer too (it would wait for the missing process).

A lost process (killed, out of memory, its host down): every process watches the others' heartbeats in the sweep's
store (`vvt.train.peers`, `distributed.heartbeat_timeout_seconds`; a trainer watches its peers the same way). The
process that notices kills its trainer and stops, naming the lost process; process 0 first releases its claim as
interrupted, so that another worker (another slice, or this one restarted by its scheduler) takes the trial over at
once and resumes it from its checkpoint. A lost process 0 leaves a claim that nobody renews: it expires after
`--lease_s`, then another worker takes the trial over; the others stop (jax ends a process whose coordinator is
gone). The processes of a slice that lost one exit 1: the scheduler (JobSet, SLURM) restarts the slice as a whole.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from typing import Callable, Optional, Sequence

from vvt.train import coordinator
from vvt.train import peers

ROOT = 'vvt/sweep/'
GET_MS = 1000           # one blocking get; looped, with the peer watch checked between
POLL_S = 0.5
DEFAULT_HEARTBEAT_S = 100
TRAINER_FIELDS = ('initialize', 'coordinator_address', 'num_processes', 'process_id')


class SliceLost(RuntimeError):
  """A process of the slice was lost: this one stops (one line, exit 1)."""
  user_error = True


def distributed_overrides(overrides: Sequence[tuple[str, str]]) -> tuple[list, list]:
  """(the `distributed.*` overrides, the others): the former are settings of this process, not of the sweep."""
  mine = [(k, v) for k, v in overrides if k.split('.', 1)[0] == 'distributed']
  return mine, [(k, v) for k, v in overrides if k.split('.', 1)[0] != 'distributed']


def wanted(distributed, environ=None) -> bool:
  """Whether this `vvt sweep` is one process of a multi-process job: `distributed.initialize` set (`distributed`: a
  run's DistributedSpec, `vvt.config.run_spec`), or one task of a SLURM step of several (as `vvt train` decides,
  `vvt.train.mesh`)."""
  from vvt.train import mesh
  return distributed.initialize or mesh.slurm_step_tasks(environ) > 1


def trainer_address(address: str) -> str:
  """The coordinator of a trial's trainers (run on process 0, the host of the sweep's coordinator HOST:PORT):
  HOST:a free port of this host (`vvt.train.coordinator.free_port`)."""
  return f'{address.rpartition(":")[0]}:{coordinator.free_port()}'


def _message(value) -> dict:
  return json.loads(value.decode() if isinstance(value, bytes) else value)


@dataclasses.dataclass
class Slice:
  """This process's place in the slice and the slice's key-value store (`client`: jax's DistributedRuntimeClient)."""
  process: int
  processes: int
  address: str
  client: object
  heartbeat_s: float = DEFAULT_HEARTBEAT_S
  extra: tuple = ()               # the other distributed.* overrides given (heartbeat_timeout_seconds, ...)
  watch: Optional[object] = None
  lost: Optional[str] = None
  round: int = 0
  published: bool = False         # this round's message is set

  @property
  def leader(self) -> bool:
    return self.process == 0

  def name(self) -> str:
    return f'process {self.process} of {self.processes}'

  def trainer_args(self, address: str) -> list[str]:
    """This process's `distributed.*` fields for the trial's `vvt train`: the trainers' own coordinator at
    `address` (the round's `trainers`)."""
    given = [f'--config.{k}={v}' for k, v in self.extra if k.split('.')[-1] not in TRAINER_FIELDS]
    return [*given, '--config.distributed.initialize=True',
            f'--config.distributed.coordinator_address={address}',
            f'--config.distributed.num_processes={self.processes}', f'--config.distributed.process_id={self.process}']

  # --------------------------------------------------------------------------- lost processes

  def on_lost(self, process: int, why: str) -> None:
    """The peer watch found `process` lost (from its thread): remembered; `check` raises it in the main thread."""
    if self.lost is None:
      self.lost = f'process {process} of {self.processes} was lost ({why}: killed, crashed or its host is down)'

  def check(self) -> None:
    if self.lost:
      raise SliceLost(self.lost)

  # --------------------------------------------------------------------------- rounds

  def _key(self, *parts) -> str:
    return ROOT + '/'.join(str(p) for p in (self.round, *parts))

  def publish(self, message: dict) -> None:
    """Process 0: what this round does ({trial, index, total, attempt, argv, trainers} or {end: True})."""
    self.client.key_value_set(self._key(), json.dumps(message))
    self.published = True

  def end(self, stopped: bool = False) -> None:
    """Process 0: no more trials (`stopped`: by a signal); the others' `receive` returns {end: True}."""
    if self.published:
      self.next_round()
    self.publish({'end': True, 'stopped': stopped})

  def receive(self) -> dict:
    """The others: this round's message, waiting for it as long as process 0 is alive."""
    while True:
      self.check()
      try:
        return _message(self.client.blocking_key_value_get(self._key(), GET_MS))
      except Exception as e:
        if 'DEADLINE_EXCEEDED' not in str(e) and 'timed out' not in str(e):
          raise

  def report(self, result: dict) -> None:
    """This process's trainer has ended: {returncode, error}."""
    self.client.key_value_set(self._key('done', self.process), json.dumps(result))

  def reported(self) -> dict[int, dict]:
    """{process: result} of the others that have reported this round (no waiting)."""
    out = {}
    for key, value in self.client.key_value_dir_get(self._key('done') + '/'):
      out[int(key.rsplit('/', 1)[1])] = _message(value)
    return {p: r for p, r in out.items() if p != self.process}

  def gather(self, sleep: Callable[[float], None] = time.sleep) -> dict[int, dict]:
    """Process 0: every other process's result of this round, waiting for the last one (SliceLost if one is lost)."""
    while True:
      self.check()
      got = self.reported()
      if len(got) >= self.processes - 1:
        return got
      sleep(POLL_S)

  def next_round(self) -> None:
    self.round, self.published = self.round + 1, False

  def close(self) -> None:
    """The sweep is over for this process: jax.distributed is shut down (all processes meet once more). Later JAX
    work of this process (the results table's model summary) runs on this host's CPU: the accelerators belong to the
    trainers, and one process alone cannot open a multi-host slice's TPU."""
    import jax
    if self.watch is not None:
      self.watch.stop()
    jax.distributed.shutdown()
    jax.config.update('jax_platforms', 'cpu')


def join(spec, say: Callable = print, prog: str = 'vvt sweep') -> Slice:
  """Initialises jax.distributed for the sweep's processes (`spec`: a run's DistributedSpec, `vvt.config.run_spec`,
  as `vvt train` reads it) and starts the peer watch; the Slice of this process."""
  import jax
  from jax._src import distributed

  from vvt.train import mesh
  heartbeat = spec.heartbeat_timeout_seconds
  coordinator.check_port(spec)
  jax.distributed.initialize(**mesh.initialize_kwargs(spec))
  state = distributed.global_state
  me = Slice(state.process_id, state.num_processes, state.coordinator_address, state.client, heartbeat)
  if me.processes > 1:
    me.watch = _Watch(me, state.client, heartbeat, prog).start()
  say(f'[sweep] {me.name()} of one worker (the sweep\'s coordinator {me.address}; each trial\'s trainers meet at '
      f'a free port of its host)')
  return me


class _Watch(peers.PeerWatch):
  """The heartbeats of the sweep's processes: a lost process is told to the Slice instead of ending this one."""

  def __init__(self, owner: Slice, client, timeout_s: float, prog: str):
    super().__init__(client, owner.process, owner.processes, timeout_s, prog=prog)
    self.owner = owner

  def _lost(self, process: int, why: str) -> None:
    self.owner.on_lost(process, why)


def abandon(message: str, prog: str = 'vvt sweep') -> None:
  """Ends this process at once with `prog: error: message` (exit 1): jax's orderly shutdown would wait for the lost
  process until its heartbeat timeout and then abort."""
  sys.stdout.flush()
  print(f'{prog}: error: {message}', file=sys.stderr, flush=True)
  os._exit(1)
