"""ViViT-L/16x2 factorised encoder (Model 2) on Kinetics-400 (Arnab et al. 2021, sec. 4).

  --config configs/kinetics400/vivit_l_fe.py       32 frames at stride 2, 4 temporal views (Fig. 7: the
                                                   32-frame model "requires ... 4 views to saturate";
                                                   `:views=sota` adds 3 crops per view, sec. 4.3)
  --config configs/kinetics400/vivit_l_fe.py:128   128 frames at stride 2, 1x3 test views (Table 5a's
                                                   ViViT-L/16x2 FE: 3.98 TFLOPs a view; Fig. 7: 128 frames
                                                   "requires just a single view to 'see' the whole video")
  --config configs/kinetics400/vivit_l_fe.py:128,init=jft
                                                   Table 5a's "ViViT-L/16x2 FE (JFT)" (83.5, 1x3, 11.94 TFLOPs):
                                                   the same model from a JFT-300M ViT-L (not public;
                                                   common.JFT)
The recipe of vivit_b_fe.py with ViT-L, its ImageNet-21k checkpoint and Scenic's ViViT-L lr (0.1);
sources: docs/recipes.md. SSv2 and Epic-Kitchens start from this model (common.kinetics400_init).
"""
from configs import common
from configs.kinetics400 import vivit_b_fe


def get_config(arg=None):
  a = common.parse_arg(arg, frames=32, views='', init='imagenet21k')
  frames = a['frames']
  if frames not in (32, 128):
    raise ValueError(f'vivit_l_fe.py: frames must be 32 or 128, got {arg!r}')
  # Table 5a's ViViT-L rows are the 128-frame model at 1 x 3; the 32-frame one is Fig. 7's, temporal views only.
  views = a['views'] or ('sota' if frames == 128 else 'ablation')
  c = vivit_b_fe.get_config(f'views={views}')
  c.model.variant = 'L/16x2'
  c.schedule.base_lr = 0.1
  c.init_from = common.vivit_image_init(a['init'], 'L')
  c.num_frames = frames  # the shared field: model and data read it
  if frames == 128:
    c.dataset.num_test_clips = 1
  return c
