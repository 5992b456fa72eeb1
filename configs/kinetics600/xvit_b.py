"""X-ViT-B/16 space-time mixing attention on Kinetics-600 (Bulat et al. 2021, Table 6).

  --config configs/kinetics600/xvit_b.py      8 frames (default; Table 6 "X-ViT (8x)": 82.5, 425 GFLOPs for 1x3)
  --config configs/kinetics600/xvit_b.py:16   16 frames (Table 6 "X-ViT (16x)": 84.5, 850 GFLOPs for 1x3)
The Kinetics recipe of kinetics400/xvit_b.py (sec. 4.1: 30 epochs "on Kinetics", lr 0.03 at batch 128, mixup
0.4, autoaugment, 1x3 views) with 600 classes; the official code's Kinetics-600 config
(`configs/Kinetics/xvit_B16_16x16_k600.yaml`) is its Kinetics-400 one with `NUM_CLASSES: 600`. Evaluated on
the validation split; sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import xvit_b


def get_config(arg=None):
  c = xvit_b.get_config(arg)
  return common.on_dataset(c, 600, 'kinetics600/train@1024', 'kinetics600/validation@512', 'validation')
