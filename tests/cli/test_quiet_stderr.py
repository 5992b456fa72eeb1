"""Quiet stderr on every CPU: the native libraries' start-up lines (absl's pre-initialisation warning, oneDNN and
the CPU-feature guard, libtpu's probe) never reach a `vvt` command's stderr unless --verbose, while their real
errors still do. oneDNN is forced on (`TF_ENABLE_ONEDNN_OPTS=1`) so that TensorFlow prints its lines on any x86
CPU, not only on those with AVX-512."""
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.data import data_helpers
from vvt.cli import native_stderr

TINY = 'tests/train/tiny_config.py'
# vvt's own stderr: its one-line messages ('vvt train: ...') and progress bars ('eval test 1x3:  50%|##  | 1/2 ...')
OWN = re.compile(r'^(vvt [a-z]+|.*: +\d+%\|.*\| *\d+/\d+ )')

# Lines as TensorFlow 2.21 and libtpu print them (on an AVX-512 host / without a TPU).
NOISE = [
    b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR',
    b'I0000 00:00:1795595100.884148    2081 port.cc:153] oneDNN custom operations are on. You may see slightly '
    b'different numerical results due to floating-point round-off errors from different computation orders. '
    b'To turn them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.',
    b'I0000 00:00:1795595108.414840    2097 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use '
    b'available CPU instructions in performance-critical operations.',
    b'To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 AVX_VNNI FMA, in other '
    b'operations, rebuild TensorFlow with the appropriate compiler flags.',
    b'W1125 08:12:01.000123    2097 cuda_executor.cc:1000] a warning record of a native library',
    b'Failed to find host bounds for accelerator type: WARNING: could not determine TPU accelerator type, please '
    b'set env var `TPU_ACCELERATOR_TYPE` manually, otherwise libtpu.so may not properly initialize.',
    b'WARNING: Logging before InitGoogle() is written to STDERR',
    b"E0000 00:00:1795595121.978415    2123 common_lib.cc:554] INVALID_ARGUMENT: Error: unexpected worker "
    b"hostname 'WARNING: could not determine TPU worker hostnames or IP addresses' from env var "
    b"TPU_WORKER_HOSTNAMES.",
    b'=== Source Location Trace: ===',
    b'learning/45eac/tfrc/runtime/libtpu_init_utils.cc:327',
]
REAL = [
    b'E1125 08:12:03.000001    2097 op_kernel.cc:1830] OP_REQUIRES failed at example_parsing_ops.cc:98 : '
    b'INVALID_ARGUMENT: Feature: image/encoded (data type: string) is required but could not be found.',
    b'F1125 08:12:04.000001    2097 tpu_executor.cc:77] Check failed: device != nullptr',
    b'=== Source Location Trace: ===',
    b'third_party/tensorflow/core/platform/status.cc:12',
    b'Fatal Python error: Segmentation fault',
    b'Traceback (most recent call last):',
    b'  File "x.py", line 1, in <module>',
    b'ImportError: libtensorflow_framework.so.2: cannot open shared object file',
]


def test_the_filter_drops_start_up_lines_and_keeps_errors():
  assert native_stderr.is_noise(NOISE) == [True] * len(NOISE)
  assert native_stderr.is_noise(REAL) == [False] * len(REAL)
  # a real error's trace is kept even right after noise
  assert native_stderr.is_noise([NOISE[1], REAL[1], REAL[2], REAL[3]]) == [True, False, False, False]


