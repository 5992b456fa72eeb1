"""Running a sweep's trials: one `vvt train` process per trial, one after another or N at a time.

Each trial runs as the command `--launch print` shows (`python -m vvt train --config SPEC
--config.a.b=VALUE ... --workdir SWEEP/<trial>`), so the normal trainer and evaluator do the work, a failure
or a crash stays inside its trial, and `--parallel N` is N processes. The sweep directory holds

  SWEEP/sweep.json             the sweep: config spec, base overrides, every trial's name and overrides
  SWEEP/<trial>/               the trial's run directory (config.json, metrics.jsonl, checkpoints/, ...)
  SWEEP/<trial>/trial.json     the trial's record: command, status running|finished|failed, error, wall time
  SWEEP/<trial>/train.log      the trial's output (appended on every attempt)
  SWEEP/<trial>/state.json     the trial's claim record: status, host, pid, since, lease, attempts, requeues
  SWEEP/<trial>/claims/        the claim itself on a filesystem (`vvt.studies.claims`)

SWEEP may be a URL (`gs://bucket/sweep`): the records go through `vvt.fileio`, and a trial's output, which the
process writes to a local file, is kept in a local folder while it runs and copied to SWEEP/<trial>/train.log
when it ends.

Re-running a sweep skips finished trials (`results.final_eval_path`) and resumes interrupted ones (the
trainer resumes a workdir exactly); a failed trial is recorded with the last line of its error and the
sweep goes on. Nothing here deletes or rewrites a finished trial's files.

`run` is one worker: any number of them (processes here or on other hosts) may run one sweep at once. A
worker trains a trial only while it holds the trial's claim (`claims.take`, its lease renewed by a thread);
it leaves trials that other workers hold, takes over those whose lease expired (their worker died) and stops
a trial at once when it loses the claim. Its trainer processes die with it (Linux: PR_SET_PDEATHSIG), so a
killed worker leaves no trainer behind to race the one that takes its trial over.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Optional, Sequence

from vvt import fileio
from vvt.studies import claims
from vvt.studies import results as results_lib
from vvt.studies import slice as slice_lib
from vvt.studies import sweep as sweep_lib
from vvt.train import metrics as metrics_lib

LOG = 'train.log'
POLL_S = 0.5


def train_argv(spec: str, base: Sequence[tuple[str, str]], trial: sweep_lib.Trial, workdir: str) -> list[str]:
  """The `vvt train` arguments of one trial: the sweep's base overrides, then the trial's."""
  overrides = [f'--config.{k}={v}' for k, v in [*base, *trial.raw_overrides()]]
  return ['train', '--config', spec, *overrides, '--workdir', workdir]


def shell_command(argv: Sequence[str]) -> str:
  """`vvt ARGS` quoted for a POSIX shell (what `vvt sweep --launch print` prints)."""
  return ' '.join(['vvt', *(shlex.quote(a) for a in argv)])


def write_sweep_record(sweep_dir: str, spec: str, base: Sequence[tuple[str, str]],
                       trials: Sequence[sweep_lib.Trial]) -> None:
  """SWEEP/sweep.json (every trial, not only those run now, so `vvt results` lists the missing ones).

  Refuses (SweepError, nothing written) a directory whose sweep.json is not a sweep record or is the sweep of
  another config file (their finished trials would be mixed up), and other base overrides than those of
  the workers that hold trials of it now (one sweep, one set of trials).
  """
  path = fileio.join(sweep_dir, results_lib.SWEEP_FILE)
  old = results_lib.read_json(path)
  if fileio.exists(path) and not (isinstance(old, dict) and isinstance(old.get('trials'), list)):
    raise sweep_lib.SweepError(f'{path} is not a sweep record (JSON with the config and trials of a sweep); '
                               'use another --workdir')
  if old and old.get('config') and old['config'] != spec:
    raise sweep_lib.SweepError(f'{sweep_dir} holds a sweep of {old["config"]!r}, not {spec!r}; '
                               'use another --workdir')
  _refuse_other_overrides(sweep_dir, old, base)
  record = {'config': spec, 'base_overrides': [list(o) for o in base],
            'trials': [{'name': t.name, 'overrides': t.overrides, 'labels': t.labels} for t in trials]}
  if json.loads(json.dumps(record, default=str)) == old:  # another worker of this sweep wrote it already
    return
  fileio.makedirs(sweep_dir)
  results_lib.write_json(path, record)


def _refuse_other_overrides(sweep_dir: str, old: Optional[dict], base: Sequence[tuple[str, str]]) -> None:
  recorded = (old or {}).get('base_overrides')
  if recorded is None or [list(o) for o in base] == recorded:
    return
  for t in old.get('trials', []):
    held = claims.read(fileio.join(sweep_dir, t['name']))
    if held and held['state'] in claims.LIVE:
      given = ' '.join(f'--config.{k}={v}' for k, v in recorded) or 'no overrides'
      raise sweep_lib.SweepError(
          f'{sweep_dir} is being run with {given} (trial {t["name"]} on {claims.holder(held)}); join it with the '
          f'same overrides, or as `vvt sweep {sweep_dir}` (no --config: the recorded ones)')


def log_name(process: int = 0) -> str:
  """train.log of a trial's process 0, train.process-<p>.log of the other processes of a slice."""
  return LOG if process == 0 else f'train.process-{process}.log'


