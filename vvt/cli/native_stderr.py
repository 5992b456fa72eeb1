"""Start-up noise of native libraries kept off the console: a filter on file descriptor 2.

TensorFlow (2.21: absl's C++ logging, before it is initialised, ignores `TF_CPP_MIN_LOG_LEVEL`), XLA and libtpu
write their start-up lines straight to file descriptor 2: the absl pre-initialisation warning, oneDNN's "custom
operations are on" and the CPU-feature guard (hosts with AVX-512), libtpu's "could not determine TPU accelerator
type / worker hostnames" (the `tpu` / `test` extras on a host without a TPU). No Python logging setting reaches
them, and turning oneDNN off to hide its line would change the CPU kernels.

`install()` points descriptor 2 at a pipe read by a forked filter process, which passes on every line except
the known start-up lines (`NoiseFilter`): native info and warning records, and the libtpu probe's errors.
Python's `sys.stderr` writes to the same pipe, so every line keeps its order. The filter ignores SIGINT / SIGTERM
and ends when every writer has closed the pipe, so what a crashing or `os._exit`-ing process wrote last (a fatal
error, an abort message, vvt's last line) still comes out: real errors stay visible.

One native error is told in vvt's words: in a multi-process run whose coordinator (process 0, which runs jax's
coordination service) is lost, jax's client in every other process aborts at once with its fatal record
("Terminating process because the JAX distributed service detected fatal errors"), a native stack trace and, with
Python's fault handler on, a dump of the Python threads; no code of the aborting process runs after it. The filter
outlives it: it replaces that record and the abort's trace that follows with one line naming the lost coordinator
and where the last checkpoint is (the note the process keeps in the file named by `NOTE_ENV`, see
`vvt.train.peers`).
"""
from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import tempfile

from vvt import progress

# absl / glog records: severity letter, MMDD, time, thread, file:line] message.
_RECORD = re.compile(rb'^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] ')
_NOISE = tuple(re.compile(p) for p in (
    rb'^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$',
    rb'^WARNING: Logging before InitGoogle\(\) is written to STDERR$',
    # the CPU-feature guard's second line (its first is an info record)
    rb'^To enable the following instructions: .*rebuild TensorFlow with the appropriate compiler flags\.$',
    # libtpu probing for TPU hardware on a host without one
    rb'could not determine TPU (accelerator type|worker hostnames)',
))
_TRACE_HEADER = b'=== Source Location Trace: ==='
_TRACE_LINE = re.compile(rb'^\S+:\d+$')

NOTE_ENV = 'VVT_STDERR_NOTE'  # the file whose text ends the coordinator-lost line (where the last checkpoint is)
_COORDINATOR_LOST = re.compile(rb'^F\d{4} .*\] Terminating process because the JAX distributed service detected '
                               rb'fatal errors')
# the coordination service's error records that come just before it (held back until a line of another kind tells
# whether the abort follows)
_COORDINATION_ERROR = re.compile(
    rb'^E\d{4} [^\]]* (coordination_service\w*|preemption_sync_manager|client)\.(cc|h):\d+\] ')
_ABORT_TRACE_START = b'*** Check failure stack trace: ***'
_ABORT_TRACE = tuple(re.compile(p) for p in (
    rb'^\s*$',
    rb'^\s+@\s+0x[0-9a-f]+\s',                                       # native frames
    rb'^Fatal Python error: ',
    rb'^Python runtime state: ',
    rb'^(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$',
    rb'^\s+File ".*", line \d+ in ',                                  # Python frames of the dump
    rb'^\s+<no Python frame>$',
    rb'^Extension modules: ',
    rb'^\S.*\(total: \d+\)$',                                        # the end of a wrapped module list
))
_COORDINATOR_LOST_LINE = ('{prog}: error: process 0, the coordinator of this multi-process run (it runs jax\'s '
                          'coordination service), was lost (killed, crashed or its host is down); this process stops; '
                          '{note}\n')
_NO_NOTE = 'the checkpoints written are intact: the same command on every host resumes the run'


