"""ViViT-H/16x2 (JFT) on Kinetics-400 (Arnab et al. 2021, Table 5a: 84.9 top-1, 4x3 views, 47.77 TFLOPs).

  --config configs/kinetics400/vivit_h.py                  JFT start (the paper's; not public: common.JFT)
  --config configs/kinetics400/vivit_h.py:views=ablation   4 temporal views x 1 crop
The model is Model 1 (unfactorised spatio-temporal attention): Table 5 marks the factorised encoder "FE" and
this row has no mark, and sec. 4.3 compares "two of our model variants", primarily Model 2. ViT-H (sec. 4.1:
L=32, N_H=16, d=1280), 2x16x16 tubelets, 32 frames at stride 2 of 25-fps video, Kinetics' first row of
Table 3 only, per-view logits averaged; 4 temporal views x 3 crops (Table 5a "4x3"). The paper's per-view
cost (47.77 / 12 = 3.98 TFLOPs) is not this model's (2.80 by `vvt summary`; docs/models.md "Parameters and FLOPs").
What the paper leaves open (lr, epochs, batch, warmup, clipping) is from Scenic's unfactorised ViViT config
(`kinetics400/vivit_base_k400.py`: lr 0.1); sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import vivit_b_fe

MODEL = dict(attention='spatiotemporal', variant='H/16x2')


def get_config(arg=None):
  a = common.parse_arg(arg, views='sota')
  c = vivit_b_fe.kinetics_config(MODEL, a['views'], base_lr=0.1)
  c.init_from = common.vivit_image_init('jft', 'H')  # the original ViT release has no ViT-H/16
  return c
