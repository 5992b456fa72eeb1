"""ViViT-H/16x2 (JFT) on Kinetics-600 (Arnab et al. 2021, Table 5b: 85.8 top-1).

  --config configs/kinetics600/vivit_h.py                  JFT start (the paper's; not public: common.JFT)
  --config configs/kinetics600/vivit_h.py:views=ablation   4 temporal views x 1 crop
The model and recipe of kinetics400/vivit_h.py (Model 1, ViT-H, 32 frames at stride 2, 4x3 views, Scenic's
unfactorised ViViT schedule at lr 0.1) with 600 classes, evaluated on the validation split; sources:
docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import vivit_b_fe
from configs.kinetics400 import vivit_h
from configs.kinetics600 import vivit_l_fe


def get_config(arg=None):
  a = common.parse_arg(arg, views='sota')
  c = vivit_b_fe.kinetics_config(vivit_h.MODEL, a['views'], base_lr=0.1, data=vivit_l_fe.KINETICS600)
  c.init_from = common.vivit_image_init('jft', 'H')  # the original ViT release has no ViT-H/16
  return c
