"""Fault classes 8-12: the process and its storage (a file where checkpoints/ should be, a config that does not
fit an intact checkpoint, Ctrl-C at start-up (Ctrl-C after the save: test_interrupts.py), NaN or lying weight
files, a full disk, a read-only workdir, a process of a multi-process run killed).

Every fault is made for real (files on disk, a small filesystem, signals to a real `vvt` process, two processes
with jax.distributed on 127.0.0.1, one of them SIGKILLed) and checked through the command line: the exit code, the
one line naming the file / parameter / process, no traceback, and that nothing good was lost (the previous
checkpoint verifies and restores; intact steps are not moved aside).

"At once" is measured from the process's error line to its end (EXIT_S), not from its start, so a busy machine
does not fail them; every other deadline is a hang guard far above the normal time. stderr is read without
progress bars (tests/command_output.py).
"""
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import chex
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'train'))
import train_helpers as common  # noqa: E402

from tests.cli.test_sweep import vvt_in_process  # noqa: E402
from tests.command_output import HANG_S  # noqa: E402
from tests.command_output import run_timed  # noqa: E402
from tests.command_output import without_progress  # noqa: E402
from vvt.train import checkpoints  # noqa: E402

ARGS = common.ARGS_8_STEPS  # the shared run's (conftest.trained_8_steps)
# From the error line to the end of the process: under 2 s even on a busy machine; a process that used to hang
# (orbax's threads waited 300 s after the error) must end well before this.
EXIT_S = 150  # far below the 300 s hang, far above the seconds a loaded machine takes
GUARD_S = 300  # a hang guard for what takes seconds (a first training step, a checkpoint after a step)


def _vvt(*args, prefix=()):
  """`vvt ARGS` -> (exit code, stderr lines less progress bars, stdout); fails the test if the process does not
  end within EXIT_S of its last stderr line (its error), or hangs."""
  code, out, err, exit_after = run_timed([*prefix, common.PY, '-m', 'vvt', *args], cwd=common.REPO, env=common.env())
  if code and err.strip():
    assert exit_after < EXIT_S, f'{exit_after:.1f} s from the error line to the end: {err[-2000:]}'
  return code, without_progress(err), out


def _in_process(capsys, *args):
  """`vvt ARGS` through the CLI's `main(argv)` in this process (a refusal, or a command whose files are read) ->
  (exit code, stderr lines less progress bars, stdout), as `_vvt` gives."""
  res = vvt_in_process(capsys, *args)
  return res.returncode, without_progress(res.stderr), res.stdout


def _one_line(code, lines, want_code=1):
  assert code == want_code and len(lines) == 1, (code, lines)
  assert 'Traceback' not in lines[0]
  return lines[0]


def _intact(wd, step, reference):
  """Step `step` of `wd` verifies and restores the arrays of the untouched `reference` run."""
  checkpoints.verify_step(wd, step)
  chex.assert_trees_all_equal(checkpoints.load_params(wd, step)[0], checkpoints.load_params(reference, step)[0])


# ------------------------------------------------------------------------------------------------- storage