# The survivor of a two-process `vvt train` whose process 0 was SIGKILLed (jax 0.8, CPU): the coordination
# service's error records, jax's fatal record, its native stack trace and, with Python's fault handler on, the dump
# of the Python threads (recorded from a real run and a real abort).
COORDINATOR_LOST = [
    b'E1125 11:50:31.751289    1221 preemption_sync_manager.cc:159] Failed to cancel preemption barrier: '
    b'FAILED_PRECONDITION: Tried to cancel non-existent barrier PREEMPTION_SYNC_BARRIER. '
    b"[type.googleapis.com/tensorflow.CoordinationServiceError='']",
    b'E1125 11:49:43.941749     659 coordination_service_agent.cc:289] Polled an error from coordination service '
    b'(this can be an error from this or another task).',
    b'F1125 11:48:10.831002    1522 client.h:80] Terminating process because the JAX distributed service detected '
    b'fatal errors. This most likely indicates that another task died; see the other task logs for more details. '
    b'Disable Python buffering, i.e. `python -u`, to be sure to see all the previous output. absl::Status: '
    b'UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was preempted/died/restarted '
    b'unexpectedly or this task is experiencing network issues. Check earlier logs from 1) this task, 2) the leader '
    b'(usually slice 0 task 0), and 3) cluster scheduler to debug further.',
    b'Additional GRPC error information from remote target coordination_service while calling '
    b'/xla.coordination.CoordinationService/PollForError:',
    b':UNKNOWN:Error received from peer  {grpc_status:14, grpc_message:"Socket closed"}',
    b'*** Check failure stack trace: ***',
    b'    @     0x7f2ad1940634  absl::lts_20260107::log_internal::LogMessage::SendToLog()',
    b'    @     0x7f2ad19405b6  absl::lts_20260107::log_internal::LogMessage::Flush()',
    b'    @     0x7f2ad199a82e  std::_Function_handler<>::_M_invoke()',
    b'    @     0x7f2acda040ee  xla::CoordinationServiceAgent::SetError()',
    b'    @     0x7f2acd9f0321  tsl::RPCState<>::OnCompleted()',
    b'    @     0x7f2ad17b906f  tsl::(anonymous namespace)::PThread::ThreadFn()',
    b'    @     0x7f2ae12a71f5  (unknown)',
    b'Fatal Python error: Aborted',
    b'',
    b'Thread 0x00007eff1cdfe6c0 (most recent call first):',
    b'  File "/usr/lib/python3.11/threading.py", line 982 in run',
    b'  File "/usr/lib/python3.11/threading.py", line 1045 in _bootstrap_inner',
    b'',
    b'Current thread 0x00007eff25485b80 (most recent call first):',
    b'  <no Python frame>',
    b'',
    b'Extension modules: numpy._core._multiarray_umath, numpy.linalg._umath_linalg (total: 2)',
]
VVT_LINE = b'vvt train: [train] step 10/100000 | loss 0.0007'


def _filtered(lines, chunk, **kw):
  f = native_stderr.NoiseFilter(**kw)
  data = b''.join(l + b'\n' for l in lines)
  return (b''.join(f.feed(data[i:i + chunk]) for i in range(0, len(data), chunk)) + f.close()).decode()


@pytest.mark.parametrize('chunk', [1 << 16, 7])
def test_jax_s_abort_on_a_lost_coordinator_becomes_one_line(tmp_path, chunk):
  """Only that abort is replaced: the errors around it (another error record, a Python traceback after it, the
  same trace lines without the fatal record) pass untouched; the note file ends the line."""
  note = tmp_path / 'note'
  note.write_text('the last checkpoint is step 10 in /run/checkpoints: the same command on every host resumes the run')
  out = _filtered([VVT_LINE, *COORDINATOR_LOST], chunk, prog='vvt train', note_file=str(note)).splitlines()
  assert out == [VVT_LINE.decode(),
                 "vvt train: error: process 0, the coordinator of this multi-process run (it runs jax's coordination "
                 'service), was lost (killed, crashed or its host is down); this process stops; the last checkpoint '
                 'is step 10 in /run/checkpoints: the same command on every host resumes the run']
  out = _filtered(COORDINATOR_LOST[2:3], chunk, note_file=str(tmp_path / 'absent')).splitlines()
  assert out == ["vvt: error: process 0, the coordinator of this multi-process run (it runs jax's coordination "
                 'service), was lost (killed, crashed or its host is down); this process stops; the checkpoints '
                 'written are intact: the same command on every host resumes the run']
  other = [*COORDINATOR_LOST[:2], REAL[0], *COORDINATOR_LOST[6:], *REAL[4:]]
  assert _filtered(other, chunk).splitlines() == [l.decode() for l in other]
  after = _filtered([*COORDINATOR_LOST, *REAL[5:]], chunk).splitlines()
  assert after[1:] == [l.decode() for l in REAL[5:]] and after[0].startswith('vvt: error: process 0')


def test_partial_lines_that_cannot_be_noise_pass_at_once():
  """A progress bar's '\\r' updates and vvt's own lines are not held back until their newline."""
  f = native_stderr.NoiseFilter()
  assert f.feed(b'\rpredict:  50%|#####') == b'\rpredict:  50%|#####'
  assert f.feed(b'     | 1/2') == b'     | 1/2'
  assert f.feed(b'\n' + NOISE[0][:20]) == b'\n'  # a line that may be noise waits for its end
  assert f.feed(NOISE[0][20:] + b'\nvvt train: inter') == b'vvt train: inter'
  assert f.feed(b'rupted\n' + REAL[0] + b'\n' + NOISE[1]) == b'rupted\n' + REAL[0] + b'\n'
  assert f.close() == b''  # the last, unterminated line is judged at the end of the stream


def _python(code, **env):
  e = dict(os.environ, PYTHONPATH=str(REPO), **env)
  return subprocess.run([sys.executable, '-c', code], env=e, capture_output=True, timeout=120)


