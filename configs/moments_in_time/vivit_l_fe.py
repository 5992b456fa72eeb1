"""ViViT-L/16x2 factorised encoder on Moments in Time (Arnab et al. 2021, Table 5c: 38.5 top-1, 64.1 top-5).

  --config configs/moments_in_time/vivit_l_fe.py                  4 temporal views x 3 crops
  --config configs/moments_in_time/vivit_l_fe.py:views=ablation   4 temporal views x 1 crop
Moments in Time: 3-second clips, 339 classes (docs/data.md). Paper: "For larger datasets like Kinetics and
Moments in Time, we do not use these additional regularisers (we use only the first row of Tab. 3)": random
crop, flip, colour jitter, ImageNet-21k start; 32 frames at stride 2 (sec. 4.1, "unless otherwise mentioned");
4 views (sec. 4.1) with 3 crops each (sec. 4.3). No public config of the authors covers this dataset: lr,
epochs, batch, warmup and clipping are Scenic's Kinetics-600 ViViT-L config's (lr 0.05; the larger of its
Kinetics sets), and the clips are read at 25 fps, the rate the paper states for Kinetics (32 frames at
stride 2 then span 2.6 s of each 3 s clip). Evaluated on the validation split; sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import vivit_b_fe

MOMENTS_IN_TIME = dict(num_classes=339, train_files='moments_in_time/train@1024',
                       eval_files='moments_in_time/validation@64', split='validation')


def get_config(arg=None):
  a = common.parse_arg(arg, views='sota')
  c = vivit_b_fe.kinetics_config(dict(attention='factorised_encoder', variant='L/16x2', temporal_layers=4),
                                 a['views'], base_lr=0.05, data=MOMENTS_IN_TIME)
  c.init_from = common.vivit_image_init('imagenet21k', 'L')
  return c
