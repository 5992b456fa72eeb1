"""Tiny ViViT Model 1 (spatio-temporal attention, tubelets 2x8x8) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/spatiotemporal.py[:DATA_DIR] --workdir runs/spatiotemporal
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('spatiotemporal', arg, family='vivit', tubelet=(2, 8, 8))