def test_what_a_crashing_process_wrote_last_still_comes_out():
  """The filter outlives the process: native lines written just before an abort reach stderr, noise does not."""
  written = b''.join(l + b'\n' for l in NOISE + REAL)
  code = ('import os, sys; from vvt.cli import native_stderr; assert native_stderr.install(); '
          f'os.write(2, {written!r}); '
          'print("python line", file=sys.stderr); sys.stdout.write("out\\n"); sys.stdout.flush(); os.abort()')
  res = _python(code)
  assert res.returncode == -6 and res.stdout == b'out\n', res
  assert res.stderr.splitlines() == REAL + [b'python line'], res.stderr.decode()


def test_a_failing_library_import_still_shows_its_messages(tmp_path):
  """A TensorFlow that fails to load: its native error line and the import error both reach the user."""
  fake = tmp_path / 'fake' / 'tensorflow'
  fake.mkdir(parents=True)
  (fake / '__init__.py').write_text(
      'import os\n'
      "os.write(2, b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\\n')\n"
      "os.write(2, b'E0000 00:00:1795595121.978415    2123 loader.cc:12] could not load libtensorflow_cc.so.2\\n')\n"
      "raise ImportError('libtensorflow_cc.so.2: cannot open shared object file: No such file or directory')\n")
  e = dict(os.environ, PYTHONPATH=f'{tmp_path / "fake"}{os.pathsep}{REPO}')
  e.pop('TF_CPP_MIN_LOG_LEVEL', None)
  res = subprocess.run([sys.executable, '-m', 'vvt', 'data', 'synthetic', '--output', str(tmp_path / 'out'),
                        '--classes', '2', '--train-clips', '2', '--test-clips', '2'],
                       cwd=REPO, env=e, capture_output=True, text=True, timeout=300)
  lines = res.stderr.splitlines()
  assert res.returncode == 1, res.stderr
  assert lines[0].endswith('loader.cc:12] could not load libtensorflow_cc.so.2'), lines
  assert lines[-1].startswith('vvt data: error: ') and 'cannot open shared object file' in lines[-1], lines
  assert len(lines) == 2, lines


def _env():
  e = dict(os.environ, TF_ENABLE_ONEDNN_OPTS='1', JAX_PLATFORMS='cpu')
  e.pop('TF_CPP_MIN_LOG_LEVEL', None)  # the commands keep TensorFlow quiet themselves
  e['PYTHONPATH'] = str(REPO) + os.pathsep + e.get('PYTHONPATH', '')
  e['XLA_FLAGS'] = ' '.join(f for f in e.get('XLA_FLAGS', '').split() if 'device_count' not in f)
  return e


@pytest.fixture(scope='module')
def videos(tmp_path_factory):
  d = tmp_path_factory.mktemp('quiet_videos')
  for i, colour in enumerate([(200, 30, 30), (30, 200, 30)]):
    data_helpers.make_video(str(d / f'v{i}.mp4'), colour, num_frames=12, fps=8, size=(48, 48))
  (d / 'videos.csv').write_text('path,label\nv0.mp4,red\nv1.mp4,green\n')
  (d / 'classes.txt').write_text('red\ngreen\n')
  return d


# one view per video: the least evaluation, for train's final one too
ONE_VIEW = ('--config.dataset.num_test_clips=1', '--config.dataset.num_spatial_crops=1')


@pytest.mark.parametrize('verbose', [False, True], ids=['quiet', 'verbose'])
def test_commands_print_only_their_own_lines_on_stderr(tiny_data, videos, tmp_path, verbose):
  """`vvt data convert`, `train` (three steps), `eval` and `predict` with oneDNN forced on: stderr holds vvt's
  own lines alone; with --verbose the libraries' start-up lines are there."""
  flag = ['--verbose'] if verbose else []
  wd = str(tmp_path / 'run')
  commands = {
      'data convert': ['data', 'convert', '--input', str(videos / 'videos.csv'), '--classes',
                       str(videos / 'classes.txt'), '--output', str(tmp_path / 'converted' / 'train'),
                       '--shards', '1', '--short-side', '32', '--workers', '1', '--no-progress'],
      'train': ['train', '--config', f'{TINY}:{tiny_data}', '--workdir', wd, '--config.num_train_steps=3',
                '--config.checkpoint.every_steps=3', '--config.log_every_steps=1',
                '--config.schedule.warmup_steps=1', *ONE_VIEW],
      'eval': ['eval', '--workdir', wd, *ONE_VIEW],
      'predict': ['predict', '--workdir', wd, str(videos / 'v0.mp4'), *ONE_VIEW],
  }
  for name, args in commands.items():
    res = subprocess.run([sys.executable, '-m', 'vvt', *args, *flag], cwd=REPO, env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (name, res.stdout[-2000:], res.stderr[-3000:])
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    if verbose:
      assert any('oneDNN custom operations are on' in l for l in lines), (name, res.stderr[-3000:])
    else:
      assert all(OWN.match(l) for l in lines), (name, lines)
