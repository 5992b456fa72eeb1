"""A sweep on GKE through XPK (`vvt sweep --launch xpk`): one `xpk workload create` per unfinished trial, or the
trials as one `xpk batch` array script; the options, the commands and the script, and running xpk.

Workloads (`--xpk.mode=workload`, the default): workload PREFIX-<i> gets a TPU slice (`tpu_type`, `num_slices`) or
GPU/CPU machines (`device_type`, `num_nodes`) and runs `vvt sweep SWEEP --trial i` in every container: the hosts of a
multi-host trial get `--config.distributed.initialize=True`, so that they are one sweep worker (`vvt.studies.slice`:
process 0 claims the trial, all train it as one program). Kueue queues the workloads by `priority` and quota. A
workload whose slice fails (a lost host, a preempted VM) is restarted by JobSet (`max_restarts`), and the restarted
`vvt sweep --trial i` takes the trial over (at once when the stopped slice released its claim, otherwise once its
lease has expired) and resumes it from its checkpoint. xpk runs the command in a subshell that it passes SIGTERM to;
the command ends in `exec python -m vvt ...`, so the sweep itself gets the signal and the trial saves a checkpoint.

Batch (`--xpk.mode=batch`): a SLURM-style array script for `xpk batch` (kjob's SLURM mode), whose array task i runs
trial i on one node. kjob reads only some `#SBATCH` options (array, job-name, cpus-per-task, gpus-per-task,
mem-per-task, time, ...) and runs the script without SLURM: it refuses the commands scontrol, sinfo, squeue,
scancel, sbatch, salloc and wait anywhere in it, and takes the words after a `srun` that begin with `-` for srun's
own options. So the script has one `srun`, its last line, whose command is a bash array (`cmd=(...)`;
`srun "${cmd[@]}"`), and no requeue of its own: Kueue and the Job restart a task and vvt's leases hand its trial
over (`batch_problems` checks a script).

Each launch is recorded in SWEEP/xpk/launches.jsonl (time, workloads or job, trials); the n-th launch of a sweep
names its workloads PREFIX-r<n>-<i> (xpk keeps finished workloads for a while under their names). The commands and the
script are kept in SWEEP/xpk/. Nothing here imports JAX.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import tempfile
import time
from typing import Optional, Sequence

from vvt import fileio
from vvt.studies import launch

PREFIX = '--xpk.'
FOLDER = 'xpk'               # SWEEP/xpk/: the commands or script of the last launch, every launch
COMMANDS = 'launch.sh'
SCRIPT = 'job.sh'
LAUNCHES = 'launches.jsonl'
MAX_NAME = 40                # xpk's limit on a workload's name
PRIORITIES = ('very-low', 'low', 'medium', 'high', 'very-high')
MODES = ('workload', 'batch')
# kjob's SLURM mode refuses these commands anywhere in a script (and `srun` only as its last command here)
REFUSED = ('scontrol', 'sinfo', 'squeue', 'scancel', 'sbatch', 'salloc', 'wait')


class XpkOptionError(launch.OptionError):
  """A `--xpk.*` option is unknown, missing or wrong: one line naming it (exit 2)."""


class XpkError(launch.LaunchError):
  """xpk is missing or refuses a workload: one line saying which (exit 1)."""


# name: (type, default, what it sets)
OPTIONS = {
    'cluster': (str, '', 'the GKE cluster made by `xpk cluster create` (required)'),
    'tpu_type': (str, '', 'a TPU slice per trial, e.g. v4-32, v5p-64, v6e-16 (xpk --tpu-type)'),
    'device_type': (str, '', 'GPU or CPU machines per trial instead, e.g. h100-80gb-8 (xpk --device-type)'),
    'num_slices': (int, 1, 'slices per trial, one JAX program over them (xpk --num-slices)'),
    'num_nodes': (int, 1, 'machines per trial with device_type (xpk --num-nodes)'),
    'docker_image': (str, '', 'an image with vvt and its dependencies installed (xpk --docker-image)'),
    'base_docker_image': (str, '', 'or a base image to which xpk adds this folder (xpk --base-docker-image)'),
    'project': (str, '', 'the Google Cloud project (xpk --project; default: gcloud\'s)'),
    'zone': (str, '', 'the cluster\'s zone (xpk --zone; default: gcloud\'s)'),
    'workload_prefix': (str, '', 'workload names PREFIX-<trial index> (default vvt-<sweep folder>)'),
    'priority': (str, '', f'Kueue priority of the workloads: {", ".join(PRIORITIES)} (xpk --priority)'),
    'max_restarts': (int, 3, 'restarts of a failed workload (xpk --max-restarts): it resumes its trial'),
    'setup': (str, '', 'a shell command run first in each container, e.g. "pip install -e .[tpu,gcs]"'),
    'python': (str, 'python3', 'the Python that runs vvt in the containers'),
    'env': (list, (), 'NAME=VALUE in the containers (xpk --env), repeatable'),
    'extra': (list, (), 'one more `xpk workload create` flag, e.g. --xpk.extra=--spot (repeatable)'),
    'mode': (str, 'workload', 'workload: one xpk workload per trial; batch: one `xpk batch` array script'),
    'cpus': (int, 0, 'batch: CPUs per task (#SBATCH --cpus-per-task)'),
    'gpus': (str, '', 'batch: GPUs per task as TYPE:N, e.g. nvidia.com/gpu:8 (#SBATCH --gpus-per-task)'),
    'mem': (str, '', 'batch: memory per task, e.g. 64Gi (#SBATCH --mem-per-task)'),
    'time': (str, '', 'batch: time limit per task, e.g. 12:00:00 (#SBATCH --time)'),
}
WORKLOAD_ONLY = ('tpu_type', 'device_type', 'num_slices', 'num_nodes', 'docker_image', 'base_docker_image',
                 'workload_prefix', 'priority', 'max_restarts', 'env', 'extra')
BATCH_ONLY = ('cpus', 'gpus', 'mem', 'time')


@dataclasses.dataclass(frozen=True)
class Options:
  cluster: str = ''
  tpu_type: str = ''
  device_type: str = ''
  num_slices: int = 1
  num_nodes: int = 1
  docker_image: str = ''
  base_docker_image: str = ''
  project: str = ''
  zone: str = ''
  workload_prefix: str = ''
  priority: str = ''
  max_restarts: int = 3
  setup: str = ''
  python: str = 'python3'
  env: tuple = ()
  extra: tuple = ()
  mode: str = 'workload'
  cpus: int = 0
  gpus: str = ''
  mem: str = ''
  time: str = ''


def split_options(argv: Sequence[str]) -> tuple[Options, list[str]]:
  """(the `--xpk.NAME=VALUE` options, the other arguments); XpkOptionError naming a bad one (see `check`)."""
  return launch.split_options(argv, PREFIX, OPTIONS, Options, XpkOptionError)


def check(opts: Options) -> Options:
  """The options of a launch, checked together: XpkOptionError (one line) for a missing, contradictory or wrong one."""
  bad = lambda message: XpkOptionError(f'--launch xpk: {message}')
  if opts.mode not in MODES:
    raise bad(f'{PREFIX}mode={opts.mode}: one of {", ".join(MODES)}')
  if not opts.cluster:
    raise bad(f'missing {PREFIX}cluster=NAME (the GKE cluster of `xpk cluster create`)')
  other = [n for n in launch.given(opts) if n in (BATCH_ONLY if opts.mode == 'workload' else WORKLOAD_ONLY)]
  if other:
    raise bad(f'{PREFIX}{other[0]} is an option of {PREFIX}mode={"batch" if opts.mode == "workload" else "workload"}')
  launch.check_non_negative(opts, PREFIX, ('num_slices', 'num_nodes'), XpkOptionError, minimum=1)
  launch.check_non_negative(opts, PREFIX, ('max_restarts', 'cpus'), XpkOptionError)
  for name in ('cluster', 'tpu_type', 'device_type', 'project', 'zone'):
    if re.search(r'[^A-Za-z0-9._-]', getattr(opts, name)):
      raise bad(f'{PREFIX}{name}={getattr(opts, name)!r}: letters, digits, ".", "_" and "-" only')
  for line in (opts.setup, opts.python, *opts.env, *opts.extra):
    if '\n' in line:
      raise bad(f'{line!r}: one line')
  if opts.mode == 'workload':
    _check_workload(opts, bad)
  elif opts.gpus and not re.fullmatch(r'[^:,\s]+:\d+(,[^:,\s]+:\d+)*', opts.gpus):
    raise bad(f'{PREFIX}gpus={opts.gpus}: TYPE:N, e.g. nvidia.com/gpu:8')
  return opts


def _check_workload(opts: Options, bad) -> None:
  if bool(opts.tpu_type) == bool(opts.device_type):
    raise bad(f'{"both" if opts.tpu_type else "neither"} {PREFIX}tpu_type (a TPU slice per trial, e.g. v4-32) '
              f'{"and" if opts.tpu_type else "nor"} {PREFIX}device_type (e.g. h100-80gb-8): give one')
  if opts.docker_image and opts.base_docker_image:
    raise bad(f'{PREFIX}docker_image and {PREFIX}base_docker_image: give one')
  if opts.tpu_type and opts.num_nodes != 1:
    raise bad(f'{PREFIX}num_nodes is for {PREFIX}device_type (a TPU slice has its own hosts)')
  if opts.priority and opts.priority not in PRIORITIES:
    raise bad(f'{PREFIX}priority={opts.priority}: one of {", ".join(PRIORITIES)}')
  if opts.workload_prefix and not launch.NAME_RX.fullmatch(opts.workload_prefix):
    raise bad(f'{PREFIX}workload_prefix={opts.workload_prefix}: lowercase letters, digits and "-", starting with '
              'a letter and not ending with "-"')
  for item in opts.env:
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*=.*', item):
      raise bad(f'{PREFIX}env={item}: NAME=VALUE')
  for flag in opts.extra:
    if not flag.startswith('-'):
      raise bad(f'{PREFIX}extra={flag}: one xpk flag such as --spot or --reservation=NAME')


# ----------------------------------------------------------------------------- what runs in a container


def multi_process(opts: Options) -> bool:
  """Whether a trial runs as several processes (a TPU slice: always one program, even of one host; machines: > 1)."""
  return bool(opts.tpu_type) or opts.num_nodes > 1


def container_command(opts: Options, sweep_dir: str, trial: str, lease_s: float,
                      distributed: Sequence[tuple[str, str]] = ()) -> str:
  """The shell command of one trial's containers: [setup &&] exec PYTHON -m vvt sweep SWEEP --trial I ... with
  `--config.distributed.initialize=True` where the trial is one program of several processes, and `distributed`
  (the other `distributed.*` fields given to `vvt sweep`)."""
  fields = [f'--config.{k}={v}' for k, v in distributed if k != 'distributed.initialize']
  if multi_process(opts) or dict(distributed).get('distributed.initialize', '').lower() == 'true':
    fields.insert(0, '--config.distributed.initialize=True')
  argv = launch.sweep_task_argv(shlex.split(opts.python), sweep_dir, trial, lease_s, fields)
  command = 'exec ' + ' '.join(shlex.quote(a) for a in argv)
  return f'{opts.setup} && {command}' if opts.setup else command


def default_prefix(sweep_dir: str) -> str:
  return launch.dns_label('vvt-' + os.path.basename(fileio.abspath(sweep_dir).rstrip('/')), 24)


def workload_names(opts: Options, sweep_dir: str, indices: Sequence[int], launch_number: int = 1) -> dict[int, str]:
  """{trial index: workload name}: PREFIX-<i>, PREFIX-r<n>-<i> from the second launch of a sweep on. XpkOptionError
  when a name would be longer than xpk's 40 characters."""
  prefix = (opts.workload_prefix or default_prefix(sweep_dir)) + (f'-r{launch_number}' if launch_number > 1 else '')
  names = {i: f'{prefix}-{i}' for i in indices}
  longest = max(names.values(), key=len)
  if len(longest) > MAX_NAME:
    raise XpkOptionError(f'--launch xpk: the workload name {longest} is longer than xpk\'s {MAX_NAME} characters: '
                         f'a shorter {PREFIX}workload_prefix')
  return names


