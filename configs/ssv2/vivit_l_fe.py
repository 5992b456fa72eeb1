"""ViViT-L/16x2 factorised encoder on Something-Something v2 (Arnab et al. 2021, sec. 4.2-4.3).

Paper: all the regularisation of Table 3 ("on SSv2 by using all the regularisation in Tab. 3"): random crop,
flip, colour jitter, Kinetics-400 initialisation, stochastic depth, RandAugment, label smoothing, mixup; 4
temporal views x 3 crops (Table 5e's comparison), 224^2 crops (sec. 4.2: "state-of-the-art results (Sec. 4.3)
using a spatial resolution of 224"). Strengths, lr, epochs and stride 1 follow Scenic's public SSv2 config
(which crops 256 and flips too); sources and differences: docs/recipes.md. Variants (`FLIP`, `views=`):

  --config configs/ssv2/vivit_l_fe.py                    flip on, as the paper and Scenic
  --config configs/ssv2/vivit_l_fe.py:off                no flip (SSv2 classes name left and right)
  --config configs/ssv2/vivit_l_fe.py:label_aware        flip, and a flipped clip of "... left to right"
                                                         is labelled "... right to left" (dataset.label_aware_flip)
  --config configs/ssv2/vivit_l_fe.py:views=ablation     4 temporal views x 1 crop
Initialised from the Kinetics-400 ViViT-L/16x2 FE (configs/kinetics400/vivit_l_fe.py, exported with
`vvt export`). Without one:
  --config.init_from.path=imagenet21k/ViT-L_16.npz --config.init_from.format=big_vision
"""
from configs import common

FLIP = {'paper': dict(horizontal_flip=True), 'off': dict(horizontal_flip=False),
        'label_aware': dict(horizontal_flip=True, label_aware_flip=True)}


def get_config(arg=None):
  a = common.parse_arg(arg, flip='paper', views='sota')
  if a['flip'] not in FLIP:
    raise ValueError(f'config argument flip={a["flip"]!r} is not one of {", ".join(FLIP)}')
  return common.vivit_l_fe_regularised(
      a['views'], dict(train_files='ssv2/train@256', eval_files='ssv2/validation@64', **FLIP[a['flip']]),
      stochastic_depth=0.3, num_epochs=35.0, base_lr=0.4, label_smoothing=0.3, mixup_alpha=0.3, num_classes=174)
