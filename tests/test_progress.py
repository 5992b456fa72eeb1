"""Progress bars: one switch for every command (`--no-progress`, VVT_NO_PROGRESS) and the tests' filter of them.

tests/conftest.py turns the bars off for the whole session; the tests here that need a bar unset it."""
import io
import select
import subprocess
import sys

import av
import numpy as np
import pytest
from tqdm import tqdm

from tests.command_output import without_progress
from tests.conftest import REPO
from vvt import progress
from vvt.cli import common


@pytest.fixture
def bars_on(monkeypatch):
  """The bars switched on (and drawn into files: forced); both variables restored afterwards."""
  monkeypatch.delenv(progress.ENV, raising=False)  # restored to the session's value afterwards
  monkeypatch.setenv(progress.FORCE_ENV, '1')


@pytest.fixture
def bars_not_forced(monkeypatch):
  """The bars switched on, not forced: drawn on a terminal only."""
  monkeypatch.setenv(progress.ENV, '')  # '' is off, and the test's changes are undone afterwards
  monkeypatch.setenv(progress.FORCE_ENV, '')


@pytest.mark.parametrize('value,on', [('1', False), ('true', False), ('yes', False), ('0', True), ('', True),
                                      ('false', True), ('off', True)])
def test_the_variable_turns_the_bars_off(monkeypatch, value, on):
  monkeypatch.setenv(progress.ENV, value)
  monkeypatch.setenv(progress.FORCE_ENV, '1')  # drawn into the StringIO where on
  assert progress.enabled() is on
  out = io.StringIO()
  with progress.bar(3, 'work', 'video', file=out, mininterval=0) as b:
    b.update(3)
  assert ('100%|' in out.getvalue()) is on, out.getvalue()


def test_a_bar_is_drawn_with_the_bars_on_unless_disabled(bars_on):
  del bars_on
  assert progress.enabled()
  out = io.StringIO()
  with progress.bar(2, 'eval test 1x3', 'batch', file=out, mininterval=0) as b:
    b.update(1)
  assert 'eval test 1x3:  50%|' in out.getvalue() and '1/2 [' in out.getvalue(), out.getvalue()
  quiet = io.StringIO()
  with progress.bar(2, 'x', disable=True, file=quiet) as b:
    b.update(2)
  assert quiet.getvalue() == ''


def test_no_progress_on_any_command_line_turns_them_off_also_for_the_processes_it_starts(bars_on):
  del bars_on
  args = common.Parser('vvt x').parse_args(['--no-progress'])
  assert args.no_progress and not progress.enabled()
  child = subprocess.run([sys.executable, '-c', 'from vvt import progress; print(progress.enabled())'], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
  assert child.stdout.strip() == 'False', child.stderr
  assert not common.Parser('vvt x').parse_args([]).no_progress


def _write_mp4(path, colour, frames=6, size=32):
  with av.open(str(path), 'w') as container:
    stream = container.add_stream('mpeg4', rate=8)
    stream.height = stream.width = size
    stream.pix_fmt = 'yuv420p'
    for t in range(frames):
      frame = np.full((size, size, 3), colour, np.uint8)
      frame[:2, :2] = 20 * t
      for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
        container.mux(packet)
    for packet in stream.encode():
      container.mux(packet)


def _pty_pair():
  """(terminal end the bar writes to, master end to read it back), both file objects."""
  import fcntl
  import os
  import pty
  import struct
  import termios
  master, slave = pty.openpty()
  fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 100, 0, 0))  # a terminal's size: tqdm reads it
  return os.fdopen(slave, 'w', buffering=1), os.fdopen(master, 'rb', buffering=0)


def _read_bar(reader) -> bytes:
  """What the terminal received, up to the full bar (the select: a hang guard only)."""
  import select
  got = b''
  while b'100%|' not in got and select.select([reader], [], [], 60)[0]:
    got += reader.read(4096)
  return got


def _drawn(stream) -> None:
  with progress.bar(3, 'work', 'video', file=stream, mininterval=0) as b:
    b.update(3)
  (stream or sys.stderr).flush()


def test_bars_are_drawn_on_a_terminal_and_not_into_a_redirected_log(bars_not_forced, tmp_path, monkeypatch):
  """No `\r` frames in a log file unless forced (VVT_PROGRESS=1 or --progress); on a terminal (a pty) they are
  drawn, also as the default stream (stderr); VVT_NO_PROGRESS wins over the force."""
  del bars_not_forced
  for default in (False, True):  # the bar's own stream, then stderr as the default one
    terminal, reader = _pty_pair()
    try:
      with monkeypatch.context() as m:
        m.setattr(sys, 'stderr', terminal if default else sys.stderr)
        _drawn(None if default else terminal)
      assert b'work: 100%|' in _read_bar(reader)
    finally:
      terminal.close()
      reader.close()
  with open(tmp_path / 'log', 'w') as log:
    _drawn(log)
  assert (tmp_path / 'log').read_text() == ''
  monkeypatch.setenv(progress.FORCE_ENV, '1')
  with open(tmp_path / 'forced', 'w') as log:
    _drawn(log)
  assert b'\rwork: 100%|' in (tmp_path / 'forced').read_bytes()
  monkeypatch.setenv(progress.ENV, '1')
  with open(tmp_path / 'off', 'w') as log:
    _drawn(log)
  assert (tmp_path / 'off').read_text() == ''


@pytest.mark.parametrize('flag', [[], ['--progress'], ['--progress', '--no-progress']],
                         ids=['redirected', 'progress', 'no-progress'])