def workload_argv(opts: Options, name: str, command: str) -> list[str]:
  """`xpk workload create ...` of one trial."""
  argv = ['xpk', 'workload', 'create', '--cluster', opts.cluster, '--workload', name]
  argv += ['--tpu-type', opts.tpu_type] if opts.tpu_type else ['--device-type', opts.device_type]
  argv += ['--num-slices', str(opts.num_slices)]
  if opts.device_type:
    argv += ['--num-nodes', str(opts.num_nodes)]
  if opts.docker_image:
    argv += ['--docker-image', opts.docker_image]
  elif opts.base_docker_image:
    argv += ['--base-docker-image', opts.base_docker_image, '--script-dir', '.']
  argv += _where(opts)
  if opts.priority:
    argv += ['--priority', opts.priority]
  argv += ['--max-restarts', str(opts.max_restarts)]
  for item in opts.env:
    argv += ['--env', item]
  argv += list(opts.extra)
  return [*argv, '--command', command]


def _where(opts: Options) -> list[str]:
  return [*(['--project', opts.project] if opts.project else []), *(['--zone', opts.zone] if opts.zone else [])]


def batch_argv(opts: Options, script_path: str) -> list[str]:
  """`xpk batch ... SCRIPT`."""
  return ['xpk', 'batch', '--cluster', opts.cluster, *_where(opts), script_path]


