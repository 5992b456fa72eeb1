"""Fault class 7: interrupts (Ctrl-C, and SIGTERM as a preempted TPU VM receives).

A real `python -m vvt train` process on the tiny config gets SIGINT or SIGTERM after its first
steps. It must save a checkpoint at the step it reached, print one line (no traceback) and exit
promptly with 130 (SIGINT) or 143 (SIGTERM); the same command then resumes from that checkpoint
and finishes, and metrics.jsonl has every step once. A second signal exits at once and leaves no
damaged checkpoint behind.
"""
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'train'))
import train_helpers as common  # noqa: E402

from tests.cli.test_sweep import vvt_in_process  # noqa: E402
from tests.command_output import HANG_S  # noqa: E402
from tests.command_output import without_progress  # noqa: E402
from vvt.train import checkpoints  # noqa: E402

STEPS = 12
# no periodic checkpoint before the end: the one found after the signal is the interrupt's
ARGS = [f'--config.num_train_steps={STEPS}', '--config.checkpoint.every_steps=100',
        '--config.log_every_steps=1']
# Hang guards (>= 20x the quiet time): a second signal is sent once the first is acknowledged, while the trainer
# saves (>= 0.5 s, longer when the machine is busy) and the test polls every 0.05 s.
SAVED_S = 120  # from the signal to the one-line message (checkpoint saved): 0.5 s on a quiet machine
EXIT_S = 240  # from the signal to the end of the process (2.6 s quiet; the CPU is shared in the suite)


class Training:
  """`python -m vvt train` in a subprocess, its stdout read line by line."""

  def __init__(self, data, wd):
    self.proc = subprocess.Popen(
        [common.PY, '-m', 'vvt', 'train', '--config', f'{common.TINY}:{data}', '--workdir',
         str(wd), *ARGS], cwd=common.REPO, env=common.env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    self.lines, self.err_lines = [], []  # stderr: (time, line)
    self._readers = [threading.Thread(target=self._read, daemon=True),
                     threading.Thread(target=self._read_err, daemon=True)]
    for r in self._readers:
      r.start()

  def _read(self):
    for line in self.proc.stdout:
      self.lines.append(line)

  def _read_err(self):
    for line in self.proc.stderr:
      self.err_lines.append((time.time(), line))

  def wait_for(self, text, timeout=HANG_S):
    deadline = time.time() + timeout
    while not any(text in l for l in self.lines):
      assert self.proc.poll() is None, ''.join(self.lines) + self.proc.stderr.read()
      assert time.time() < deadline, f'no {text!r} in {timeout}s'
      time.sleep(0.05)

  def wait_for_err(self, text, timeout=HANG_S):
    """Until `text` is in a stderr line (or the process has ended)."""
    deadline = time.time() + timeout
    while not any(text in l for _, l in self.err_lines) and self.proc.poll() is None:
      assert time.time() < deadline, f'no {text!r} on stderr in {timeout}s'
      time.sleep(0.05)

  def signal_and_wait(self, signum, again: str = ''):
    """Sends `signum`, and again with `again`: 'save' once the first is acknowledged (during the save), 'saved'
    once its one line says the checkpoint is saved (while the process ends) -> (exit code, seconds to the exit,
    seconds to the last stderr line, stderr, stdout)."""
    t0 = time.time()
    self.proc.send_signal(signum)
    if again == 'save':
      self.wait_for('saving a checkpoint', timeout=60)
      self.proc.send_signal(signum)
    elif again == 'saved':
      self.wait_for_err('checkpoint saved at step')
      with contextlib.suppress(ProcessLookupError):
        self.proc.send_signal(signum)
    code = self.proc.wait(timeout=300)
    took = time.time() - t0
    for r in self._readers:
      r.join(10)
    said = self.err_lines[-1][0] - t0 if self.err_lines else None
    return code, took, said, ''.join(l for _, l in self.err_lines), ''.join(self.lines)


def _train_steps(wd):
  recs = [json.loads(l) for l in open(os.path.join(wd, 'metrics.jsonl'))]
  return [r['step'] for r in recs if r['kind'] == 'train']


@pytest.mark.parametrize('signum,code', [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=['SIGINT', 'SIGTERM'])
def test_first_signal_saves_at_the_step_reached_and_exits(tiny_data, tmp_path, capsys, signum, code):
  """SIGINT is sent a second time once its line says the checkpoint is saved: Ctrl-C pressed again while the
  process ends adds no line and no traceback."""
  wd = str(tmp_path / 'run')
  run = Training(tiny_data, wd)
  run.wait_for(f'step 2/{STEPS}')
  rc, took, said, err, out = run.signal_and_wait(signum, again='saved' if signum == signal.SIGINT else '')
  name = signal.Signals(signum).name
  assert rc == code, (rc, out, err)
  lines = without_progress(err)
  assert len(lines) == 1 and 'Traceback' not in err, err
  steps = checkpoints.all_steps(wd)
  assert len(steps) == 1 and 2 <= steps[0] < STEPS, steps
  assert lines[0] == (f'vvt train: interrupted ({name}): checkpoint saved at step {steps[0]} in '
                      f'{checkpoints.checkpoint_dir(wd)}; the same command resumes the run'), err
  assert f'[train] {name}: saving a checkpoint' in out
  assert said < SAVED_S and took < EXIT_S, f'{said:.1f}s to the message, {took:.1f}s to the exit'
  checkpoints.verify_step(wd, steps[0])
  assert max(_train_steps(wd)) <= steps[0]

  if signum == signal.SIGINT:  # resume (in this process: its files are read): finishes, every step logged once
    resumed = vvt_in_process(capsys, 'train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', wd, *ARGS)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f'resumed from {checkpoints.checkpoint_dir(wd)}/{steps[0]}' in resumed.stdout
    assert _train_steps(wd) == list(range(1, STEPS + 1)), _train_steps(wd)
    recs = [(r['kind'], r['step']) for r in map(json.loads, open(os.path.join(wd, 'metrics.jsonl')))]
    assert len(recs) == len(set(recs)), recs
    assert checkpoints.all_steps(wd) == [steps[0], STEPS]
    assert os.path.exists(checkpoints.eval_results_path(wd, STEPS, 'test'))


def test_second_signal_exits_at_once_and_damages_nothing(tiny_data, tmp_path):
  wd = str(tmp_path / 'run')
  run = Training(tiny_data, wd)
  run.wait_for(f'step 2/{STEPS}')
  rc, took, said, err, out = run.signal_and_wait(signal.SIGINT, again='save')
  assert rc == 130, (rc, out, err)
  assert without_progress(err) == ['vvt: SIGINT again: exiting at once'], err
  assert took < EXIT_S and said < SAVED_S, f'{said:.1f}s to the message, {took:.1f}s to the exit'
  for step in checkpoints.all_steps(wd):  # a save cut short never committed
    checkpoints.verify_step(wd, step)
