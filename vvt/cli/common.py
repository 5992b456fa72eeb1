"""What every `vvt` command shares: argument parsing around the config loader, quiet logs, one-line errors."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
import warnings
from typing import Callable, Sequence

from vvt import fileio
from vvt import progress
from vvt.config import loader
from vvt.config import overrides as overrides_lib
from vvt.config import run_file
from vvt.config.errors import ConfigError

# Errors a user can cause and fix: printed as one line (the traceback only with --verbose).
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, PermissionError, KeyError,
               FloatingPointError, ImportError)


class UsageError(Exception):
  """A command-line argument is wrong (argparse's errors, as one line)."""


class _NoProgress(argparse.Action):
  """`--no-progress`: turns every progress bar off, in this process and the ones it starts (`vvt.progress`)."""

  def __init__(self, option_strings, dest, **kwargs):
    super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

  def __call__(self, parser, namespace, values, option_string=None):
    setattr(namespace, self.dest, True)
    progress.disable()


class Parser(argparse.ArgumentParser):
  """argparse with one-line errors; `--verbose` and `--no-progress` on every command."""

  def __init__(self, prog: str | None = None, doc: str | None = None, config: bool = False, **kwargs):
    kwargs.setdefault('formatter_class', argparse.RawDescriptionHelpFormatter)
    kwargs.setdefault('description', doc)
    super().__init__(prog=prog, **kwargs)
    self.add_argument('--verbose', action='store_true',
                      help='show library logs and, on an error, the traceback')
    self.add_argument('--no-progress', action=_NoProgress,
                      help=f'no progress bars (also for the processes it starts; or {progress.ENV}=1)')
    if config:
      self.add_argument('--config', metavar='FILE[:ARG]',
                        help='config file FILE.py[:ARG], a run\'s config.json, or a run directory; '
                             'then any field as --config.a.b=VALUE')

  def error(self, message):
    raise UsageError(f'{message} (see {self.prog} --help)')


def parse(parser: Parser, argv: Sequence[str]):
  """(args, config spec or None, [(field, raw value)]) from a command line."""
  argv = list(argv)
  if any(a in ('-h', '--help') for a in argv):
    parser.print_help()
    raise SystemExit(0)
  spec, overrides, rest = overrides_lib.split_argv(argv)
  args = parser.parse_args(rest)
  return args, spec, overrides


def skip_absent_tpu() -> None:
  """With libtpu installed (the `tpu` / `test` extras) but no TPU here, JAX's TPU probe prints several lines of
  warnings: JAX_PLATFORMS=cpu skips it (unless JAX_PLATFORMS is set, a TPU device file exists, or a GPU plugin
  is installed). `vvt memory` still compiles for TPU topologies: libtpu's deviceless compiler needs no backend."""
  import glob  # pylint: disable=g-import-not-at-top
  import importlib.util  # pylint: disable=g-import-not-at-top
  if 'JAX_PLATFORMS' in os.environ or importlib.util.find_spec('libtpu') is None:
    return
  if glob.glob('/dev/accel[0-9]*') or glob.glob('/dev/vfio/[0-9]*'):
    return
  if importlib.util.find_spec('jax_plugins') is not None:  # a GPU plugin (jax[cuda12], ...) is installed
    return
  os.environ['JAX_PLATFORMS'] = 'cpu'


def quiet_logs(verbose: bool) -> None:
  """No start-up noise from TensorFlow, absl, JAX or orbax unless --verbose (call before importing them)."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '0' if verbose else '3')
  if verbose:
    return
  os.environ.setdefault('GRPC_VERBOSITY', 'ERROR')
  warnings.filterwarnings('ignore')
  for name in ('absl', 'jax', 'jax._src.xla_bridge', 'orbax', 'tensorflow', 'h5py', 'matplotlib'):
    logging.getLogger(name).setLevel(logging.ERROR)
  # orbax logs a failed background save with its traceback (through absl) before vvt reports it as one line
  logging.getLogger('absl').addFilter(_not_from_orbax)
  # and tensorstore's callbacks into the event loop of that failed save print "Event loop is closed"
  sys.unraisablehook = _quiet_closed_loop(sys.unraisablehook)
  try:
    from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top
    absl_logging.set_verbosity(absl_logging.ERROR)
    absl_logging.set_stderrthreshold('error')
  except ImportError:
    pass


def _not_from_orbax(record: logging.LogRecord) -> bool:
  """False for orbax's records (absl's logger names its own file as the caller: the stack tells)."""
  marker = f'{os.sep}orbax{os.sep}'
  return marker not in record.pathname and not any(marker in f.filename for f in traceback.extract_stack())


def _quiet_closed_loop(hook):
  def unraisable(info):
    if not (isinstance(info.exc_value, RuntimeError) and str(info.exc_value) == 'Event loop is closed'):
      hook(info)
  return unraisable


def one_line(error: BaseException) -> str:
  text = str(error).strip().strip('"').strip("'") or type(error).__name__
  if isinstance(error, KeyError) and error.args:
    text = str(error.args[0])
  lines = [l.strip() for l in text.splitlines() if l.strip()]
  return ' '.join(lines) if len(lines) <= 3 else lines[0] + ' ...'


def run(prog: str, body: Callable[[Sequence[str]], int | None], argv: Sequence[str]) -> int:
  """Runs a command: exit 0 on success, 2 with one line for a bad config or argument, 1 otherwise;
  interrupted: 130, or the exception's `exit_code` (128 + the signal: 143 for SIGTERM)."""
  argv = list(argv)
  verbose = '--verbose' in argv
  skip_absent_tpu()
  quiet_logs(verbose)
  try:
    result = body(argv)
    return 0 if result is None else int(result)
  except KeyboardInterrupt as e:  # Ctrl-C, or the trainer's Interrupted (SIGINT 130 / SIGTERM 143)
    if verbose:
      traceback.print_exc()
    print(f'{prog}: {one_line(e) if str(e) else "interrupted"}', file=sys.stderr)
    return int(getattr(e, 'exit_code', 130))
  except (ConfigError, UsageError) as e:
    if verbose:
      traceback.print_exc()
    print(f'{prog}: error: {one_line(e)}', file=sys.stderr)
    return 2
  except Exception as e:  # pylint: disable=broad-except
    if verbose:
      traceback.print_exc()
    known = isinstance(e, USER_ERRORS) or getattr(e, 'user_error', False)
    what = one_line(e) if known else f'{type(e).__name__}: {one_line(e)}'
    hint = '' if verbose else ' (--verbose shows the traceback)'
    print(f'{prog}: error: {what}{hint if not known else ""}', file=sys.stderr)
    return 1


def run_config(spec, overrides, workdir: str | None = None, **load_args):
  """The config of a command: --config SPEC, or else the run's own WORKDIR/config.json."""
  if not spec and workdir and fileio.exists(run_file.path(workdir)):
    spec = run_file.path(workdir)
  if not spec:
    raise UsageError('missing --config FILE[:ARG]' + (' (and WORKDIR has no config.json)' if workdir else ''))
  return loader.load(spec, overrides, **load_args)
