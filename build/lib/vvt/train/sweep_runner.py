"""Running a sweep's trials: one `vvt train` process per trial, one after another or N at a time.

Each trial runs as the command `--launch print` shows (`python -m vvt train --config SPEC
--config.a.b=VALUE ... --workdir SWEEP/<trial>`), so the normal trainer and evaluator do the work, a failure
or a crash stays inside its trial, and `--parallel N` is N processes. The sweep directory holds

  SWEEP/sweep.json             the sweep: config spec, base overrides, every trial's name and overrides
  SWEEP/<trial>/               the trial's run directory (config.json, metrics.jsonl, checkpoints/, ...)
  SWEEP/<trial>/trial.json     the trial's record: command, status running|finished|failed, error, wall time
  SWEEP/<trial>/train.log      the trial's output (appended on every attempt)

Re-running a sweep skips finished trials (`results.final_eval_path`) and resumes interrupted ones (the
trainer resumes a workdir exactly); a failed trial is recorded with the last line of its error and the
sweep goes on. Nothing here deletes or rewrites a finished trial's files.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

from vvt.train import metrics as metrics_lib
from vvt.train import results as results_lib
from vvt.train import sweep as sweep_lib

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

  Refuses a directory that holds a sweep of another config file: its finished trials would be mixed up.
  """
  path = os.path.join(sweep_dir, results_lib.SWEEP_FILE)
  old = results_lib.read_json(path)
  if old and old.get('config') and old['config'] != spec:
    raise sweep_lib.SweepError(f'{sweep_dir} holds a sweep of {old["config"]!r}, not {spec!r}; '
                               'use another --workdir')
  os.makedirs(sweep_dir, exist_ok=True)
  results_lib.write_json(path, {
      'config': spec, 'base_overrides': [list(o) for o in base],
      'trials': [{'name': t.name, 'overrides': t.overrides, 'labels': t.labels} for t in trials]})


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
  offset: int = 0


def _record(workdir: str, **fields) -> None:
  path = os.path.join(workdir, results_lib.TRIAL_FILE)
  record = results_lib.read_json(path, {}) or {}
  record.update(fields)
  results_lib.write_json(path, record)


def _start(trial, index, spec, base, sweep_dir, env) -> _Running:
  workdir = os.path.join(sweep_dir, trial.name)
  os.makedirs(workdir, exist_ok=True)
  argv = train_argv(spec, base, trial, workdir)
  log_path = os.path.join(workdir, LOG)
  log = open(log_path, 'a')  # pylint: disable=consider-using-with
  offset = log.tell()
  log.write(f'\n===== vvt sweep: {time.strftime("%Y-%m-%d %H:%M:%S")}: {shell_command(argv)}\n')
  log.flush()
  _record(workdir, name=trial.name, overrides=trial.overrides, command=shell_command(argv),
          status='running', error=None, started=time.strftime('%Y-%m-%d %H:%M:%S'))
  proc = subprocess.Popen([sys.executable, '-m', 'vvt', *argv], stdout=log, stderr=subprocess.STDOUT,
                          env=env, stdin=subprocess.DEVNULL)
  return _Running(trial, index, proc, log, log_path, time.time(), offset)


def _echo_progress(run: _Running, total: int, say: Callable) -> None:
  """Prints the trial's new `[train] step ...` / `[eval]` lines, prefixed with the trial."""
  try:
    with open(run.log_path, errors='replace') as f:
      f.seek(run.offset)
      text = f.read()
  except OSError:
    return
  end = text.rfind('\n') + 1
  run.offset += len(text[:end].encode())
  for line in text[:end].splitlines():
    if line.startswith(('[train] step', '[eval] test', '[eval] val', '[train] resumed')):
      say(f'  ({run.index}/{total}) {run.trial.name} | {line}')


def run(trials: Sequence[sweep_lib.Trial], spec: str, base: Sequence[tuple[str, str]], sweep_dir: str,
        parallel: int = 1, say: Callable = print, env: Optional[dict] = None) -> dict[str, str]:
  """Runs the trials that are not finished, `parallel` at a time; returns {trial: finished|failed|skipped}.

  Shows which trial runs (n of N), its progress lines and the elapsed time. Ctrl-C stops the running
  trials (they resume on the next run) and re-raises KeyboardInterrupt.
  """
  env = dict(os.environ if env is None else env, PYTHONUNBUFFERED='1')
  total, t0 = len(trials), time.time()
  status: dict[str, str] = {}
  todo = []
  for i, t in enumerate(trials, 1):
    if results_lib.final_eval_path(os.path.join(sweep_dir, t.name)):
      status[t.name] = 'skipped'
      say(f'[sweep] ({i}/{total}) {t.name}: finished before, kept')
    else:
      todo.append((i, t))
  running: list[_Running] = []
  try:
    while todo or running:
      while todo and len(running) < max(1, parallel):
        i, t = todo.pop(0)
        workdir = os.path.join(sweep_dir, t.name)
        state = results_lib.trial_state(workdir)['status']
        verb = 'resuming' if state in ('partial', 'failed', 'running') else 'starting'
        say(f'[sweep] ({i}/{total}) {verb} {t.name} (elapsed {metrics_lib.format_duration(time.time() - t0)})')
        running.append(_start(t, i, spec, base, sweep_dir, env))
      time.sleep(POLL_S)
      for r in list(running):
        _echo_progress(r, total, say)
        if r.proc.poll() is None:
          continue
        running.remove(r)
        r.log.close()
        _finish(r, sweep_dir, total, status, say, t0)
  except KeyboardInterrupt:
    for r in running:
      r.proc.terminate()
    for r in running:
      r.proc.wait()
      r.log.close()
      _record(os.path.join(sweep_dir, r.trial.name), status='interrupted')
    raise
  return status


def _finish(r: _Running, sweep_dir: str, total: int, status: dict, say: Callable, t0: float) -> None:
  workdir = os.path.join(sweep_dir, r.trial.name)
  wall = time.time() - r.started
  final = results_lib.final_eval_path(workdir)
  elapsed = metrics_lib.format_duration(time.time() - t0)
  if r.proc.returncode == 0 and final:
    res = results_lib.read_json(final, {}) or {}
    key = next((h for h in results_lib.HEADLINES if h in res), None)
    score = f': {key} {res[key]:.4f}' if key else ''
    _record(workdir, status='finished', returncode=0, error=None, wall_s=wall, final_eval=final)
    status[r.trial.name] = 'finished'
    say(f'[sweep] ({r.index}/{total}) finished {r.trial.name} in {metrics_lib.format_duration(wall)}{score} '
        f'(elapsed {elapsed})')
    return
  error = _last_error(r.log_path) if r.proc.returncode else 'exited 0 without a final evaluation'
  _record(workdir, status='failed', returncode=r.proc.returncode, error=error, wall_s=wall)
  status[r.trial.name] = 'failed'
  say(f'[sweep] ({r.index}/{total}) FAILED {r.trial.name} after {metrics_lib.format_duration(wall)}: {error} '
      f'(log: {r.log_path}; elapsed {elapsed})')
