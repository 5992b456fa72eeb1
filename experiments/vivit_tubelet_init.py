"""ViViT Table 1 (Arnab et al. 2021, ICCV version): input encoding of ViViT-B Model 1 on Kinetics-400 with
32-frame inputs: uniform frame sampling (8 frames, 1x16x16 patches) against 4x16x16 tubelets initialised by filter
inflation (eq. 8) or at the central frame (eq. 9), the same number of tokens for all (paper top-1: uniform
78.5, inflation 77.6, central frame 79.2).

  vvt sweep --config experiments/vivit_tubelet_init.py:k400 --workdir runs/vivit_tubelet_init
  vvt sweep --config experiments/vivit_tubelet_init.py:mini --workdir runs/vivit_tubelet_init_mini

Table 1's "random initialisation" row is not here: `init_from.tubelet` offers only `inflate` and
`central_frame` (vvt/convert/init_options.py). `mini` trains from scratch (no image model), so it compares the
encodings only: 4 frames of 1x8x8 patches vs 8 frames of 2x8x8 tubelets (64 tokens each), 3 seeds.
"""
from configs.kinetics400 import vivit_b_fe
from experiments import common
from vvt.studies import sweep


def get_config(arg=None):
  a = common.parse(arg, ('k400',))
  if common.is_mini(a):
    return common.miniature('spatiotemporal', a)
  c = vivit_b_fe.get_config()
  c.model.attention = 'spatiotemporal'
  return c


def get_sweep(arg=None):
  a = common.parse(arg, ('k400',))
  if common.is_mini(a):
    encodings = {'uniform': {'num_frames': 4, 'model.tubelet': (1, 8, 8), 'dataset.stride': 4},
                 'tubelet': {'model.tubelet': (2, 8, 8)}}
  else:  # 32 frames at stride 2 span 64 frames: uniform sampling takes 8 of them at stride 8
    encodings = {'uniform': {'num_frames': 8, 'model.tubelet': (1, 16, 16), 'dataset.stride': 8},
                 'inflate': {'model.tubelet': (4, 16, 16), 'init_from.tubelet_init': 'inflate'},
                 'central_frame': {'model.tubelet': (4, 16, 16), 'init_from.tubelet_init': 'central_frame'}}
  return common.with_seeds(sweep.variants('encoding', encodings), a)
