"""What the schedulers' launchers of a sweep share (`vvt sweep --launch slurm | xpk`): their `--PREFIX.NAME=VALUE`
options read into a frozen dataclass, the unfinished trials and their array, the command an array task or a
workload runs, and running the scheduler's command-line tool with one-line errors. Nothing here imports JAX."""
from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from typing import Optional, Sequence

from vvt import fileio
from vvt.studies import sweep as sweep_lib


class OptionError(sweep_lib.SweepError):
  """A launcher option is unknown or its value wrong: one line naming it (exit 2, like any bad argument)."""


class LaunchError(RuntimeError):
  """The scheduler's tool is missing, refuses or answers nothing usable: one line saying which (exit 1)."""
  user_error = True


# ----------------------------------------------------------------------------- options


def split_options(argv: Sequence[str], prefix: str, table: dict, cls, error=OptionError):
  """(a `cls` of the `PREFIX.NAME=VALUE` / `PREFIX.NAME VALUE` options, the other arguments).

  `table`: {name: (type, default, what it sets)} with type str, int or list (repeatable: a tuple of the values).
  An unknown name or a value of the wrong type raises `error` naming it."""
  fields, rest, argv = {}, [], list(argv)
  while argv:
    arg = argv.pop(0)
    if not arg.startswith(prefix):
      rest.append(arg)
      continue
    name, eq, value = arg[len(prefix):].partition('=')
    name = name.replace('-', '_')
    if name not in table:
      raise error(f'unknown option {prefix}{name} (known: {", ".join(prefix + k for k in table)})')
    if not eq:
      if not argv:
        raise error(f'{prefix}{name} needs a value')
      value = argv.pop(0)
    kind = table[name][0]
    if kind is list:
      fields[name] = (*fields.get(name, ()), value)
    elif kind is int:
      try:
        fields[name] = int(value)
      except ValueError:
        raise error(f'{prefix}{name}={value}: not an integer') from None
    else:
      fields[name] = value
  return cls(**fields), rest


def given(opts) -> list[str]:
  """The names of the options set to something other than their default."""
  return [f.name for f in dataclasses.fields(opts) if getattr(opts, f.name) != f.default]


def check_non_negative(opts, prefix: str, names: Sequence[str], error=OptionError, minimum: int = 0) -> None:
  for name in names:
    if getattr(opts, name) < minimum:
      raise error(f'{prefix}{name}={getattr(opts, name)}: must be >= {minimum}')


# ----------------------------------------------------------------------------- trials


def array_spec(indices: Sequence[int], throttle: int = 0) -> str:
  """An array of these task indices, runs compressed: [0, 1, 2, 5] -> '0-2,5'; with throttle 2: '0-2,5%2'."""
  if not indices:
    raise LaunchError('no trials to submit')
  parts, ordered = [], sorted(set(indices))
  start = prev = ordered[0]
  for i in [*ordered[1:], None]:
    if i is not None and i == prev + 1:
      prev = i
      continue
    parts.append(str(start) if start == prev else f'{start}-{prev}')
    if i is not None:
      start = prev = i
  return ','.join(parts) + (f'%{throttle}' if throttle else '')


def unfinished(all_trials: Sequence[sweep_lib.Trial], chosen: Sequence[sweep_lib.Trial], sweep_dir: str) -> list[int]:
  """The task indices (positions in the sweep's list of trials) of the chosen trials not finished yet."""
  from vvt.studies import results as results_lib
  names = {t.name for t in chosen}
  return [i for i, t in enumerate(all_trials)
          if t.name in names and not results_lib.final_eval_path(fileio.join(sweep_dir, t.name))]


def sweep_task_argv(python: Sequence[str], sweep_dir: str, trial: str, lease_s: float,
                    extra: Sequence[str] = ()) -> list[str]:
  """What one task of a scheduler runs: `PYTHON -m vvt sweep SWEEP --trial TRIAL` (it claims the trial, records its
  state and runs `vvt train`; a restarted task takes the trial over) and `extra` arguments."""
  return [*python, '-m', 'vvt', 'sweep', sweep_dir, '--trial', trial, '--lease_s', f'{lease_s:g}', *extra]


# ----------------------------------------------------------------------------- the scheduler's tool


def run_tool(argv: Sequence[str], what: str, env: Optional[dict] = None, timeout: float = 120,
             error=LaunchError, where: str = '') -> str:
  """Runs a scheduler's command (`sbatch ...`, `xpk ...`) and returns its output; `error` (one line) when the tool
  is not on PATH (`where`: what to do instead), does not answer within `timeout` s or exits non-zero (its own
  message, on one line)."""
  tool = shutil.which(argv[0], path=(env or {}).get('PATH') if env else None)
  if tool is None:
    raise error(f'{argv[0]} not found on PATH' + (f': {where}' if where else ''))
  try:
    res = subprocess.run([tool, *argv[1:]], capture_output=True, text=True, env=env, timeout=timeout,
                         stdin=subprocess.DEVNULL)
  except subprocess.TimeoutExpired:
    raise error(f'{argv[0]} did not answer in {timeout:g} s ({what})') from None
  if res.returncode:
    said = ' '.join((res.stderr or res.stdout).split()[-60:]) or f'exit status {res.returncode}'
    raise error(f'{argv[0]} refused {what}: {said}')
  return res.stdout


NAME_RX = re.compile(r'[a-z]([-a-z0-9]*[a-z0-9])?')


def dns_label(text: str, limit: int) -> str:
  """`text` as a Kubernetes-style name: lowercase letters, digits and '-', starting with a letter, at most `limit`
  characters ('vvt' if nothing is left)."""
  name = re.sub(r'[^a-z0-9-]+', '-', text.lower()).strip('-')
  name = re.sub(r'-{2,}', '-', name)[:limit].rstrip('-')
  return name if name and name[0].isalpha() else ('vvt-' + name)[:limit].rstrip('-') or 'vvt'
