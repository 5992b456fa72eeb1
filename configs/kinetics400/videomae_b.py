"""VideoMAE ViT-B/16 self-supervised pretraining on Kinetics-400 (task.name='mae'): 16 frames at stride 4, 1600
epochs (`:800`: the ablations' 800); the recipe is `configs.common.videomae_pretraining` (docs/recipes.md)."""
from configs import common


def get_config(arg=None):
  return common.videomae_recipe('kinetics400', arg)