def test_a_command_draws_its_bar_into_a_redirected_stderr_only_with_progress(bars_not_forced, tmp_path, capsys,
                                                                            flag):
  """`vvt data convert` draws a bar over the videos into a stderr that is not a terminal only with `--progress`
  (which its child processes inherit); `--no-progress` wins."""
  del bars_not_forced
  from vvt.cli import main as vvt_main
  for i, colour in enumerate([(200, 30, 30), (30, 200, 30)]):
    _write_mp4(tmp_path / f'v{i}.mp4', colour)
  (tmp_path / 'videos.csv').write_text('path,label\nv0.mp4,red\nv1.mp4,green\n')
  (tmp_path / 'classes.txt').write_text('red\ngreen\n')
  code = vvt_main(['data', 'convert', '--input', str(tmp_path / 'videos.csv'), '--classes',
                   str(tmp_path / 'classes.txt'), '--output', str(tmp_path / 'out' / 'train'), '--shards', '1',
                   '--short-side', '16', '--workers', '1', *flag])
  err = capsys.readouterr().err
  assert code == 0, err
  if flag == ['--progress']:
    assert 'convert videos.csv: 100%|' in err and '2/2 [' in err, err
    assert without_progress(err) == [] and progress.forced(), err
  else:
    assert err == '', err
    assert progress.enabled() == (not flag)


# Lines as tqdm 4 draws them: with a total, without one, fast and slow (`s/unit`), before the first rate (`?`),
# with a postfix, ASCII bars, over an hour.
TQDM_LINES = [
    'eval test 1x3:  50%|█████     | 1/2 [00:01<00:01,  1.34s/batch]',
    'eval test 1x3: 100%|██████████| 2/2 [00:02<00:00,  1.05batch/s]',
    'eval test 1x3:   0%|          | 0/2 [00:00<?, ?batch/s]',
    'predict:  33%|###3      | 1/3 [00:04<00:08,  4.12s/video]',
    'predict: 100%|##########| 3/3 [00:00<00:00, 12.50video/s]',
    'v0.mp4: 7window [00:03,  2.10window/s]',
    'v0.mp4: 31window [00:20,  1.52s/window]',
    'convert videos.csv:  50%|█████     | 1/2 [1:02:03<1:02:03, 3723.00s/video]',
    '100%|██████████| 10/10 [00:00<00:00, 2.3kit/s]',
    ' 40%|####      | 4/10 [00:08<00:12,  2.00s/it, loss=2.1]',
    '7it [00:01,  6.99it/s]',
]


@pytest.mark.parametrize('line', TQDM_LINES)
def test_the_filter_drops_every_tqdm_line(line):
  assert without_progress(line) == []
  assert without_progress(f'\r{line}\r{" " * len(line)}\r') == []  # redrawn, then cleared (leave=False)


def test_the_filter_drops_bars_cut_before_their_meter_and_bare_redraws():
  assert without_progress('\reval test 1x3:  50%|█████') == []
  assert without_progress('|██████████|\n|#####     |') == []


def test_the_filter_keeps_every_other_line_also_one_printed_while_a_bar_was_drawn():
  text = ('vvt train: resumed from step 4\n'
          '\reval test 1x3:  50%|█████     | 1/2 [00:01<00:01,  1.34s/batch]vvt: SIGINT again: exiting at once\n'
          '[eval] test: video top-1 0.500 (8 videos, 2 views/video, 1/2 of 50%)\n'
          'vvt train: error: checkpoint step 12 could not be written to /run|x|: file too large\n')
  assert without_progress(text) == [
      'vvt train: resumed from step 4', 'vvt: SIGINT again: exiting at once',
      '[eval] test: video top-1 0.500 (8 videos, 2 views/video, 1/2 of 50%)',
      'vvt train: error: checkpoint step 12 could not be written to /run|x|: file too large']


def test_the_filter_drops_what_a_real_bar_writes_at_any_speed():
  """A real tqdm bar, its clock set so that it draws every rate format (fast, slow, unknown), beside messages."""
  out = io.StringIO()
  bar = tqdm(total=4, desc='eval test 1x3', unit='batch', file=out, mininterval=0, miniters=1, leave=False)
  clock = [bar.start_t]
  bar._time = lambda: clock[0]
  for dt in (0.01, 3.0, 0.5, 120.0):
    clock[0] += dt
    bar.update(1)
    bar.write('vvt eval: a message', file=out)
  bar.close()
  text = out.getvalue()
  assert 'batch/s]' in text and 's/batch]' in text, text
  assert without_progress(text) == ['vvt eval: a message'] * 4, text


def test_the_vvt_commands_stderr_filter_keeps_bars_on_a_terminal_and_off_a_redirected_child(bars_not_forced,
                                                                                             tmp_path):
  """`vvt` points descriptor 2 at its stderr filter's pipe (`native_stderr`): on a terminal, the bars still show, also
  in a child on the same stderr; a child whose stderr is a log file draws none."""
  del bars_not_forced
  child = 'import sys; from vvt import progress; print("child", progress.shown(), file=sys.stderr)'
  code = ('import subprocess, sys; from vvt.cli import native_stderr; assert native_stderr.install(); '
          'from vvt import progress; b = progress.bar(3, "work", "video", mininterval=0); b.update(3); b.close(); '
          f'subprocess.run([sys.executable, "-c", {child!r}]); '
          f'subprocess.run([sys.executable, "-c", {child!r}], stderr=open({str(tmp_path / "log")!r}, "w"))')
  terminal, reader = _pty_pair()
  try:
    proc = subprocess.run([sys.executable, '-c', code], stderr=terminal, cwd=REPO, timeout=120)
    terminal.close()
    got = b''
    while b'child' not in got and select.select([reader], [], [], 60)[0]:
      got += reader.read(4096)
  finally:
    terminal.close()
    reader.close()
  assert proc.returncode == 0
  assert b'work: 100%|' in got and b'child True' in got, got
  assert (tmp_path / 'log').read_text() == 'child False\n'
