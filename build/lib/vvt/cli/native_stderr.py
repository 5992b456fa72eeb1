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
"""
from __future__ import annotations

import os
import re
import signal
import sys

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


class NoiseFilter:
  """The filter's judgement, on the byte stream of descriptor 2.

  `keep(line)` is False for the libraries' start-up lines: native info (I) and warning (W) records, absl's and
  glog's pre-initialisation warnings, the CPU-feature guard's second line, and libtpu's probe on a host without a
  TPU (its error record, with the "Source Location Trace" block that follows it). Error (E) and fatal (F)
  records and everything else are kept.

  `feed(data)` returns what to write now. A whole line is judged at its newline; a partial line that cannot start
  a noise line (a progress bar's '\\r', "vvt train: ...") is passed on at once, so what Python writes keeps its
  order and its timing."""

  _NOISE_FIRST_BYTES = b'IWEFT='  # every noise line starts with one of these

  def __init__(self):
    self._in_dropped_trace = False
    self._last_dropped = False
    self._pending = b''     # the start of a line not yet judged
    self._passing = False   # the current line was judged kept before its end

  def keep(self, line: bytes) -> bool:
    text = line.rstrip(b'\r\n')
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

  def _may_be_noise(self, start: bytes) -> bool:
    return self._in_dropped_trace or start[:1] in self._NOISE_FIRST_BYTES

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
        if self.keep(line):
          out.append(line)
      elif not self._may_be_noise(self._pending):
        out.append(self._pending)
        self._pending, self._passing = b'', True
        self._in_dropped_trace = self._last_dropped = False
    return b''.join(out)

  def close(self) -> bytes:
    """What is left at the end of the stream: a last line without its newline."""
    line, self._pending = self._pending, b''
    return line if line and self.keep(line) else b''


def is_noise(lines: list[bytes]) -> list[bool]:
  """For each line in order, whether the filter drops it."""
  f = NoiseFilter()
  return [not f.keep(l) for l in lines]


def _forward(read_fd: int, out_fd: int) -> None:
  """The filter process: passes the stream on, less the noise, until every writer has closed the pipe."""
  f = NoiseFilter()
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


def install() -> bool:
  """Filters descriptor 2 of this process (and of the subprocesses that inherit it) for the rest of its life.

  Call once, at the entry point, before TensorFlow, JAX or libtpu are imported and before any thread starts.
  Returns False (and changes nothing) where it cannot: no fork, or no real descriptor 2."""
  if not hasattr(os, 'fork'):
    return False
  try:
    terminal = os.dup(2)
  except OSError:
    return False
  read_fd, write_fd = os.pipe()
  sys.stderr.flush()
  pid = os.fork()
  if pid == 0:  # the filter: ends at EOF, i.e. when the process and its children have all exited
    try:
      signal.signal(signal.SIGINT, signal.SIG_IGN)
      signal.signal(signal.SIGTERM, signal.SIG_IGN)
      _close_all_but(read_fd, terminal)  # no one's stdin / stdout held open: a reader waiting for EOF never waits on us
      _forward(read_fd, terminal)
    finally:
      os._exit(0)  # pylint: disable=protected-access
  os.close(read_fd)
  os.close(terminal)
  os.dup2(write_fd, 2)
  os.close(write_fd)
  return True
