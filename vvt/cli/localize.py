"""`vvt localize`: temporal action localisation on feature sequences (task.name='localization').

  vvt localize --config configs/localization.py:DIR --workdir runs/loc [--config.task.localization.FIELD=VALUE ...]

DIR holds `sequences/` + `sequences.json` (`vvt features --window`) and `annotations.json` (ActivityNet style); or
set --config.task.localization.sequences=... and --config.task.localization.annotations=... (a THUMOS14 folder is
read as `vvt.data.read_annotations` reads it). The ActionFormer head (`vvt.models.actionformer`) trains on the
annotations' `train_subset` and is evaluated on `eval_subset`: WORKDIR/localization_<subset>_<protocol>.json (mAP
at each tIoU of the protocol and their average, the per-class AP), _classes.csv and _segments.png. A config
problem, a missing or bad sequence file (named) or a bad annotation exits 2 with one line; annotated videos without
a sequence are counted and skipped.
"""
from vvt.cli import common
from vvt.config.errors import ConfigError


def _localize(argv):
  p = common.Parser('vvt localize', __doc__, config='required')
  p.add_argument('--workdir', required=True, help='the results of the run')
  args, spec, overrides = common.parse(p, argv)
  run = common.run_spec(spec, overrides, args.workdir, files=())
  from vvt.tasks import registry
  hooks = registry.hooks_of(run)
  if hooks.runs_on != 'feature_sequences':
    raise ConfigError(f'task.name={registry.name_of(run)!r} trains on video clips: run it with vvt train '
                      '(vvt localize runs the tasks of feature sequences, task.name=\'localization\')')
  problems = hooks.start_problems(run)
  if problems:
    raise ConfigError(*problems)
  from vvt.data import AnnotationError
  from vvt.train import localization
  try:
    res = localization.train_and_evaluate(run, args.workdir)
  except AnnotationError as e:  # bad input: exit 2, as a bad sequence file
    raise ConfigError(f'task.localization.annotations: {e}') from None
  thresholds = ', '.join(f'{t:g}' for t in res['thresholds'])
  print(f'[done] average_map = {res["average_map"]:.4f} over tIoU {thresholds} ({res["protocol"]}) on '
        f'{res["num_videos"]} {res["subset"]} videos; {res["results"]}')


def main(argv) -> int:
  return common.run('vvt localize', _localize, argv)
