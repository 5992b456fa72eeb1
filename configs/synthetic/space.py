"""Tiny TimeSformer space-only attention on the synthetic motion dataset (CPU, minutes).

  vvt train --config configs/synthetic/space.py[:DATA_DIR] --workdir runs/space
DATA_DIR defaults to data/synthetic (written by `make demo`).
Shared recipe (vvt/train/defaults.py synthetic_config): 2 layers, width 64, 2x8x8 tubelets,
sinusoidal positions, GAP, 8 frames of 32^2, AdamW 1e-3 cosine, batch 8, 20 epochs.
Like TimeSformer's space-only model, no time embedding: positions within the frame only
(`positional_embedding='spatial'`), so nothing but the tubelets' two frames tells it time.
With a time-aware table instead (`--config.model.positional_embedding=sinusoidal`) the
per-frame features are time-stamped before the average over frames and the order leaks in.
"""
from vvt.train import defaults


def get_config(arg=None):
  return defaults.synthetic_config('space', arg, family='timesformer',
                                   positional_embedding='spatial')