def test_a_file_in_place_of_checkpoints_is_one_line_at_once(tiny_data, tmp_path, capsys):
  """Before: `vvt train` trained, failed its first save, printed the error and hung for 300 s (orbax's save
  threads waiting for a step directory that was never created). The train is a process (its end is what is timed);
  the eval refusal, which starts no save, runs through `main(argv)` in this process."""
  wd = tmp_path / 'run'
  wd.mkdir()
  (wd / 'checkpoints').write_text('not a directory')
  line = _one_line(*_vvt('train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), *ARGS)[:2])
  assert line.startswith('vvt train: error: ') and f'{wd}/checkpoints is a file, not a directory' in line, line
  assert (wd / 'checkpoints').read_text() == 'not a directory'
  line = _one_line(*_in_process(capsys, 'eval', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd))[:2])
  assert f'{wd}/checkpoints (the directory is a file, not a directory)' in line, line


@contextlib.contextmanager
def small_filesystem(path, size_kb):
  """A tmpfs of `size_kb` at `path` (root with mount permission), else None (the caller limits file sizes)."""
  os.makedirs(path, exist_ok=True)
  mounted = os.geteuid() == 0 and subprocess.run(
      ['mount', '-t', 'tmpfs', '-o', f'size={size_kb}k', 'tmpfs', str(path)], capture_output=True).returncode == 0
  try:
    yield mounted
  finally:
    if mounted:
      subprocess.run(['umount', '-l', str(path)], check=False)


def _fill(path, leave_kb):
  """Writes a filler file until `leave_kb` KB are left on the filesystem of `path`."""
  st = os.statvfs(path)
  free = st.f_bavail * st.f_frsize - leave_kb * 1024
  with open(os.path.join(path, 'filler'), 'wb') as f:
    f.write(b'\0' * max(0, free))


def _limit_file_size(limit):
  """The prefix of a `python -m vvt ...` command line that runs it with writes past `limit` bytes failing with
  EFBIG (RLIMIT_FSIZE, SIGXFSZ ignored)."""
  return (common.PY, '-c', 'import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); '
          f'resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit})); '
          'sys.argv = sys.argv[sys.argv.index("vvt"):]; runpy.run_module("vvt", run_name="__main__")')


def test_a_full_disk_while_a_checkpoint_is_written_keeps_the_previous_one(trained, tiny_data, tmp_path):
  """A resumed run whose next checkpoint (step 12) meets a full disk: one line with the reason and the last
  intact step, exit 1; step 8 verifies and restores. Real ENOSPC on a small tmpfs where mount is allowed, else
  EFBIG from a file size limit (`ulimit -f`) in the `vvt` process."""
  small = tmp_path / 'small'
  with small_filesystem(small, 4096) as mounted:
    wd = shutil.copytree(trained, small / 'run')
    resume = ['train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd),
              '--config.num_train_steps=12', '--config.checkpoint.every_steps=4', '--allow_config_change']
    if mounted:
      _fill(str(small), leave_kb=96)
      code, lines, out = _vvt(*resume)
      reason = 'no space left on the device'
    else:
      code, lines, out = _vvt(*resume, prefix=_limit_file_size(100_000))
      reason = 'file too large'
    line = _one_line(code, lines)
    assert line.startswith('vvt train: error: checkpoint step 12 could not be written to ') and reason in line, line
    assert 'the last checkpoint, step 8, is intact' in line, line
    assert 'resumed from' in out
    assert checkpoints.all_steps(str(wd)) == [4, 8]
    _intact(str(wd), 8, trained)


def _read_only(path):
  """Makes `path` read-only for a `vvt` process -> the prefix of that process's command line and the reason its
  error gives: a read-only remount of the tmpfs, else a directory without write permission (for root, run with
  the file-permission capabilities dropped)."""
  if subprocess.run(['mount', '-o', 'remount,ro', str(path)], capture_output=True).returncode == 0:
    return (), 'read-only file system'
  for root, dirs, _ in os.walk(path):
    for d in dirs:
      os.chmod(os.path.join(root, d), 0o555)
  os.chmod(path, 0o555)
  prefix = ('setpriv', '--bounding-set', '-dac_override,-dac_read_search,-fowner') if os.geteuid() == 0 else ()
  return prefix, 'permission denied'


def test_a_read_only_workdir_is_one_line_before_any_work(trained, tiny_data, tmp_path):
  small = tmp_path / 'small'
  with small_filesystem(small, 8192) as mounted:
    base = small if mounted else tmp_path / 'local'
    wd = shutil.copytree(trained, base / 'run')
    prefix, reason = _read_only(base)
    try:
      code, lines, out = _vvt('train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), *ARGS,
                              prefix=prefix)
      line = _one_line(code, lines)
      assert line == f'vvt train: error: cannot write to the run directory {wd}: {reason}', line
      assert '[train]' not in out
    finally:
      if mounted:
        subprocess.run(['mount', '-o', 'remount,rw', str(small)], check=False)
      for root, dirs, _ in os.walk(base):
        for d in dirs:
          os.chmod(os.path.join(root, d), 0o755)
    _intact(str(wd), 8, trained)


# ------------------------------------------------------------------------------------------- config mismatch


@pytest.mark.parametrize('change,says', [
    (['--config.model.hidden_size=64'], 'parameter embedding/conv/bias has shape (32,) in the checkpoint and (64,) '
                                        'in the config'),
    (['--config.optimizer.name=sgd'], 'its optimizer state holds'),
], ids=['width', 'optimizer'])
def test_a_config_that_does_not_fit_an_intact_checkpoint_is_no_damage(trained, tmp_path, capsys, change, says):
  """Before: 'no intact checkpoint in ...: step 8: damaged checkpoint file ...' (and a resume would have moved
  intact steps aside had an older one loaded). Refusals before any training step: through `main(argv)` in this
  process."""
  wd = shutil.copytree(trained, tmp_path / 'run')
  want = f'checkpoint step 8 in {checkpoints.checkpoint_dir(str(wd))} does not fit the config (its files are intact)'
  runs = [('train', '--workdir', str(wd), '--allow_config_change', *change)]
  if change[0].startswith('--config.model'):
    runs.append(('eval', '--workdir', str(wd), *change))
  for args in runs:
    line = _one_line(*_in_process(capsys, *args)[:2])
    assert want in line and says in line and 'damaged' not in line, line
  assert not os.path.exists(os.path.join(wd, 'damaged_checkpoints'))
  assert checkpoints.all_steps(str(wd)) == [4, 8]
  _intact(str(wd), 8, trained)


# ------------------------------------------------------------------------------------------------- signals


class Training:
  """`python -m vvt train ARGS` in a subprocess; stdout and stderr read line by line."""

  def __init__(self, *args):
    self.proc = subprocess.Popen([common.PY, '-m', 'vvt', 'train', *args], cwd=common.REPO, env=common.env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    self.out, self.err = [], []
    self._readers = [threading.Thread(target=self._read, args=(s, l), daemon=True)
                     for s, l in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
    for r in self._readers:
      r.start()

  @staticmethod
  def _read(stream, lines):
    for line in stream:
      lines.append(line)

  def wait_for(self, text, where=None, timeout=GUARD_S):
    lines = self.out if where is None else where
    deadline = time.time() + timeout
    while not any(text in l for l in lines):
      if self.proc.poll() is not None:  # ended: what it wrote last may still be on its way
        for r in self._readers:
          r.join(10)
        assert any(text in l for l in lines), ''.join(self.out + self.err)
        return
      assert time.time() < deadline, f'no {text!r} in {timeout}s'
      time.sleep(0.05)

  def finish(self, timeout=HANG_S):
    code = self.proc.wait(timeout=timeout)
    for r in self._readers:
      r.join(GUARD_S)
    return code, without_progress(''.join(self.err)), ''.join(self.out)

  def wait_for_libraries(self, timeout=GUARD_S):
    """Until the process maps jaxlib or TensorFlow: the heavy imports have begun, so `vvt train` records a signal
    (vvt.train.signals.record_early, installed before them), and its first training step is seconds away."""
    deadline = time.time() + timeout
    while True:
      try:
        with open(f'/proc/{self.proc.pid}/maps') as f:
          if any('/jaxlib/' in l or '/tensorflow/' in l for l in f):
            return
      except OSError:
        pass
      assert self.proc.poll() is None, ''.join(self.out + self.err)
      assert time.time() < deadline, f'no jaxlib or TensorFlow loaded in {timeout} s'
      time.sleep(0.02)


def test_ctrl_c_at_start_up_is_one_line_and_saves_nothing(tiny_data, tmp_path):
  """Before: a SIGINT while the libraries loaded or the program was built was raised inside library code: swallowed
  (the run went on) or printed as 'Exception ignored in ...' with a traceback, then a checkpoint at step 1."""
  wd = tmp_path / 'run'
  run = Training('--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), *ARGS)
  run.wait_for_libraries()
  assert run.proc.poll() is None and not any('[train] step' in l for l in run.out)
  run.proc.send_signal(signal.SIGINT)
  code, lines, out = run.finish()
  line = _one_line(code, lines, want_code=130)
  assert line == ('vvt train: interrupted (SIGINT) during start-up, before the first training step: nothing to '
                  'save'), line
  assert checkpoints.all_steps(str(wd)) == []


# ------------------------------------------------------------------------------------------- weight imports


def test_import_of_nan_weights_and_of_lying_offsets_is_refused_naming_the_file(trained, tmp_path, capsys):
  """Through `main(argv)` in this process: the refusals are found before anything is written."""
  from safetensors import safe_open
  from safetensors.numpy import load_file
  from safetensors.numpy import save_file
  good = str(tmp_path / 'good.safetensors')
  assert _in_process(capsys, 'export', '--workdir', trained, '--output', good)[0] == 0
  with safe_open(good, 'numpy') as f:
    metadata = f.metadata()
  tensors = load_file(good)
  nan = str(tmp_path / 'nan.safetensors')
  save_file({k: np.full_like(v, np.nan) for k, v in tensors.items()}, nan, metadata=metadata)
  one_inf = str(tmp_path / 'one_inf.safetensors')
  name = 'head/output_projection/kernel'
  save_file({**tensors, name: np.where(np.arange(tensors[name].size).reshape(tensors[name].shape) == 3, np.inf,
                                       tensors[name]).astype(np.float32)}, one_inf, metadata=metadata)
  header = json.dumps({'w': {'dtype': 'F32', 'shape': [4, 4], 'data_offsets': [0, 64]}}).encode()
  offsets = tmp_path / 'offsets.safetensors'
  offsets.write_bytes(len(header).to_bytes(8, 'little') + header + b'\0' * 16)

  cases = [(nan, [f'{nan}: NaN or infinite values in {len(tensors)} of {len(tensors)} tensors',
                  'embedding/conv/bias (all of 32 values)']),
           (one_inf, [f'{one_inf}: NaN or infinite values in 1 of {len(tensors)} tensors',
                      f'{name} (1 of 128 values)']),
           (str(offsets), [f"{offsets}: tensor 'w': its data offsets [0, 64] lie past the end of the file"])]
  for path, says in cases:
    out = tmp_path / ('out_' + os.path.basename(path))
    line = _one_line(*_in_process(capsys, 'export', '--import', path, '--output', str(out))[:2])
    assert line.startswith('vvt export: error: ') and all(s in line for s in says), line
    assert not os.path.exists(out / 'checkpoints'), 'a checkpoint was written'
  code, _, _ = _in_process(capsys, 'export', '--import', good, '--output', str(tmp_path / 'out_good'))
  assert code == 0 and checkpoints.all_steps(str(tmp_path / 'out_good')) == [0]


# -------------------------------------------------------------------------------------------- a lost process


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


HEARTBEAT_S = 5
# From the kill to the survivor's exit: the heartbeat timeout and a beat or two (about 6 s); the bound is a hang
# guard (jax's own timeout, which the watch must beat, is 15 s; the line says which of the two acted).
LOST_S = HEARTBEAT_S + 60


def _note_names_a_checkpoint(proc):
  """Whether the watch of `proc` (a `vvt train` process) has noted where its last checkpoint is (the note file of
  the `vvt` program's stderr filter, vvt.cli.native_stderr: $TMPDIR/vvt-stderr-note-<pid>)."""
  try:
    with open(os.path.join(tempfile.gettempdir(), f'vvt-stderr-note-{proc.pid}'), encoding='utf-8') as f:
      return 'the last checkpoint is step' in f.read()
  except OSError:
    return False


def _two_processes_one_killed(tiny_data, wd, killed):
  """Two `vvt train` processes (jax.distributed on 127.0.0.1); process `killed` is SIGKILLed once a checkpoint is
  on disk -> the survivor's (exit code, stderr lines less gloo's, seconds from the kill to its exit)."""
  port = _free_port()
  procs = [Training('--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd),
                    '--config.num_train_steps=100000', '--config.checkpoint.every_steps=5',
                    '--config.log_every_steps=5', '--config.eval.every_steps=0',
                    '--config.distributed.initialize=True',
                    f'--config.distributed.coordinator_address=127.0.0.1:{port}',
                    '--config.distributed.num_processes=2', f'--config.distributed.process_id={i}',
                    f'--config.distributed.heartbeat_timeout_seconds={HEARTBEAT_S}') for i in range(2)]
  try:
    procs[0].wait_for('step 10/', timeout=HANG_S)
    deadline = time.time() + GUARD_S
    survivor = procs[1 - killed].proc
    while not (checkpoints.steps_on_disk(str(wd)) and _note_names_a_checkpoint(survivor)):  # its watch has seen it
      assert time.time() < deadline and survivor.poll() is None, 'no checkpoint noted before the kill'
      time.sleep(0.1)
    t0 = time.time()
    procs[killed].proc.kill()
    code, lines, _ = procs[1 - killed].finish(timeout=LOST_S + 60)
    took = time.time() - t0
  finally:
    for p in procs:
      if p.proc.poll() is None:
        p.proc.kill()
  return code, [l for l in lines if not l.startswith('[Gloo]')], took


def _last_checkpoint_restores(wd, line, newest=True):
  """The step `line` names is on disk (the newest one if `newest`); the newest verifies and restores."""
  steps = checkpoints.steps_on_disk(str(wd))
  said = int(line.split('the last checkpoint is step ')[1].split(' ')[0])
  assert f'the last checkpoint is step {said} in {checkpoints.checkpoint_dir(str(wd))}' in line, line
  assert said == steps[-1] if newest else said in steps, (said, steps)
  checkpoints.verify_step(str(wd), steps[-1])
  params, _ = checkpoints.load_params(str(wd), steps[-1])
  assert all(np.isfinite(np.asarray(x)).all() for x in __import__('jax').tree.leaves(params))


def test_a_killed_process_is_named_by_the_survivor_which_exits_in_bounded_time(tiny_data, tmp_path):
  """Process 1 is SIGKILLed after a checkpoint. Before: process 0 waited in a collective / orbax's commit barrier
  until jax's heartbeat timeout (100 s by default), then aborted with a native stack trace (exit -6). Now: one line
  naming process 1 within the heartbeat timeout (+ the watch's period: about 6 s; LOST_S is a hang guard), exit 1;
  the last checkpoint verifies and restores."""
  wd = tmp_path / 'run'
  code, lines, took = _two_processes_one_killed(tiny_data, wd, killed=1)
  line = _one_line(code, lines)
  assert line.startswith(f'vvt train: error: process 1 of 2 was lost (no heartbeat for {HEARTBEAT_S} s'), line
  assert took < LOST_S, f'{took:.1f}s from the kill to the exit'
  _last_checkpoint_restores(wd, line)


def test_a_killed_coordinator_is_named_by_the_survivor_instead_of_jax_s_abort(tiny_data, tmp_path):
  """Process 0 (it runs jax's coordination service) is SIGKILLed after a checkpoint. jax's client in process 1
  aborts at once (SIGABRT) with its fatal record and a native stack trace, before vvt's watch can act; the `vvt`
  program's stderr filter puts vvt's line in their place. Before: `Terminating process because the JAX distributed
  service detected fatal errors` and the stack trace were the survivor's last lines."""
  wd = tmp_path / 'run'
  code, lines, took = _two_processes_one_killed(tiny_data, wd, killed=0)
  assert code != 0 and lines, (code, lines)
  assert lines[-1].startswith('vvt train: error: process 0, the coordinator of this multi-process run'), lines
  assert 'was lost (killed, crashed or its host is down); this process stops; the last checkpoint is' in lines[-1]
  assert not any(l.startswith(('@ ', '*** Check failure', 'F1', 'Fatal Python error', 'Traceback'))
                 or 'Terminating process' in l for l in lines), lines
  assert took < LOST_S, f'{took:.1f}s from the kill to the exit'
  _last_checkpoint_restores(wd, lines[-1], newest=False)  # the watch's note: as of its last beat


def test_heartbeat_timeout_is_validated_before_any_work(tiny_data, tmp_path, capsys):
  code, lines, _ = _in_process(capsys, 'train', '--config', f'{common.TINY}:{tiny_data}', '--workdir',
                               str(tmp_path / 'run'), '--config.distributed.heartbeat_timeout_seconds=0')
  line = _one_line(code, lines, want_code=2)
  assert 'distributed.heartbeat_timeout_seconds' in line, line



def test_storage_errors_are_told_by_their_errno_also_in_a_library_s_words():
  """The reasons of the one line: from an OSError's errno anywhere in the cause chain, or from tensorstore's text
  (it raises ValueError); other errors are not storage errors."""
  import errno

  from vvt.train import storage
  tensorstore = ValueError('RESOURCE_EXHAUSTED: Error writing "params.w/0" in OCDBT database: Failed to write 171058 '
                           "bytes to file 6: No space left on device [os_error_code='28']")
  try:
    try:
      raise OSError(errno.EROFS, 'Read-only file system', '/run/config.json')
    except OSError as e:
      raise RuntimeError('orbax: save failed') from e
  except RuntimeError as e:
    chained = e
  cases = [(tensorstore, 'what: no space left on the device'),
           (chained, 'what: read-only file system (/run/config.json)'),
           (OSError(errno.EDQUOT, 'Disk quota exceeded'), 'what: disk quota exceeded'),
           (OSError(errno.EFBIG, 'File too large'), 'what: file too large (over the file size limit of this process, '
                                                    '`ulimit -f`)')]
  for error, says in cases:
    assert str(storage.write_error(error, 'what')) == says
  assert storage.write_error(ValueError('Requested shape (64,) is not compatible'), 'what') is None
  assert storage.write_error(FileNotFoundError(errno.ENOENT, 'No such file'), 'what') is None
