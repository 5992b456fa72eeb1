"""Tiny ViViT Model 2 (factorised encoder) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/factorised_encoder.py[:DATA_DIR] --workdir runs/factorised_encoder
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('factorised_encoder', arg, family='vivit', tubelet=(2, 8, 8), temporal_layers=2)