def shell_line(argv: Sequence[str]) -> str:
  return ' '.join(shlex.quote(a) for a in argv)


# ----------------------------------------------------------------------------- the batch script


def batch_script(opts: Options, sweep_dir: str, indices: Sequence[int], lease_s: float, throttle: int = 0,
                 job_name: str = '', header: str = '', distributed: Sequence[tuple[str, str]] = ()) -> str:
  """The `xpk batch` script of the trials `indices`: array task i runs `vvt sweep SWEEP --trial i` (see the module
  doc); XpkOptionError when `setup` brings in a command that kjob refuses."""
  fields = [f'--config.{k}={v}' for k, v in distributed]
  argv = launch.sweep_task_argv(shlex.split(opts.python), sweep_dir, 'TASK', lease_s, fields)
  words = ' '.join('"${SLURM_ARRAY_TASK_ID}"' if a == 'TASK' else shlex.quote(a) for a in argv)
  directives = [f'--job-name={job_name or default_prefix(sweep_dir)}',
                f'--array={launch.array_spec(indices, throttle)}']
  for flag, value in (('cpus-per-task', opts.cpus), ('gpus-per-task', opts.gpus), ('mem-per-task', opts.mem),
                      ('time', opts.time)):
    if value:
      directives.append(f'--{flag}={value}')
  lines = ['#!/bin/bash', *(f'# {line}' for line in header.splitlines()),
           *(f'#SBATCH {d}' for d in directives), '', 'set -u']
  if opts.setup:
    lines.append(opts.setup)
  lines += [f'cmd=({words})', 'srun "${cmd[@]}"']
  text = '\n'.join(lines) + '\n'
  problems = batch_problems(text)
  if problems:
    raise XpkOptionError(f'--launch xpk: {PREFIX}setup={opts.setup!r}: {problems[0]}')
  return text


