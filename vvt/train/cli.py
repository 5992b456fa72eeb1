"""`vvt train` and `vvt eval` (absl flags + ml_collections config files).

  vvt train --config configs/synthetic/divided.py --workdir runs/demo [--config.batch_size=16 ...]
  vvt eval  --config configs/synthetic/divided.py --workdir runs/demo [--step N] [--split test]

`--config FILE[:ARG]` calls FILE's `get_config(ARG)`; `--config.a.b=v` overrides a field.
"""
import re
import sys

from absl import flags
from ml_collections import config_flags



def _make_flags(argv) -> flags.FlagValues:
  """Fresh flags per call, so `vvt train` / `vvt eval` can run many times in one process.

  config_flags finds `--config.x=v` overrides in `sys_argv`, so it gets the real argv.
  """
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file('config', None, 'training config file: FILE[:ARG]',
                                  flag_values=fv, lock_config=True, sys_argv=list(argv))
  flags.DEFINE_string('workdir', None, 'directory for checkpoints, metrics and results',
                      flag_values=fv)
  flags.DEFINE_integer('step', None, 'vvt eval: checkpoint step (default: latest)',
                       flag_values=fv)
  flags.DEFINE_string('split', None, 'vvt eval: dataset split (default: config.eval.split)',
                      flag_values=fv)
  return fv


_USER_ERRORS = (ValueError, FileNotFoundError, FloatingPointError, KeyError,
                TypeError, AttributeError)


def _explain(error, argv) -> str:
  """Names the `--config.FIELD` override behind a config_flags error about an unknown key."""
  text = str(error).replace('\\n', ' ').replace('\n', ' ').replace("\\'", "'")
  text = text.strip('"').strip("'").strip()
  match = re.search(r"'([A-Za-z_]\w*)'", "'" + text)
  key = match.group(1) if match else (text.split() or [''])[0]
  if key:
    for arg in argv:
      if arg.startswith('--config.'):
        field = arg[len('--config.'):].split('=')[0]
        if field.split('.')[-1] == key and '=' in arg and 'invalid' not in text:
          return f'unknown config field {field!r} (from {arg}): {text}'
  return text


def _parse(prog: str, argv):
  fv = _make_flags([prog] + list(argv))
  if any(a in ('-h', '--help', '--helpshort') for a in argv):
    print(__doc__.strip() + '\n\nflags:\n' + fv.get_help())
    raise SystemExit(0)
  try:
    fv([prog] + list(argv))
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    print(f'{prog}: error: {_explain(e, argv)}', file=sys.stderr)
    return None
  missing = [n for n in ('config', 'workdir') if getattr(fv, n) is None]
  if missing:
    print(f'{prog}: error: missing --{" and --".join(missing)}\n'
          f'usage: {prog} --config FILE[:ARG] --workdir DIR [--config.FIELD=VALUE ...]',
          file=sys.stderr)
    return None
  return fv


def _setup():
  import os  # pylint: disable=g-import-not-at-top
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)


def train_main(argv) -> int:
  fv = _parse('vvt train', argv)
  if fv is None:
    return 2
  _setup()
  from vvt.train import trainer  # pylint: disable=g-import-not-at-top
  try:
    res = trainer.train_and_evaluate(fv.config, fv.workdir)
  except _USER_ERRORS as e:
    print(f'vvt train: error: {e}', file=sys.stderr)
    return 1
  key = 'video_top1' if 'video_top1' in res else 'video_top1_action'
  print(f'[done] step {res["step"]}: {key} = {res.get(key, float("nan")):.4f}; '
        f'workdir {res["workdir"]}')
  return 0


def eval_main(argv) -> int:
  fv = _parse('vvt eval', argv)
  if fv is None:
    return 2
  _setup()
  from vvt.train import trainer  # pylint: disable=g-import-not-at-top
  try:
    res = trainer.evaluate_checkpoint(fv.config, fv.workdir, step=fv.step,
                                      split=fv.split)
  except _USER_ERRORS as e:
    print(f'vvt eval: error: {e}', file=sys.stderr)
    return 1
  key = 'video_top1' if 'video_top1' in res else 'video_top1_action'
  print(f'[done] step {res["step"]}: {key} = {res[key]:.4f}')
  return 0
