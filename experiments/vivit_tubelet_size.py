"""ViViT Fig. 6 (Arnab et al. 2021, ICCV version, sec. 4.2 "Varying the number of tokens"): the temporal tubelet length
t = 2, 4, 8 (16x16 patches) for each model variant, ViViT-B on Kinetics-400: smaller tubelets, more
tokens, higher accuracy and more FLOPs (Model 1 the most).

  vvt sweep --config experiments/vivit_tubelet_size.py:k400 --workdir runs/vivit_tubelet_size
  vvt sweep --config experiments/vivit_tubelet_size.py:mini --workdir runs/vivit_tubelet_size_mini

Base: configs/kinetics400/vivit_b_fe.py; the models as in vivit_models.py. `mini`: t = 1, 2, 4 with 8x8
patches on the synthetic data, 3 seeds.
"""
from configs.kinetics400 import vivit_b_fe
from experiments import common
from experiments import vivit_models
from vvt.studies import sweep


def get_config(arg=None):
  a = common.parse(arg, ('k400',))
  return common.miniature('factorised_encoder', a) if common.is_mini(a) else vivit_b_fe.get_config()


def get_sweep(arg=None):
  a = common.parse(arg, ('k400',))
  models = {n: f for n, f in vivit_models.MODELS.items() if n != 'avgpool'}
  patch = 8 if common.is_mini(a) else 16
  lengths = (1, 2, 4) if common.is_mini(a) else (2, 4, 8)
  return common.with_seeds(sweep.product(
      sweep.variants('model', models), sweep.axis('model.tubelet', [(t, patch, patch) for t in lengths])), a)
