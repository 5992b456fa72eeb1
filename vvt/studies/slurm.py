"""A sweep as one SLURM job array: `vvt sweep --launch slurm` (the script's text, its options, `sbatch`).

Array task i runs trial i of SWEEP/sweep.json (its index in the study's list of trials) with
`vvt sweep SWEEP --trial i`: that claims the trial (`vvt.studies.claims`; its state in `vvt sweep --status`),
runs `vvt train` in SWEEP/<trial>/ and records the outcome. `%N` (from `--parallel N`) caps how many tasks run at
once. Re-submitting a sweep submits only the trials that are not finished and not still in the queue from an
earlier submission (the array's index list is theirs).
The script and the jobs submitted are kept in SWEEP/slurm/ (`job.sbatch`, `jobs.jsonl`), each task's output in
SWEEP/slurm/<job>_<task>.out.

Preemption and time limits: the script asks SLURM for SIGTERM `signal` seconds before the time limit, to the
batch shell only (`--signal=B:TERM@S`). The shell runs the trial in the background and `wait`s; its trap passes
the signal on, the trainer saves a checkpoint at the step reached (its save on SIGTERM) and exits, and the task
requeues itself (`scontrol requeue JOB_TASK`, `--requeue`); the requeued task resumes the trial exactly. A
requeue or preemption from outside (`scontrol requeue`, PreemptMode=REQUEUE) signals every process of the task
itself: the trap sees that the task is no longer RUNNING and only waits while the trial saves. `scancel` is the
same, and the task stays cancelled.

A trial on several nodes (`nodes` > 1) runs `vvt train` under `srun` with one task per node (no claim: SLURM
runs one copy of an array task at a time); each process initialises `jax.distributed` from SLURM's environment
(`vvt.train.mesh`: the tasks of a step need no `distributed.*` field). Nothing here imports JAX.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from typing import Optional, Sequence

from vvt import fileio
from vvt.studies import launch

PREFIX = '--slurm.'
FOLDER = 'slurm'          # SWEEP/slurm/: the script, the jobs submitted, the tasks' output
SCRIPT = 'job.sbatch'
JOBS = 'jobs.jsonl'


class SlurmOptionError(launch.OptionError):
  """A `--slurm.*` option is unknown or its value wrong: one line naming it (exit 2, like any bad argument)."""


class SlurmError(launch.LaunchError):
  """`sbatch` is missing, refuses the script or gives no job id: one line saying which (exit 1)."""


# name: (type, default, what it sets)
OPTIONS = {
    'partition': (str, '', '#SBATCH --partition'),
    'account': (str, '', '#SBATCH --account'),
    'qos': (str, '', '#SBATCH --qos'),
    'time': (str, '', '#SBATCH --time, per attempt of a trial (e.g. 4:00:00)'),
    'nodes': (int, 1, 'nodes per trial (more than 1: srun, one process per node, jax.distributed)'),
    'gpus': (int, 0, 'GPUs per node of a trial (#SBATCH --gpus-per-node)'),
    'cpus': (int, 0, 'CPUs per node of a trial (#SBATCH --cpus-per-task)'),
    'mem': (str, '', '#SBATCH --mem per node (e.g. 64G)'),
    'signal': (int, 300, 'seconds before the time limit at which the trial saves and requeues'),
    'job_name': (str, '', '#SBATCH --job-name (default vvt-<sweep directory name>)'),
    'setup': (str, '', 'a shell line run before the trial (e.g. "module load cuda; source venv/bin/activate")'),
    'python': (str, '', 'the Python that runs vvt on the nodes (default: this one)'),
    'extra': (list, (), 'one more #SBATCH line, e.g. --slurm.extra=--constraint=a100 (repeatable)'),
}


@dataclasses.dataclass(frozen=True)
class Options:
  partition: str = ''
  account: str = ''
  qos: str = ''
  time: str = ''
  nodes: int = 1
  gpus: int = 0
  cpus: int = 0
  mem: str = ''
  signal: int = 300
  job_name: str = ''
  setup: str = ''
  python: str = ''
  extra: tuple = ()


def split_options(argv: Sequence[str]) -> tuple[Options, list[str]]:
  """(the `--slurm.NAME=VALUE` / `--slurm.NAME VALUE` options, the other arguments). An unknown name or a
  value of the wrong type raises SlurmOptionError naming it."""
  opts, rest = launch.split_options(argv, PREFIX, OPTIONS, Options, SlurmOptionError)
  return _checked(opts), rest


def _checked(opts: Options) -> Options:
  launch.check_non_negative(opts, PREFIX, ('nodes',), SlurmOptionError, minimum=1)
  launch.check_non_negative(opts, PREFIX, ('gpus', 'cpus', 'signal'), SlurmOptionError)
  for line in opts.extra:
    if '\n' in line or not line.strip().startswith('-'):
      raise SlurmOptionError(f'{PREFIX}extra={line!r}: one sbatch option such as --constraint=a100')
  return opts


# ----------------------------------------------------------------------------- the script


def _directives(opts: Options, sweep_dir: str, array: str, cwd: str) -> list[str]:
  logs = os.path.join(sweep_dir, FOLDER)
  name = opts.job_name or 'vvt-' + (os.path.basename(os.path.normpath(sweep_dir)) or 'sweep')
  lines = [f'--job-name={name}', f'--array={array}', f'--output={logs}/%A_%a.out', '--open-mode=append',
           f'--chdir={cwd}', '--requeue', f'--signal=B:TERM@{opts.signal}', f'--nodes={opts.nodes}',
           '--ntasks-per-node=1']
  for flag, value in (('partition', opts.partition), ('account', opts.account), ('qos', opts.qos),
                      ('time', opts.time), ('mem', opts.mem)):
    if value:
      lines.append(f'--{flag}={value}')
  if opts.gpus:
    lines.append(f'--gpus-per-node={opts.gpus}')
  if opts.cpus:
    lines.append(f'--cpus-per-task={opts.cpus}')
  lines.extend(e.strip() for e in opts.extra)
  return [f'#SBATCH {line}' for line in lines]


# The batch shell: runs the trial's command in the background, passes the time-limit signal on, requeues itself.
_BODY = r'''set -u
task="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
case "${SLURM_ARRAY_TASK_ID}" in
%(cases)s
  *) echo "vvt sweep: array task ${SLURM_ARRAY_TASK_ID} is no trial of this sweep" >&2; exit 2 ;;
esac
%(setup)secho "[slurm] $(date '+%%F %%T') task ${task} (restart ${SLURM_RESTART_COUNT:-0}) on $(hostname): ${trial}"

child=''
self_requeue=0
on_term() {
  # --signal=B:TERM reaches this shell only: pass it on. A requeue, preemption or scancel from outside
  # signals every process of the task already (the task is then no longer RUNNING): only wait.
  local state
  state=$(scontrol show job "${task}" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1)
  if [ "${state}" = RUNNING ] && [ "${self_requeue}" = 0 ]; then
    self_requeue=1
    echo "[slurm] $(date '+%%F %%T') time limit near: the trial saves a checkpoint, then the task requeues"
    [ -n "${child}" ] && kill -TERM "${child}" 2>/dev/null
  else
    echo "[slurm] $(date '+%%F %%T') task ${state:-ended} from outside: the trial saves a checkpoint"
  fi
}
trap on_term TERM

%(launch)s"${cmd[@]}" &
child=$!
wait "${child}"; rc=$?
while kill -0 "${child}" 2>/dev/null; do wait "${child}"; rc=$?; done
if [ "${self_requeue}" = 1 ] && [ "${rc}" != 0 ]; then
  echo "[slurm] $(date '+%%F %%T') trial stopped (exit ${rc}); requeueing ${task}"
  scontrol requeue "${task}"
  exit 0
fi
echo "[slurm] $(date '+%%F %%T') trial ${trial} exited ${rc}"
exit "${rc}"
'''


def script(sweep_dir: str, commands: dict[int, tuple[str, Sequence[str]]], opts: Options,
           throttle: int = 0, cwd: Optional[str] = None, header: str = '') -> str:
  """The sbatch script of a job array: task i runs `commands[i]` = (trial name, argv) (see the module doc)."""
  cwd = cwd or os.getcwd()
  sweep_dir = os.path.abspath(sweep_dir)
  cases = '\n'.join(f'  {i}) trial={shlex.quote(name)}; cmd=({" ".join(shlex.quote(a) for a in argv)}) ;;'
                    for i, (name, argv) in sorted(commands.items()))
  srun = ('srun --ntasks-per-node=1 --kill-on-bad-exit=1 ' if opts.nodes > 1 else '')
  body = _BODY % {'cases': cases, 'setup': f'{opts.setup}\n' if opts.setup else '', 'launch': srun}
  head = ['#!/bin/bash', *(f'# {line}' for line in header.splitlines()),
          *_directives(opts, sweep_dir, launch.array_spec(list(commands), throttle), cwd)]
  return '\n'.join(head) + '\n\n' + body


def task_argv(opts: Options, sweep_dir: str, index: int, train_argv: Sequence[str], lease_s: float) -> list[str]:
  """What array task `index` runs: `PYTHON -m vvt sweep SWEEP --trial INDEX` (it claims the trial, records its
  state and runs `vvt train`; a requeued task takes its own claim over at once); a trial on several nodes runs
  `PYTHON -m vvt train ...` itself under srun (one process per node)."""
  python = opts.python or sys.executable
  if opts.nodes > 1:
    return [python, '-m', 'vvt', *train_argv]
  return launch.sweep_task_argv([python], sweep_dir, str(index), lease_s)


# ----------------------------------------------------------------------------- submitting


def write_script(sweep_dir: str, text: str) -> str:
  """SWEEP/slurm/job.sbatch (written atomically); its path."""
  path = os.path.join(sweep_dir, FOLDER, SCRIPT)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fileio.atomic_write_text(path, text)
  os.chmod(path, 0o755)
  return path


def submit(script_path: str, env: Optional[dict] = None) -> str:
  """Submits the script with `sbatch --parsable`; the job id. SlurmError when sbatch is missing or refuses."""
  out = launch.run_tool(['sbatch', '--parsable', script_path], script_path, env, error=SlurmError,
                        where=f'run this on a SLURM login node (the script: {script_path})')
  m = re.match(r'\s*(\d+)', out)
  if not m:
    raise SlurmError(f'sbatch gave no job id for {script_path}: {out.strip()!r}')
  return m.group(1)


def record_job(sweep_dir: str, job_id: str, indices: Sequence[int], names: Sequence[str]) -> None:
  """Appends the submitted job to SWEEP/slurm/jobs.jsonl (job id, time, task index -> trial)."""
  line = json.dumps({'job': job_id, 'submitted': time.strftime('%Y-%m-%d %H:%M:%S'),
                     'tasks': dict(zip(map(str, indices), names, strict=True))})
  with open(os.path.join(sweep_dir, FOLDER, JOBS), 'a', encoding='utf-8') as f:
    f.write(line + '\n')


def queued(sweep_dir: str, env: Optional[dict] = None) -> dict[str, str]:
  """{trial name: 'JOB_TASK'} of this sweep's array tasks still in SLURM's queue (pending, running or requeued),
  from SWEEP/slurm/jobs.jsonl and `squeue`; {} where squeue is missing or knows none of them."""
  try:
    with open(os.path.join(sweep_dir, FOLDER, JOBS), encoding='utf-8') as f:
      jobs = [json.loads(line) for line in f if line.strip()]
  except (OSError, ValueError):
    return {}
  squeue = shutil.which('squeue', path=(env or os.environ).get('PATH'))
  out = {}
  for job in jobs if squeue else ():
    try:
      res = subprocess.run([squeue, '-h', '-r', '-j', str(job['job']), '-o', '%i'], capture_output=True, text=True,
                           env=env, timeout=60, stdin=subprocess.DEVNULL)
    except (subprocess.TimeoutExpired, OSError):
      return out
    for task in res.stdout.split() if res.returncode == 0 else ():
      name = job.get('tasks', {}).get(task.rpartition('_')[2])
      if name:
        out[name] = task
  return out


def follow_lines(sweep_dir: str, job_id: str) -> list[str]:
  """How to follow a submitted job (printed after submitting)."""
  logs = os.path.join(os.path.abspath(sweep_dir), FOLDER)
  return [f'  squeue -r -j {job_id}            (its tasks: pending, running)',
          f'  tail -f {logs}/{job_id}_<task>.out  (a trial\'s output; task i is trial i of the sweep)',
          f'  vvt results {sweep_dir}          (the table so far)',
          f'  scancel {job_id}                 (stop all; re-submitting resumes the unfinished trials)']
