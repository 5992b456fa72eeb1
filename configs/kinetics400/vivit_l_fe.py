"""ViViT-L/16x2 factorised encoder (Model 2) on Kinetics-400 (Arnab et al. 2021, sec. 4).

Same recipe as vivit_b_fe.py (SGD momentum 0.9, cosine, 30 epochs, batch 64,
4x3 test views, 32 frames at stride 2), with ViT-L and its ImageNet-21k checkpoint.
"""
import importlib.util
import pathlib


def _base_config_module():
  path = pathlib.Path(__file__).with_name('vivit_b_fe.py')
  spec = importlib.util.spec_from_file_location('vivit_b_fe', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def get_config(arg=None):
  c = _base_config_module().get_config(arg)
  c.model.variant = 'L/16x2'
  c.init_from.path = 'imagenet21k/ViT-L_16.npz'
  return c
