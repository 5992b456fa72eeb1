"""Progress bars, for every package: one factory (`bar`), one switch that turns them all off and one that forces
them on.

Long work (evaluation batches, predicted videos, windows of a long video, converted videos) shows a tqdm bar on
stderr, drawn only where its stream is a terminal (or the `vvt` command's stderr filter, whose pipe leads to one:
`note_terminal_pipe`): a log redirected to a file gets no `\\r` frames. `vvt COMMAND
--progress` or the environment variable `VVT_PROGRESS=1` draws them into a file or pipe too; `vvt COMMAND
--no-progress` (every command takes both) or `VVT_NO_PROGRESS=1` turns every bar off, and wins over both. The flags
set the variables, so the processes a command starts (a sweep's trials) inherit them. A bar's rates and ETA depend
on the machine's speed: logs meant to be compared, and the tests, run without them.
"""
from __future__ import annotations

import os
import sys
from typing import Optional

ENV = 'VVT_NO_PROGRESS'
FORCE_ENV = 'VVT_PROGRESS'
PIPE_ENV = 'VVT_STDERR_TERMINAL_PIPE'  # the pipe (st_dev:st_ino) that stands for a terminal (`note_terminal_pipe`)
_OFF_VALUES = ('', '0', 'false', 'no', 'off')


def _set(name: str) -> bool:
  """Whether the variable `name` holds a true value (anything but '', 0, false, no, off)."""
  return os.environ.get(name, '').strip().lower() not in _OFF_VALUES


def enabled() -> bool:
  """False when VVT_NO_PROGRESS is set to a true value (anything but '', 0, false, no, off)."""
  return not _set(ENV)


def forced() -> bool:
  """True when VVT_PROGRESS is set to a true value: bars drawn also where stderr is not a terminal."""
  return _set(FORCE_ENV)


def disable() -> None:
  """Turns the bars off in this process and in the processes it starts from now on."""
  os.environ[ENV] = '1'


def force() -> None:
  """Draws the bars also into files and pipes, in this process and in the processes it starts from now on."""
  os.environ[FORCE_ENV] = '1'


def _identity(fd: int) -> str:
  st = os.fstat(fd)
  return f'{st.st_dev}:{st.st_ino}'


def leads_to_terminal(fd: int) -> bool:
  """Whether descriptor `fd` is a terminal, or the pipe `note_terminal_pipe` named (one whose reader, the `vvt`
  command's stderr filter, writes to a terminal)."""
  try:
    return os.isatty(fd) or os.environ.get(PIPE_ENV, '') == _identity(fd)
  except OSError:
    return False


def note_terminal_pipe(fd: int, terminal: bool) -> None:
  """Says whether the pipe now at descriptor `fd` leads to a terminal (`vvt.cli.native_stderr`: its filter writes
  to what stderr was); inherited by the processes started from now on, which draw bars only while their stderr is
  that same pipe."""
  if terminal:
    os.environ[PIPE_ENV] = _identity(fd)
  else:
    os.environ.pop(PIPE_ENV, None)


def is_terminal(stream) -> bool:
  """Whether `stream` (a file object) leads to a terminal (`leads_to_terminal`); False for files, other pipes,
  in-memory and closed streams."""
  try:
    return bool(stream.isatty()) or leads_to_terminal(stream.fileno())
  except (AttributeError, ValueError, OSError):
    return False


def shown(stream=None) -> bool:
  """Whether a bar on `stream` (default: stderr) is drawn: not switched off, and on a terminal unless forced."""
  return enabled() and (forced() or is_terminal(sys.stderr if stream is None else stream))


def bar(total: Optional[int] = None, desc: Optional[str] = None, unit: str = 'it', *, disable: bool = False,
        **kwargs):
  """A tqdm bar on stderr (`tqdm` keyword arguments pass through, `file` among them); a no-op bar (same methods)
  when `disable`, when the bars are switched off (`enabled()`), or when its stream is not a terminal and the bars
  are not forced (`shown()`)."""
  from tqdm import tqdm
  return tqdm(total=total, desc=desc, unit=unit, disable=bool(disable) or not shown(kwargs.get('file')), **kwargs)
