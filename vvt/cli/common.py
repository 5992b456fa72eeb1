"""What every `vvt` command shares: argument parsing around the config loader, quiet logs, one-line errors."""
from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from typing import Callable, Sequence
import warnings

import vvt
from vvt import fileio
from vvt import progress
from vvt.config import loader
from vvt.config import overrides as overrides_lib
from vvt.config import run_file
from vvt.config.errors import ConfigError

SHOWN_LINES = 3  # the lines of a long error message `one_line` shows (then how many more there are)
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


class _Progress(_NoProgress):
  """`--progress`: draws the bars also where stderr is not a terminal (a log file, a pipe), in this process and the
  ones it starts (`vvt.progress`); `--no-progress` wins."""

  def __call__(self, parser, namespace, values, option_string=None):
    setattr(namespace, self.dest, True)
    progress.force()


class Parser(argparse.ArgumentParser):
  """argparse with one-line errors; `--verbose`, `--progress` and `--no-progress` on every command."""

  def __init__(self, prog: str | None = None, doc: str | None = None, config: bool | str = False, **kwargs):
    """config: True (--config is optional) or 'required' (--config must be given)."""
    kwargs.setdefault('formatter_class', argparse.RawDescriptionHelpFormatter)
    kwargs.setdefault('description', doc)
    super().__init__(prog=prog, **kwargs)
    self.add_argument('--verbose', action='store_true',
                      help='show library logs and, on an error, the traceback')
    self.add_argument('--no-progress', action=_NoProgress,
                      help=f'no progress bars (also for the processes it starts; or {progress.ENV}=1)')
    self.add_argument('--progress', action=_Progress,
                      help='progress bars also when stderr is not a terminal (a log file, a pipe; bars are drawn '
                           f'on a terminal only; or {progress.FORCE_ENV}=1)')
    self.config_required = config == 'required'
    if config:
      self.add_argument('--config', metavar='FILE[:ARG]', required=self.config_required,
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
  if spec is not None and getattr(parser, 'config_required', False):
    rest += ['--config', spec]  # argparse names every missing required argument together, --config among them
  args = parser.parse_args(rest)
  return args, spec, overrides


def skip_absent_tpu() -> None:
  """With libtpu installed (the `tpu` / `test` extras) but no TPU here, JAX's TPU probe prints several lines of
  warnings: JAX_PLATFORMS=cpu skips it (`vvt.cpu_without_tpu`, which importing vvt already ran; again here for a
  process whose environment changed since)."""
  vvt.cpu_without_tpu()


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
    from absl import logging as absl_logging
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


def _unquoted(text: str) -> str:
  """`text` without quotes that wrap the whole of it (a message given as a repr); quotes inside it are kept."""
  if len(text) >= 2 and text[0] == text[-1] and text[0] in '\'"' and text[0] not in text[1:-1]:
    return text[1:-1]
  return text


def _one(text: str) -> str:
  return ' '.join(l.strip() for l in text.splitlines() if l.strip())


def one_line(error: BaseException) -> str:
  """The error's message as one line; a ConfigError with several problems: its problems joined by '; '."""
  problems = getattr(error, 'problems', None)
  if problems and len(problems) > 1:
    return '; '.join(_one(p) for p in problems)
  lines = _message_lines(error)
  if not lines:  # no message (KeyError(''), RuntimeError()): the type, the key, and where it was raised
    return _without_message(error)
  if len(lines) <= SHOWN_LINES:
    return ' '.join(lines)
  return ' '.join(lines[:SHOWN_LINES]) + f' (and {len(lines) - SHOWN_LINES} more lines: --verbose shows them)'


def _message_lines(error: BaseException) -> list:
  """The non-blank lines of the error's message (a KeyError's: its key), [] when it has none."""
  text = _unquoted(str(error).strip())
  if isinstance(error, KeyError) and error.args:
    text = str(error.args[0]).strip()
  return [l.strip() for l in text.splitlines() if l.strip()]


def _without_message(error: BaseException) -> str:
  """'KeyError '' at vvt/cli/predict.py:141 in _score_videos': an error that carries no message, named by its
  type, its argument (where it has one) and the place it was raised (the innermost frame of its traceback)."""
  what = type(error).__name__ + (f' {error.args[0]!r}' if len(error.args) == 1 else '')
  frames = traceback.extract_tb(error.__traceback__) if error.__traceback__ is not None else []
  if not frames:
    return what
  last = frames[-1]
  root = os.path.dirname(os.path.dirname(os.path.abspath(vvt.__file__)))
  path = os.path.abspath(last.filename)
  shown = os.path.relpath(path, root) if path.startswith(root + os.sep) else os.path.basename(path)
  return f'{what} at {shown}:{last.lineno} in {last.name}'


def run(prog: str, body: Callable[[Sequence[str]], int | None], argv: Sequence[str]) -> int:
  """Runs a command: exit 0 on success, 2 for a bad config or argument (one line per problem) or an error marked
  `bad_input` (e.g. a Hugging Face folder's unreadable config.json), 1 otherwise;
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
    problems = getattr(e, 'problems', None)
    for line in [_one(p) for p in problems] if problems else [one_line(e)]:  # a config's problems: one line each
      print(f'{prog}: error: {line}', file=sys.stderr)
    return 2
  except Exception as e:
    if verbose:
      traceback.print_exc()
    known = isinstance(e, USER_ERRORS) or getattr(e, 'user_error', False)
    what = one_line(e) if known or not _message_lines(e) else f'{type(e).__name__}: {one_line(e)}'
    hint = '' if verbose else ' (--verbose shows the traceback)'
    print(f'{prog}: error: {what}{hint if not known else ""}', file=sys.stderr)
    return 2 if getattr(e, 'bad_input', False) else 1  # bad input that is no config field (e.g. a file's config.json)


def _config_spec(spec, workdir: str | None) -> str:
  """--config SPEC, or else the run's own WORKDIR/config.json."""
  if not spec and workdir and fileio.exists(run_file.path(workdir)):
    spec = run_file.path(workdir)
  if not spec:
    raise UsageError('missing --config FILE[:ARG]' + (' (and WORKDIR has no config.json)' if workdir else ''))
  return spec


def run_config(spec, overrides, workdir: str | None = None, **load_args):
  """The config of a command (a ConfigDict): --config SPEC, or else the run's own WORKDIR/config.json
  (`load_args`: those of `vvt.config.loader.load`, e.g. the command's `purpose`, which says the fields it
  validates)."""
  return loader.load(_config_spec(spec, workdir), overrides, **load_args)


def run_spec(spec, overrides, workdir: str | None = None, **load_args):
  """The RunSpec of a command that runs a config (`vvt.config.run_spec`: resolved once), from --config SPEC, or
  else the run's own WORKDIR/config.json (`load_args`: those of `vvt.config.loader.load_run`, e.g. `purpose`)."""
  return loader.load_run(_config_spec(spec, workdir), overrides, **load_args)