def local_log_path(sweep_dir: str, trial_name: str, process: int = 0) -> str:
  """Where the trial's process writes its output: SWEEP/<trial>/train.log, or for a URL sweep a local file
  (one folder per sweep URL under the temporary directory) that is copied there when the trial ends."""
  if not fileio.is_url(sweep_dir):
    return os.path.join(sweep_dir, trial_name, log_name(process))
  folder = 'vvt_sweep_' + hashlib.sha1(fileio.abspath(sweep_dir).encode()).hexdigest()[:12]
  return os.path.join(tempfile.gettempdir(), folder, trial_name, log_name(process))


def _keep_log(log_path: str, workdir: str) -> None:
  """Copies a URL sweep's local trial output to SWEEP/<trial>/ (a local sweep writes it there)."""
  if fileio.is_url(workdir):
    with open(log_path, errors='replace') as f:
      fileio.atomic_write_text(fileio.join(workdir, os.path.basename(log_path)), f.read())


def _last_error(log_path: str) -> str:
  """The trial's one-line error: the CLI's `vvt train: error: ...` line, else the last output line."""
  try:
    with open(log_path, errors='replace') as f:
      lines = [l.strip() for l in f.readlines()[-200:] if l.strip()]
  except OSError:
    return 'no output'
  errors = [l for l in lines if l.startswith('vvt train: error:')]
  return (errors or lines or ['no output'])[-1]


@dataclasses.dataclass
class _Running:
  trial: sweep_lib.Trial
  index: int
  proc: subprocess.Popen
  log: object
  log_path: str
  started: float
  claim: claims.Claim
  offset: int = 0
  training: bool = False
  ended_here: bool = False  # ended by this worker (a process of its slice failed), not by itself


def _record(workdir: str, **fields) -> None:
  path = fileio.join(workdir, results_lib.TRIAL_FILE)
  record = results_lib.read_json(path, {}) or {}
  record.update(fields)
  results_lib.write_json(path, record)


# The trial's process runs `python -m vvt ARGS` after asking (Linux) to be killed when this worker dies, so that a
# killed worker leaves no trainer behind to race the worker that takes its trial over.
_CHILD = """
import ctypes, os, runpy, signal, sys
try:
  ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
  pass
if os.getppid() != int(sys.argv.pop(1)):
  os._exit(137)
runpy.run_module('vvt', run_name='__main__', alter_sys=True)
"""


def _open_log(log_path: str, header: str):
  """The trial's output file (appended to), its header line written; (file, offset of the new output)."""
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  log = open(log_path, 'a')
  offset = log.tell()
  log.write(f'\n===== vvt sweep: {time.strftime("%Y-%m-%d %H:%M:%S")}: {header}\n')
  log.flush()
  return log, offset


def _spawn(argv: Sequence[str], log, env: dict) -> subprocess.Popen:
  """`python -m vvt ARGV` in a child that dies with this worker (`_CHILD`), its output to `log`."""
  return subprocess.Popen([sys.executable, '-c', _CHILD, str(os.getpid()), *argv], stdout=log,
                          stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)


