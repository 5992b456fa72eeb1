"""Tiny TimeSformer axial (time, width, height) attention on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/axial.py[:DATA_DIR] --workdir runs/axial
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('axial', arg, family='timesformer')