def _command_at(line: str, word: str) -> bool:
  return re.search(rf'(^|\s){re.escape(word)}(\s|$)', line.strip()) is not None


def batch_problems(text: str) -> list[str]:
  """Why kjob (`xpk batch`) would refuse the script: a refused command anywhere (comments included: kjob reads every
  line), a `srun` that is not the one last command, or a word beginning with `-` after it."""
  lines = [line for line in text.splitlines() if line.strip()]
  out = [f'kjob refuses the command {word!r} (line {line!r})' for line in lines for word in REFUSED
         if _command_at(line, word)]
  sruns = [i for i, line in enumerate(lines) if _command_at(line, 'srun')]
  if sruns != [len(lines) - 1]:
    out.append(f'one srun, as the last command (found {len(sruns)}, the last line being {lines[-1]!r})')
  elif any(w.startswith('-') for w in lines[-1].split()[1:]):
    out.append(f'kjob takes the words after srun that begin with "-" for its own options: {lines[-1]!r}')
  return out


# ----------------------------------------------------------------------------- launching


def launch_number(sweep_dir: str) -> int:
  """1 + the launches recorded in SWEEP/xpk/launches.jsonl."""
  try:
    return 1 + sum(1 for line in fileio.read_text(fileio.join(sweep_dir, FOLDER, LAUNCHES)).splitlines()
                   if line.strip())
  except (FileNotFoundError, OSError):
    return 1