def _start(trial, index, spec, base, sweep_dir, env, claim, slice_args: Sequence[str] = ()) -> _Running:
  workdir = fileio.join(sweep_dir, trial.name)
  fileio.makedirs(workdir)
  argv = [*train_argv(spec, base, trial, workdir), *slice_args]
  log_path = local_log_path(sweep_dir, trial.name)
  log, offset = _open_log(log_path, f'attempt {claim.record["attempts"]} on {claims.holder(claim.record)}: '
                                    f'{shell_command(argv)}')
  _record(workdir, name=trial.name, overrides=trial.overrides, command=shell_command(argv),
          status='running', error=None, started=time.strftime('%Y-%m-%d %H:%M:%S'),
          **({'processes': claim.record['processes']} if claim.record.get('processes', 1) > 1 else {}))
  return _Running(trial, index, _spawn(argv, log, env), log, log_path, time.time(), claim, offset)


def _echo_progress(run: _Running, total: int, say: Callable) -> None:
  """Prints the trial's new `[train] step ...` / `[eval]` lines, prefixed with the trial; the first
  `[train]` line marks the trial `running` in its claim."""
  try:
    with open(run.log_path, errors='replace') as f:
      f.seek(run.offset)
      text = f.read()
  except OSError:
    return
  end = text.rfind('\n') + 1
  run.offset += len(text[:end].encode())
  for line in text[:end].splitlines():
    if line.startswith('[train]') and not run.training:
      run.training = True
      claims.set_status(run.claim, 'running')
    if line.startswith(('[train] step', '[eval] test', '[eval] val', '[train] resumed')):
      say(f'  ({run.index}/{total}) {run.trial.name} | {line}')


class Stopped(KeyboardInterrupt):
  """SIGTERM stopped the sweep worker (its trials saved a checkpoint and were released): exit 143."""
  exit_code = 143


def _on_sigterm(signum, frame):
  del signum, frame
  raise Stopped('stopped (SIGTERM): the running trials saved a checkpoint and were released')


class _SigtermStops:
  """SIGTERM raises Stopped while inside (in the main thread only: signals are not set elsewhere)."""

  def __enter__(self):
    self.main = threading.current_thread() is threading.main_thread()
    self.previous = signal.signal(signal.SIGTERM, _on_sigterm) if self.main else None
    return self

  def __exit__(self, *exc):
    if self.main:
      signal.signal(signal.SIGTERM, self.previous)


@dataclasses.dataclass
class _Worker:
  """One `vvt sweep` worker's loop: its trials to do, those running here, those held by other workers."""
  trials: Sequence[sweep_lib.Trial]
  spec: str
  base: Sequence[tuple[str, str]]
  sweep_dir: str
  parallel: int
  say: Callable
  env: dict
  lease_s: float
  check_s: float
  me: claims.Worker = dataclasses.field(default_factory=claims.Worker.here)
  group: Optional[slice_lib.Slice] = None  # process 0 of a slice: the others train each trial with it
  t0: float = dataclasses.field(default_factory=time.time)
  todo: list = dataclasses.field(default_factory=list)
  running: list = dataclasses.field(default_factory=list)
  held: dict = dataclasses.field(default_factory=dict)
  next_try: dict = dataclasses.field(default_factory=dict)
  status: dict = dataclasses.field(default_factory=dict)
  errors: dict = dataclasses.field(default_factory=dict)
  waiting_said: str = ''

  @property
  def total(self) -> int:
    return len(self.trials)

  def elapsed(self) -> str:
    return metrics_lib.format_duration(time.time() - self.t0)


