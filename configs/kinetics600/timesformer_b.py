"""TimeSformer divided space-time attention on Kinetics-600 (Bertasius et al. 2021, Table 6).

  --config configs/kinetics600/timesformer_b.py      TimeSformer:    8 frames x rate 32, 224^2 (79.1)
  --config configs/kinetics600/timesformer_b.py:hr   TimeSformer-HR: 16 frames x rate 16, 448^2 (81.8)
  --config configs/kinetics600/timesformer_b.py:l    TimeSformer-L:  96 frames x rate 4, 224^2 (82.2)
The Kinetics-400 recipe of kinetics400/timesformer_b.py (Appendix A, ImageNet-21k start: sec. 4.5 "Kinetics-400
& Kinetics-600 ... we use TimeSformer pretrained on ImageNet-21K"; the official code's released Kinetics-600
models are its Kinetics configs, `TimeSformer_divST_{8x32_224,16x16_448,96x4_224}_K600.pyth`) with 600 classes,
evaluated on the validation split (App. A: "30K validation videos"); sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import timesformer_b


def get_config(arg=None):
  c = timesformer_b.get_config(arg)
  return common.on_dataset(c, 600, 'kinetics600/train@1024', 'kinetics600/validation@512', 'validation')
