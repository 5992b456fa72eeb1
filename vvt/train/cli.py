"""`vvt train` and `vvt eval` (absl flags + ml_collections config files).

  vvt train --config configs/synthetic/divided.py --workdir runs/demo [--config.batch_size=16 ...]
  vvt eval  --config configs/synthetic/divided.py --workdir runs/demo [--step N] [--split test]

`--config FILE[:ARG]` calls FILE's `get_config(ARG)`; `--config.a.b=v` overrides a field.
"""
import sys

from absl import flags
from ml_collections import config_flags

FLAGS = flags.FLAGS
config_flags.DEFINE_config_file('config', None, 'training config file: FILE[:ARG]',
                                lock_config=True)
flags.DEFINE_string('workdir', None, 'directory for checkpoints, metrics and results')
flags.DEFINE_integer('step', None, 'vvt eval: checkpoint step (default: latest)')
flags.DEFINE_string('split', None, 'vvt eval: dataset split (default: config.eval.split)')

_USER_ERRORS = (ValueError, FileNotFoundError, FloatingPointError, KeyError,
                TypeError, AttributeError)


def _parse(prog: str, argv) -> bool:
  try:
    FLAGS.unparse_flags()
    FLAGS([prog] + list(argv))
  except (flags.Error, ValueError, KeyError, AttributeError, TypeError) as e:
    print(f'{prog}: error: {e}', file=sys.stderr)
    return False
  missing = [n for n in ('config', 'workdir') if getattr(FLAGS, n) is None]
  if missing:
    print(f'{prog}: error: missing --{" and --".join(missing)}\n'
          f'usage: {prog} --config FILE[:ARG] --workdir DIR [--config.FIELD=VALUE ...]',
          file=sys.stderr)
    return False
  return True


def _setup():
  import os  # pylint: disable=g-import-not-at-top
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)


def train_main(argv) -> int:
  if not _parse('vvt train', argv):
    return 2
  _setup()
  from vvt.train import trainer  # pylint: disable=g-import-not-at-top
  try:
    res = trainer.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  except _USER_ERRORS as e:
    print(f'vvt train: error: {e}', file=sys.stderr)
    return 1
  key = 'video_top1' if 'video_top1' in res else 'video_top1_action'
  print(f'[done] step {res["step"]}: {key} = {res.get(key, float("nan")):.4f}; '
        f'workdir {res["workdir"]}')
  return 0


def eval_main(argv) -> int:
  if not _parse('vvt eval', argv):
    return 2
  _setup()
  from vvt.train import trainer  # pylint: disable=g-import-not-at-top
  try:
    res = trainer.evaluate_checkpoint(FLAGS.config, FLAGS.workdir, step=FLAGS.step,
                                      split=FLAGS.split)
  except _USER_ERRORS as e:
    print(f'vvt eval: error: {e}', file=sys.stderr)
    return 1
  key = 'video_top1' if 'video_top1' in res else 'video_top1_action'
  print(f'[done] step {res["step"]}: {key} = {res[key]:.4f}')
  return 0