def local_path(sweep_dir: str, name: str) -> str:
  """Where xpk reads SWEEP/xpk/NAME: that file, or for a URL sweep a local copy (a folder per sweep under the
  temporary directory)."""
  if not fileio.is_url(sweep_dir):
    return os.path.join(sweep_dir, FOLDER, name)
  return os.path.join(tempfile.gettempdir(), 'vvt_xpk_' + launch.dns_label(sweep_dir, 60), name)


def local_copy(sweep_dir: str, name: str, text: str) -> str:
  """Writes SWEEP/xpk/NAME and, for a URL sweep, its local copy; the local path."""
  fileio.makedirs(fileio.join(sweep_dir, FOLDER))
  fileio.atomic_write_text(fileio.join(sweep_dir, FOLDER, name), text)
  path = local_path(sweep_dir, name)
  if fileio.is_url(sweep_dir):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as f:
      f.write(text)
  os.chmod(path, 0o755)
  return path


def record(sweep_dir: str, what: dict) -> None:
  """Appends a launch to SWEEP/xpk/launches.jsonl."""
  path = fileio.join(sweep_dir, FOLDER, LAUNCHES)
  old = fileio.read_text(path) if fileio.exists(path) else ''
  line = json.dumps({'launched': time.strftime('%Y-%m-%d %H:%M:%S'), **what})
  fileio.atomic_write_text(path, old + line + '\n')


def run_xpk(argv: Sequence[str], what: str, env: Optional[dict] = None) -> str:
  """Runs one xpk command (it builds images and talks to the cluster: up to 30 min); its output."""
  return launch.run_tool(argv, what, env, timeout=1800, error=XpkError,
                         where='install it (pip install xpk) and run this where gcloud and kubectl reach the cluster')


def follow_lines(opts: Options, sweep_dir: str, names: Sequence[str] = ()) -> list[str]:
  """How to follow the launched trials."""
  where = ' '.join(_where(opts))
  where = f' {where}' if where else ''
  lines = [f'  xpk workload list --cluster {opts.cluster}{where}   (the workloads: queued, running, finished)']
  if names:
    lines.append(f'  xpk workload delete --cluster {opts.cluster}{where} --workload {names[0]}   (stop one; '
                 'launching again resumes it)')
  return lines + [f'  vvt sweep --status {sweep_dir}   (every trial: claimed, running, finished, its worker)',
                  f'  vvt results {sweep_dir}   (the table so far)']
