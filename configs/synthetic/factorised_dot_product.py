"""Tiny ViViT Model 4 (factorised dot-product attention) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/factorised_dot_product.py[:DATA_DIR] --workdir runs/factorised_dot_product
DATA_DIR defaults to data/synthetic (written by `make demo`).
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('factorised_dot_product', arg, family='vivit', tubelet=(2, 8, 8), classifier='gap')