def run(trials: Sequence[sweep_lib.Trial], spec: str, base: Sequence[tuple[str, str]], sweep_dir: str,
        parallel: int = 1, say: Callable = print, env: Optional[dict] = None, lease_s: float = claims.LEASE_S,
        renew_s: Optional[float] = None, group: Optional[slice_lib.Slice] = None) -> dict[str, str]:
  """Runs the trials that are not finished, `parallel` at a time, as one worker among any number on
  `sweep_dir`; returns {trial: finished|failed|skipped}.

  Each trial is claimed first (`claims.take`): a trial another worker holds is left to it and looked at now
  and then (taken over once its lease expires, and resumed from its checkpoints); one finished by another
  worker counts as finished, one that failed on another worker since this one started as failed. The lease
  of each trial running here is renewed every `renew_s`; a trial whose claim is lost is stopped at once. The
  worker returns when every trial is finished or failed. It shows which trial runs (n of N), its progress
  lines and the elapsed time. Ctrl-C or SIGTERM stops the running trials (they save a checkpoint, their
  claims are released for another worker or the next run) and raises KeyboardInterrupt.

  With `group` (process 0 of a multi-process job, `vvt.studies.slice`) the worker is the whole slice: it runs one
  trial at a time, each on every process of the slice (the others run `follow`), and ends the others' loop when
  it returns; a lost process of the slice releases the running trial and raises SliceLost.
  """
  renew_s = renew_s or claims.default_renew_s(lease_s)
  me = claims.Worker.here(processes=group.processes if group else 1)
  w = _Worker(trials, spec, base, sweep_dir, 1 if group else max(1, parallel), say,
              dict(os.environ if env is None else env, PYTHONUNBUFFERED='1'), lease_s,
              max(POLL_S, min(renew_s, 10.0)), me=me, group=group)
  for i, t in enumerate(trials, 1):
    if results_lib.final_eval_path(fileio.join(sweep_dir, t.name)):
      w.status[t.name] = 'skipped'
      say(f'[sweep] ({i}/{w.total}) {t.name}: finished before, kept')
    else:
      w.todo.append((i, t))
  leases = claims.Leases(renew_s)
  try:
    with _SigtermStops():
      while w.todo or w.running:
        _fill(w, leases)
        time.sleep(POLL_S)
        for r in list(w.running):
          _poll(w, r, leases)
        _say_waiting(w)
      if group:
        group.end()
  except KeyboardInterrupt:
    _stop_all(w)
    if group:
      group.end(stopped=True)
    raise
  except slice_lib.SliceLost as e:
    _release_all(w, str(e))
    raise slice_lib.SliceLost(f'{e}; {_released(w)}') from None
  finally:
    leases.stop()
  return w.status


def _announce(w: _Worker, i: int, t: sweep_lib.Trial, claim) -> list[str]:
  """In a slice: tells the other processes to start their trainers of trial `t` as this one does, meeting at a
  free port of this host; this process's trainer's `distributed.*` arguments ([] for a lone worker)."""
  if not w.group:
    return []
  trainers = slice_lib.trainer_address(w.group.address)
  w.group.publish({'trial': t.name, 'index': i, 'total': w.total, 'attempt': claim.record['attempts'],
                   'argv': train_argv(w.spec, w.base, t, fileio.join(w.sweep_dir, t.name)), 'trainers': trainers})
  return w.group.trainer_args(trainers)


def _fill(w: _Worker, leases: claims.Leases) -> None:
  """Claims and starts trials while fewer than `parallel` run here."""
  for i, t in list(w.todo):
    if len(w.running) >= w.parallel:
      return
    if w.next_try.get(t.name, 0) > time.time():
      continue
    out = _take(w, i, t)
    if out is None:
      continue
    if out.claim:
      w.todo.remove((i, t))
      w.held.pop(t.name, None)
      _say_start(w, i, t, out.claim)
      w.running.append(_start(t, i, w.spec, w.base, w.sweep_dir, w.env, out.claim, _announce(w, i, t, out.claim)))
      leases.add(out.claim)
    elif out.status in ('finished', 'failed'):
      w.todo.remove((i, t))
      w.held.pop(t.name, None)
      w.status[t.name] = out.status
      record = out.record or {}
      detail = f': {record.get("error")}' if out.status == 'failed' else ''
      w.say(f'[sweep] ({i}/{w.total}) {t.name}: {out.status} on {claims.holder(record)}{detail} '
            f'(elapsed {w.elapsed()})')
    else:
      w.held[t.name] = out.record or {}
      until = (out.record or {}).get('lease_until') or 0
      w.next_try[t.name] = min(time.time() + w.check_s, max(until, time.time() + POLL_S))


def _take(w: _Worker, i: int, t: sweep_lib.Trial) -> Optional[claims.Outcome]:
  """`claims.take` of one trial (None: its store did not answer, tried again later; the fifth time raises)."""
  workdir = fileio.join(w.sweep_dir, t.name)
  final = results_lib.final_eval_path(workdir)
  try:
    out = claims.take(workdir, t.name, w.me, w.lease_s, retry_failed_before=w.t0, retake_finished=not final)
  except Exception as e:
    w.errors[t.name] = w.errors.get(t.name, 0) + 1
    if w.errors[t.name] >= 5:
      raise
    w.say(f'[sweep] ({i}/{w.total}) could not read the claim of {t.name} ({type(e).__name__}: '
          f'{str(e).splitlines()[0] if str(e) else ""}); trying again in {w.check_s:g} s')
    w.next_try[t.name] = time.time() + w.check_s
    return None
  w.errors.pop(t.name, None)
  if out.claim and results_lib.final_eval_path(workdir):  # finished, its worker gone before saying so
    claims.set_status(out.claim, 'finished')
    out = claims.Outcome(None, 'finished', out.claim.record)
  return out


