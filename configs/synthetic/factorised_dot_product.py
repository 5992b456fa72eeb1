"""Tiny ViViT Model 4 (factorised dot-product attention) on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/factorised_dot_product.py[:DATA_DIR] --workdir runs/factorised_dot_product
DATA_DIR defaults to data/synthetic (written by `make demo`).
Shared recipe (vvt/train/defaults.py synthetic_config): 2 layers, width 64, 2x8x8 tubelets,
sinusoidal positions, GAP, 8 frames of 32^2, AdamW 1e-3 cosine, batch 8, 20 epochs.
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('factorised_dot_product', arg, family='vivit', classifier='gap')
