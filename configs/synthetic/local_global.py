"""Tiny TimeSformer sparse local-global attention on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/local_global.py[:DATA_DIR] --workdir runs/local_global
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('local_global', arg, family='timesformer')
