"""ViViT-L/16x2 factorised encoder on Epic-Kitchens-100 (Arnab et al. 2021, sec. 4.2-4.3).

Two heads — verb (97 classes) and noun (300) — summed cross-entropy; the action is right when both heads are
(reported as `video_top1_action`). Paper: every regulariser of Table 3 ("all Epic Kitchens models in Tab. 2
were trained with all the regularisers in Tab. 3"): random crop, flip, colour jitter, Kinetics-400
initialisation, stochastic depth, RandAugment, label smoothing, mixup. Strengths, lr, epochs, stride 1 and
the 4x3 test views (Table 5d's comparison; `:views=ablation` for 4 views) follow Scenic's public
Epic-Kitchens config; sources: docs/recipes.md.
Records carry `verb_label` and `noun_label` (int64) in the context. Initialised from the Kinetics-400
ViViT-L/16x2 FE (configs/kinetics400/vivit_l_fe.py, exported with `vvt export`).
"""
from configs import common

HEADS = {'verb': 97, 'noun': 300}


def get_config(arg=None):
  views = common.parse_arg(arg, views='sota')['views']
  c = common.vivit_l_fe_regularised(
      views, dict(train_files='epic_kitchens/train@256', eval_files='epic_kitchens/validation@64',
                  label_keys={'verb': 'verb_label', 'noun': 'noun_label'}, horizontal_flip=True),
      stochastic_depth=0.2, num_epochs=50.0, base_lr=0.5, label_smoothing=0.2, mixup_alpha=0.1)
  c.num_classes = HEADS  # the shared field: the model and the data read it
  return c