class NoiseFilter:
  """The filter's judgement, on the byte stream of descriptor 2.

  `keep(line)` is False for the libraries' start-up lines: native info (I) and warning (W) records, absl's and
  glog's pre-initialisation warnings, the CPU-feature guard's second line, and libtpu's probe on a host without a
  TPU (its error record, with the "Source Location Trace" block that follows it). Error (E) and fatal (F)
  records and everything else are kept, but for jax's abort on a lost coordinator (its fatal record, the error
  record just before it, the native and Python traces after it): one line in vvt's words takes its place.

  `feed(data)` returns what to write now. A whole line is judged at its newline; a partial line that cannot start
  a noise line (a progress bar's '\\r', "vvt train: ...") is passed on at once, so what Python writes keeps its
  order and its timing."""

  _NOISE_FIRST_BYTES = b'IWEFT='  # every noise line starts with one of these

  def __init__(self, prog: str = 'vvt', note_file: str = ''):
    self.prog, self.note_file = prog, note_file
    self._abort = ''        # '' | 'message' (the fatal record's lines) | 'trace' (the abort's stack traces)
    self._say = b''         # a line in vvt's words to write in place of what was dropped
    self._held = b''        # error records kept back (`_COORDINATION_ERROR`)
    self._before = b''      # a held record to write before the line just judged
    self._in_dropped_trace = False
    self._last_dropped = False
    self._pending = b''     # the start of a line not yet judged
    self._passing = False   # the current line was judged kept before its end

  def keep(self, line: bytes) -> bool:
    text = line.rstrip(b'\r\n')
    if self._in_abort(text):
      self._held = b''
      return False
    if _COORDINATION_ERROR.match(text):
      self._held += line
      return False
    self._before, self._held = self._held, b''
    if self._last_dropped and text == _TRACE_HEADER:
      self._in_dropped_trace = True
      return False
    if self._in_dropped_trace and _TRACE_LINE.match(text):
      return False
    self._in_dropped_trace = False
    record = _RECORD.match(text)
    noise = bool(record and record.group(1) in (b'I', b'W')) or any(p.search(text) for p in _NOISE)
    self._last_dropped = noise
    return not noise

  def _in_abort(self, text: bytes) -> bool:
    """Whether `text` is jax's coordinator-lost fatal record or a line of the abort that follows it; at the
    record, the line in vvt's words is due (`_say`)."""
    if _COORDINATOR_LOST.match(text):
      self._abort, self._say = 'message', self._coordinator_lost_line()
      return True
    if self._abort == 'message' and text == _ABORT_TRACE_START:
      self._abort = 'trace'
      return True
    if self._abort == 'message' and not (text.startswith(b'vvt') or _RECORD.match(text)):
      return True  # the record's message goes on (gRPC's error details)
    if self._abort and any(p.match(text) for p in _ABORT_TRACE):
      self._abort = 'trace'
      return True
    self._abort = ''
    return False

  def _coordinator_lost_line(self) -> bytes:
    note = ''
    try:
      with open(self.note_file, encoding='utf-8') as f:
        note = f.read().strip()
    except (OSError, ValueError):
      pass
    return _COORDINATOR_LOST_LINE.format(prog=self.prog, note=note or _NO_NOTE).encode()

  def _take_say(self) -> bytes:
    say, self._say, before, self._before = self._say, b'', self._before, b''
    return before + say

  def _may_be_noise(self, start: bytes) -> bool:
    return bool(self._abort) or self._in_dropped_trace or start[:1] in self._NOISE_FIRST_BYTES

  def feed(self, data: bytes) -> bytes:
    out = []
    while data:
      end = data.find(b'\n') + 1
      part, data = (data[:end], data[end:]) if end else (data, b'')
      if self._passing:
        out.append(part)
        self._passing = not end
        continue
      self._pending += part
      if end:
        line, self._pending = self._pending, b''
        kept = self.keep(line)
        out.append(self._take_say())
        if kept:
          out.append(line)
      elif not self._may_be_noise(self._pending):
        out += [self._held, self._pending]
        self._held = b''
        self._pending, self._passing = b'', True
        self._in_dropped_trace = self._last_dropped = False
    return b''.join(out)

  def close(self) -> bytes:
    """What is left at the end of the stream: a last line without its newline."""
    line, self._pending = self._pending, b''
    kept = line if line and self.keep(line) else b''
    held, self._held = self._held, b''
    return self._take_say() + kept + held


def is_noise(lines: list[bytes]) -> list[bool]:
  """For each line in order, whether the filter drops it."""
  f = NoiseFilter()
  return [not f.keep(l) for l in lines]


def _forward(read_fd: int, out_fd: int, prog: str, note_file: str) -> None:
  """The filter process: passes the stream on, less the noise, until every writer has closed the pipe."""
  f = NoiseFilter(prog, note_file)
  while True:
    try:
      chunk = os.read(read_fd, 1 << 16)
    except InterruptedError:
      continue
    if not chunk:
      break
    _write_all(out_fd, f.feed(chunk))
  _write_all(out_fd, f.close())


def _write_all(fd: int, data: bytes) -> None:
  try:
    while data:
      data = data[os.write(fd, data):]
  except OSError:  # the reader of our stderr is gone: nothing left to show
    pass


def _close_all_but(*keep: int) -> None:
  start = 0
  for fd in sorted(keep):
    os.closerange(start, fd)
    start = fd + 1
  os.closerange(start, os.sysconf('SC_OPEN_MAX') if hasattr(os, 'sysconf') else 1024)


def install(prog: str = 'vvt') -> bool:
  """Filters descriptor 2 of this process (and of the subprocesses that inherit it) for the rest of its life.

  Call once, at the entry point, before TensorFlow, JAX or libtpu are imported and before any thread starts.
  Returns False (and changes nothing) where it cannot: no fork, or no real descriptor 2. `prog` begins the line
  that replaces a coordinator-lost abort; the environment's `NOTE_ENV` names the file of its note (the filter
  removes the file at its end)."""
  if not hasattr(os, 'fork'):
    return False
  try:
    terminal = os.dup(2)
  except OSError:
    return False
  to_terminal = progress.leads_to_terminal(terminal)  # where the filter writes: bars are drawn there or not
  read_fd, write_fd = os.pipe()
  note_file = os.path.join(tempfile.gettempdir(), f'vvt-stderr-note-{os.getpid()}')
  sys.stderr.flush()
  pid = os.fork()
  if pid == 0:  # the filter: ends at EOF, i.e. when the process and its children have all exited
    try:
      signal.signal(signal.SIGINT, signal.SIG_IGN)
      signal.signal(signal.SIGTERM, signal.SIG_IGN)
      _close_all_but(read_fd, terminal)  # no one's stdin / stdout held open: a reader waiting for EOF never waits on us
      _forward(read_fd, terminal, prog, note_file)
    finally:
      with contextlib.suppress(OSError):
        os.remove(note_file)
      os._exit(0)
  os.close(read_fd)
  os.close(terminal)
  os.dup2(write_fd, 2)
  os.close(write_fd)
  progress.note_terminal_pipe(2, to_terminal)
  os.environ[NOTE_ENV] = note_file
  return True
