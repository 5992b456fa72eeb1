"""Tiny X-ViT space-time mixing attention on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/space_time_mixing.py[:DATA_DIR] --workdir runs/space_time_mixing
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('space_time_mixing', arg, family='xvit')
