"""Tiny TimeSformer space-only attention (no temporal modelling: stays near chance) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/space.py[:DATA_DIR] --workdir runs/space
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('space', arg, family='timesformer')
