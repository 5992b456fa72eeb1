"""`vvt localize`: another name of `vvt train` (same options), kept for the commands written with it.

  vvt localize --config configs/localization.py:DIR --workdir runs/loc   ==   vvt train --config ... --workdir ...

A localisation run (task.name='localization', its `runs_on` hook 'feature_sequences') is `vvt train`'s: see
vvt/cli/train.py and docs/tasks.md "Temporal action localisation".
"""
from vvt.cli import common


def main(argv) -> int:
  from vvt.cli import train
  return common.run('vvt localize', train._train, argv)
