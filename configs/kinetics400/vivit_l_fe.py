"""ViViT-L/16x2 factorised encoder (Model 2) on Kinetics-400 (Arnab et al. 2021, sec. 4).

Same recipe as vivit_b_fe.py (SGD momentum 0.9, cosine, 30 epochs, batch 64,
4x3 test views, 32 frames at stride 2), with ViT-L and its ImageNet-21k checkpoint.
"""
from configs.kinetics400 import vivit_b_fe


def get_config(arg=None):
  c = vivit_b_fe.get_config(arg)
  c.model.variant = 'L/16x2'
  c.init_from.path = 'imagenet21k/ViT-L_16.npz'
  return c
