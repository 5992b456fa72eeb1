"""Shared test set-up: CPU only, full-precision matmuls, repo paths, one compilation cache per session, quick
CPU code generation."""
import atexit
import os
import pathlib
import shutil
import tempfile

import pytest

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
# oneDNN forced on, as on every AVX-512 CPU (where TensorFlow turns it on itself): its start-up lines then appear
# on any x86 host, so the tests of quiet stderr fail wherever that noise comes back, not only on some machines.
os.environ['TF_ENABLE_ONEDNN_OPTS'] = '1'
# No progress bars (`vvt.progress`): their rates and redraws depend on the machine's speed, so a test that reads a
# command's stderr must not see them. Subprocesses inherit it; the tests of the bars themselves unset it.
os.environ['VVT_NO_PROGRESS'] = '1'


def _session_compilation_cache():
  """Many tests run the same tiny train/eval steps, in this process and in `vvt` subprocesses: XLA compiles
  each program once per test session and reads it back after (keys are the program's hash, so a cached
  executable is the one a fresh compile gives). The first process (pytest, or xdist's controller, whose
  environment the workers and every subprocess inherit) makes the folder and removes it at exit; the size
  bound turns on jax's file lock, so two processes never read a half-written entry."""
  if os.environ.get('JAX_COMPILATION_CACHE_DIR'):
    return
  path = tempfile.mkdtemp(prefix='vvt-tests-xla-cache-')
  os.environ['JAX_COMPILATION_CACHE_DIR'] = path
  os.environ.setdefault('JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS', '0.5')  # steps, not eager ops
  os.environ.setdefault('JAX_COMPILATION_CACHE_MAX_SIZE', str(4 << 30))
  atexit.register(shutil.rmtree, path, ignore_errors=True)


# XLA:CPU compile options for tiny programs (`_quick_cpu_codegen`).
QUICK_CPU_CODEGEN = ('--xla_backend_optimization_level=0', '--xla_cpu_use_fusion_emitters=false')


def _quick_cpu_codegen():
  """The tests' programs are tiny: their time is compiling, not running. Two code-generation costs are skipped:
  LLVM's optimisation of the CPU code (`--xla_backend_optimization_level=0`), and XLA:CPU's MLIR fusion emitters
  (`--xla_cpu_use_fusion_emitters=false`: fusions are emitted as LLVM IR directly, XLA's older path). The HLO
  passes are the same and XLA:CPU uses no fast-math either way, so results agree to float32 rounding.
  Measured (benchmarks/compile_options.py, BENCHMARKS.md): the backend compile of five tiny train-step programs
  13.0 s by default, 8.3 s with the first, 2.8 s with both. In XLA_FLAGS, so `vvt` subprocesses get them too;
  benchmarks never run under them."""
  flags = os.environ.get('XLA_FLAGS', '')
  extra = [f for f in QUICK_CPU_CODEGEN if f.split('=')[0] not in flags]
  os.environ['XLA_FLAGS'] = ' '.join([flags, *extra]).strip()


_session_compilation_cache()
_quick_cpu_codegen()
# No default profiler trace in the test runs (vvt.train.profile); a test that sets profile.steps still gets one.
os.environ.setdefault('VVT_DEFAULT_PROFILE', '0')



def _triton_before_tensorflow():
  """triton's native library (torch 2.14 loads it with torchvision, which timm imports: the PE video tests'
  transformers models) crashes the process (SIGSEGV) when it loads after TensorFlow's, which the data tests load
  at collection: where triton is installed it is loaded first (0.2 s of CPU)."""
  import importlib.util
  if importlib.util.find_spec('triton') is not None:
    importlib.import_module('triton._C.libtriton')


_triton_before_tensorflow()

import jax  # noqa: E402

jax.config.update('jax_default_matmul_precision', 'highest')

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / 'shared'
FIXTURES = SHARED / 'fixtures'


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory):
  """A tiny synthetic dataset (4 classes, 24 train and 8 test clips of 16 frames at 64 px) for the command and
  studies tests; the train and reliability tests define their own."""
  from vvt.data.writing import synthetic
  out = tmp_path_factory.mktemp('tiny_synthetic')
  synthetic.write_synthetic(str(out), num_classes=4, train_clips=24, test_clips=8, num_frames=16,
                            frame_size=64, seed=1, train_shards=2, test_shards=1)
  return str(out)


# --cpu-durations=N: the N tests (setup, call and teardown apart) that used the most CPU time, their own process's
# and the processes they waited for. Unlike --durations' wall times, CPU times barely change with the machine's
# load, so a test's cost can be measured with other work running beside it.
def pytest_addoption(parser):
  parser.addoption('--cpu-durations', type=int, default=None, metavar='N',
                   help='show the N tests that used the most CPU time (theirs and their subprocesses\'); 0: all')


def _cpu_seconds() -> float:
  import resource
  own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  item._vvt_cpu_mark = _cpu_seconds()
  yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  """After each phase (setup, call, teardown): its CPU seconds since the previous phase's report."""
  outcome = yield
  now = _cpu_seconds()
  outcome.get_result().user_properties.append(('cpu_s', now - getattr(item, '_vvt_cpu_mark', now)))
  item._vvt_cpu_mark = now


_CPU_REPORTS = []


def pytest_runtest_logreport(report):
  for key, value in report.user_properties:
    if key == 'cpu_s':
      _CPU_REPORTS.append((value, report.when, report.nodeid))


def pytest_terminal_summary(terminalreporter, config):
  n = config.getoption('--cpu-durations')
  if n is None or not _CPU_REPORTS:
    return
  rows = sorted(_CPU_REPORTS, reverse=True)
  total = sum(r[0] for r in rows)
  terminalreporter.write_sep('=', f'CPU time: {total:.1f} s in all; {"all" if n == 0 else f"the {n} most"}')
  for seconds, when, nodeid in rows[:n or None]:
    terminalreporter.write_line(f'{seconds:8.2f}s {when:<8} {nodeid}')
