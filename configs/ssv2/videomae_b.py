"""VideoMAE ViT-B/16 self-supervised pretraining on Something-Something v2 (task.name='mae'): stride 2 and 2400
epochs; `:800` is the shorter schedule. Shared recipe and its sources: configs/common.py, docs/recipes.md."""
from configs import common


def get_config(arg=None):
  return common.videomae_recipe('ssv2', arg)
