"""Tiny TimeSformer divided space-time attention (the demo's model) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/divided.py[:DATA_DIR] --workdir runs/divided
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('divided', arg, family='timesformer')