def _say_start(w: _Worker, i: int, t: sweep_lib.Trial, claim: claims.Claim) -> None:
  state = results_lib.trial_state(fileio.join(w.sweep_dir, t.name), claim=False)['status']
  previous = claim.record.get('previous') or {}
  verb = 'resuming' if state in ('partial', 'failed', 'running') else 'starting'
  if previous.get('status') in claims.LIVE:
    verb = f'taking over (the lease of {previous.get("host")} pid {previous.get("pid")} expired) and resuming'
  w.say(f'[sweep] ({i}/{w.total}) {verb} {t.name} (attempt {claim.record["attempts"]}; elapsed {w.elapsed()})')


def _poll(w: _Worker, r: _Running, leases: claims.Leases) -> None:
  """Progress of a running trial; stops it if its claim was lost; records it when its process ends (in a slice:
  once every process's trainer has ended)."""
  _echo_progress(r, w.total, w.say)
  if w.group:
    w.group.check()
  if not claims.check(r.claim):
    r.proc.kill()  # at once: the trial's new owner writes its checkpoints now
    r.proc.wait()
    _gather(w)  # the slice's other trainers end with this one (their coordinator is gone)
    r.log.close()
    w.running.remove(r)
    leases.remove(r.claim)
    w.todo.append((r.index, r.trial))
    w.next_try[r.trial.name] = time.time() + w.check_s
    w.say(f'[sweep] ({r.index}/{w.total}) stopped {r.trial.name} here: lost its claim, {r.claim.lost} '
          f'(elapsed {w.elapsed()})')
    return
  if r.proc.poll() is None:
    if not (w.group and any(res['returncode'] for res in w.group.reported().values())):
      return
    r.proc.kill()  # another process's trainer failed: this one would wait for it
    r.proc.wait()
    r.ended_here = True
  others = _gather(w)
  w.running.remove(r)
  leases.remove(r.claim)
  r.log.close()
  _finish(r, w.sweep_dir, w.total, w.status, w.say, w.t0, others)


def _gather(w: _Worker) -> dict[int, dict]:
  """In a slice: every other process's outcome of this round, waiting for all of them; {} for a lone worker."""
  if not w.group:
    return {}
  others = w.group.gather()
  w.group.next_round()
  return others


def _end_all(w: _Worker, how: str) -> list:
  """Ends every running trial's process (`how`: 'kill' or 'terminate', sent to all of them first), waits for
  each and closes its log: [(running trial, its workdir)]."""
  for r in w.running:
    getattr(r.proc, how)()
  ended = []
  for r in w.running:
    r.proc.wait()
    r.log.close()
    ended.append((r, fileio.join(w.sweep_dir, r.trial.name)))
  return ended


def _release_all(w: _Worker, why: str) -> None:
  """A process of the slice was lost: the running trials end at once, their claims released for another worker."""
  for r, workdir in _end_all(w, 'kill'):
    _keep_log(r.log_path, workdir)
    _record(workdir, status='interrupted', error=why)
    if not r.claim.lost:
      claims.set_status(r.claim, 'released', f'interrupted: {why}')


def _released(w: _Worker) -> str:
  names = [r.trial.name for r in w.running]
  return (f'trial {", ".join(names)} released for another worker (it resumes from its checkpoint)' if names
          else 'no trial was running')


def _say_waiting(w: _Worker) -> None:
  """When nothing runs here and every trial left is held by another worker: say so (once per change)."""
  if w.running or not w.todo or any(t.name not in w.held for _, t in w.todo):
    return
  names = [t.name for _, t in w.todo]
  key = ','.join(f'{n}:{w.held[n].get("token")}' for n in names)
  if key == w.waiting_said:
    return
  w.waiting_said = key
  text = ', '.join(f'{n} ({claims.holder(w.held[n])}, lease until '
                   f'{claims.clock_text(w.held[n].get("lease_until"))[-8:]})' for n in names[:4])
  w.say(f'[sweep] waiting for {len(names)} trial{"s" * (len(names) > 1)} held by other workers: {text}'
        f'{", ..." if len(names) > 4 else ""}')


def _stop_all(w: _Worker) -> None:
  """Ctrl-C / SIGTERM: the running trials save a checkpoint and stop; their claims are released."""
  for r, workdir in _end_all(w, 'terminate'):
    if not r.claim.lost:
      _keep_log(r.log_path, workdir)
      _record(workdir, status='interrupted')
      claims.set_status(r.claim, 'released', 'interrupted')


