"""Tiny ViViT Model 3 (factorised self-attention) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/factorised_self_attention.py[:DATA_DIR] --workdir runs/factorised_self_attention
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('factorised_self_attention', arg, family='vivit', tubelet=(2, 8, 8), classifier='gap')
