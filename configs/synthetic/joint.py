"""Tiny TimeSformer joint space-time attention on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/joint.py[:DATA_DIR] --workdir runs/joint
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('joint', arg, family='timesformer')