def _errors(r: _Running, others: dict[int, dict]) -> list[str]:
  """The trial's errors: process 0's (unless this worker ended it), then those of the slice's other processes."""
  out = [] if r.ended_here or not r.proc.returncode else [_last_error(r.log_path)]
  return out + [f'process {p}: ' + (res.get('error') or f'exit status {res["returncode"]}')
                for p, res in sorted(others.items()) if res.get('returncode')]


def _finish(r: _Running, sweep_dir: str, total: int, status: dict, say: Callable, t0: float,
            others: Optional[dict] = None) -> None:
  workdir = fileio.join(sweep_dir, r.trial.name)
  _keep_log(r.log_path, workdir)
  wall = time.time() - r.started
  final = results_lib.final_eval_path(workdir)
  elapsed = metrics_lib.format_duration(time.time() - t0)
  errors = _errors(r, others or {})
  if not errors and r.proc.returncode == 0 and final:
    res = results_lib.read_json(final, {}) or {}
    key = results_lib.main_metric(res)
    score = f': {key} {res[key]:.4f}' if key and isinstance(res.get(key), (int, float)) else ''
    _record(workdir, status='finished', returncode=0, error=None, wall_s=wall, final_eval=final)
    claims.set_status(r.claim, 'finished')
    status[r.trial.name] = 'finished'
    say(f'[sweep] ({r.index}/{total}) finished {r.trial.name} in {metrics_lib.format_duration(wall)}{score} '
        f'(elapsed {elapsed})')
    return
  error = errors[0] if errors else 'exited 0 without a final evaluation'
  _record(workdir, status='failed', returncode=r.proc.returncode, error=error, wall_s=wall)
  claims.set_status(r.claim, 'failed', error)
  status[r.trial.name] = 'failed'
  say(f'[sweep] ({r.index}/{total}) FAILED {r.trial.name} after {metrics_lib.format_duration(wall)}: {error} '
      f'(log: {r.log_path}; elapsed {elapsed})')


def follow(group: slice_lib.Slice, sweep_dir: str, say: Callable = print, env: Optional[dict] = None) -> int:
  """A process other than 0 of a slice: trains each trial that process 0 announces, with it, until process 0 says
  that none is left; the number of trials it took part in. Its trainer's output goes to
  SWEEP/<trial>/train.process-<p>.log. A lost process of the slice ends its trainer and raises SliceLost; SIGTERM
  stops its trainer (the slice's trainers save together) and raises Stopped."""
  env = dict(os.environ if env is None else env, PYTHONUNBUFFERED='1')
  done = 0
  with _SigtermStops():
    while True:
      message = group.receive()
      if message.get('end'):
        if message.get('stopped'):
          say(f'[sweep] {group.name()}: process 0 was stopped; the trial saved a checkpoint')
        return done
      result = _follow_one(group, message, sweep_dir, say, env)
      group.report(result)
      group.next_round()
      done += 1


def _follow_one(group: slice_lib.Slice, message: dict, sweep_dir: str, say: Callable, env: dict) -> dict:
  """Runs this process's trainer of the announced trial to its end; {returncode, error}."""
  name, argv = message['trial'], [*message['argv'], *group.trainer_args(message['trainers'])]
  log_path = local_log_path(sweep_dir, name, group.process)
  log, _ = _open_log(log_path, f'attempt {message["attempt"]}, {group.name()}: {shell_command(argv)}')
  say(f'[sweep] ({message["index"]}/{message["total"]}) {name}: {group.name()} trains it with process 0 '
      f'(attempt {message["attempt"]})')
  proc = _spawn(argv, log, env)
  try:
    while proc.poll() is None:
      group.check()
      time.sleep(POLL_S)
  except slice_lib.SliceLost:
    proc.kill()
    proc.wait()
    raise
  except KeyboardInterrupt:
    proc.terminate()
    proc.wait()
    raise
  finally:
    log.close()
    _keep_log(log_path, fileio.join(sweep_dir, name))
  error = _last_error(log_path) if proc.returncode else None
  say(f'[sweep] ({message["index"]}/{message["total"]}) {name}: {group.name()} done'
      + (f' (exit status {proc.returncode}: {error})' if proc.returncode else ''))
  return {'returncode': proc.returncode, 'error': error}
