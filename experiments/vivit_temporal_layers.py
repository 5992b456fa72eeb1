"""ViViT's ablation of the temporal transformer layers L_t of Model 2 (Arnab et al. 2021, ICCV version, sec.
4.2: "We set Lt = 4 for all experiments and show in the supplementary that the model is not sensitive to this
choice"; the supplementary is not in our copy), ViViT-B/16x2 on Kinetics-400; L_t = 0 is Table 2's
average-pooling baseline. Paper top-1 75.8 / 78.6 / 78.8 / 78.8 / 78.9 for 0 / 1 / 4 / 8 / 12: the one table
of the paper's arXiv version (2103.15691v2, Table 3) that the ICCV main paper does not hold.

  vvt sweep --config experiments/vivit_temporal_layers.py:k400 --workdir runs/vivit_temporal_layers
  vvt sweep --config experiments/vivit_temporal_layers.py:mini --workdir runs/vivit_temporal_layers_mini

Base: configs/kinetics400/vivit_b_fe.py. `mini`: L_t = 0, 1, 2, 4 on the synthetic data, 3 seeds.
"""
from configs.kinetics400 import vivit_b_fe
from experiments import common
from vvt.studies import sweep


def get_config(arg=None):
  a = common.parse(arg, ('k400',))
  return common.miniature('factorised_encoder', a) if common.is_mini(a) else vivit_b_fe.get_config()


def get_sweep(arg=None):
  a = common.parse(arg, ('k400',))
  layers = (0, 1, 2, 4) if common.is_mini(a) else (0, 1, 4, 8, 12)
  return common.with_seeds(sweep.axis('model.temporal_layers', layers), a)
