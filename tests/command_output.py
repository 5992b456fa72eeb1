"""A command's output as the tests read it: its lines less any progress bar, and how long it took to end.

The tests run with the bars off (VVT_NO_PROGRESS=1, tests/conftest.py); `without_progress` is the second guard,
for a bar that a library or a future command draws anyway. A tqdm bar redraws its line with '\\r' and its meter
ends in `[elapsed<remaining, rate]` (`[elapsed, rate]` without a total), where the rate is `2.10it/s`,
`1.34s/batch`, `?video/s`, ... depending on the machine's speed; what it writes last before it closes may be a
bare `|####|` or a line of spaces.

`run_timed` times a process from its last stderr line (its error) to its end, which is what "it exits at once
after the error" means whatever the machine's speed; the whole run has only a far-off hang guard.

`main_in_repo` runs a command through the CLI's `main(argv)` in the test process instead (no process start).
"""
import os
import pathlib
import re
import subprocess
import tempfile
import threading
import time

_TIME = r'(?:\d+:)?\d{1,2}:\d\d'
# the end of a tqdm meter: '[00:01<00:01,  1.34s/batch]', '[00:00, ?window/s]', '[1:02:03<?, 3.1kit/s, loss=2]'
_METER_END = re.compile(rf'\[{_TIME}(?:<(?:{_TIME}|\?))?, *[^\]]*/[^\]]*\]')
# a bar cut before its meter (the last redraw of a killed process, a narrow terminal): ' 50%|####', '|####   |'
_BAR = re.compile(r'(?:^|[\s:])\d{1,3}%\||^\|[^|]*\|$')
REPO = pathlib.Path(__file__).resolve().parents[1]
HANG_S = 900  # a hang guard for one command of the tests (they take seconds to a minute or two, even when busy)


def without_progress(text: str) -> list:
  """The non-empty lines of `text`, stripped, less tqdm's: `text` is split at '\\n' and '\\r'; a meter is cut off
  the front of a piece that goes on after it (a line printed while a bar was drawn)."""
  out = []
  for piece in text.replace('\r', '\n').split('\n'):
    meters = list(_METER_END.finditer(piece))
    if meters:
      piece = piece[meters[-1].end():]
    elif _BAR.search(piece.strip()):
      continue
    piece = piece.strip()
    if piece:
      out.append(piece)
  return out


def run_timed(argv, guard_s: float = HANG_S, **popen) -> tuple:
  """Runs `argv` to its end -> (exit code, stdout, stderr, seconds from its last stderr line to its end, i.e. to
  the close of its stderr by it and its children). A process still running after `guard_s` is killed and the test
  fails (AssertionError)."""
  killed = []

  def kill():
    killed.append(True)
    proc.kill()

  with tempfile.TemporaryFile('w+') as out:
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True, **popen)
    timer = threading.Timer(guard_s, kill)
    timer.start()
    err, last = [], time.monotonic()
    try:
      for line in proc.stderr:
        err.append(line)
        last = time.monotonic()
      ended = time.monotonic()
      proc.wait()
    finally:
      timer.cancel()
    out.seek(0)
    stdout = out.read()
  assert not killed, f'{" ".join(map(str, argv))} still ran after {guard_s} s:\n{"".join(err)[-3000:]}'
  return proc.returncode, stdout, ''.join(err), ended - last


def main_in_repo(argv) -> int:
  """`vvt ARGV` through the CLI's `main(argv)` in this process, from the repository as `vvt` runs: its exit code
  (its output goes where this process's does). For runs and refusals where a process of its own proves nothing
  and costs a start (~7 s of imports)."""
  from vvt.cli import main
  cwd = os.getcwd()
  os.chdir(REPO)
  try:
    return main(list(argv))
  finally:
    os.chdir(cwd)
