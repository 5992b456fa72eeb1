"""ViViT-L/16x2 factorised encoder (Model 2) on Kinetics-600 (Arnab et al. 2021, Table 5b).

  --config configs/kinetics600/vivit_l_fe.py            ImageNet-21k start (Table 5b: 82.9)
  --config configs/kinetics600/vivit_l_fe.py:init=jft   JFT start (Table 5b "(JFT)": 84.3; not public: common.JFT)
  --config configs/kinetics600/vivit_l_fe.py:128        128 frames at stride 2, 1x3 views (the model of Table
                                                        5a's Kinetics-400 rows; Table 5b gives no frames or views)
The Kinetics-400 recipe of kinetics400/vivit_l_fe.py (first row of Table 3 only, 25 fps, 32 frames at stride 2,
L_t = 4, central-frame tubelets) with Scenic's Kinetics-600 config where the paper is silent: lr 0.05, 30
epochs, batch 64, 4 temporal views x 3 crops (sec. 4.3: "3 spatial crops ... for each temporal view"). Evaluated
on the validation split. Sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import vivit_b_fe

KINETICS600 = dict(num_classes=600, train_files='kinetics600/train@1024', eval_files='kinetics600/validation@512',
                   split='validation')


def get_config(arg=None):
  a = common.parse_arg(arg, frames=32, views='sota', init='imagenet21k')
  if a['frames'] not in (32, 128):
    raise ValueError(f'kinetics600/vivit_l_fe.py: frames must be 32 or 128, got {arg!r}')
  c = vivit_b_fe.kinetics_config(dict(attention='factorised_encoder', variant='L/16x2', temporal_layers=4),
                                 a['views'], base_lr=0.05, data=KINETICS600)
  c.init_from = common.vivit_image_init(a['init'], 'L')
  c.num_frames = a['frames']  # the shared field: model and data read it
  if a['frames'] == 128:
    c.dataset.num_test_clips = 1
  return c
