"""ViViT-L/16x2 factorised encoder on Something-Something v2 (Arnab et al. 2021, sec. 4.2-4.3).

Paper: all the regularisation of Table 3 ("on SSv2 by using all the regularisation in Tab. 3"): random crop,
colour jitter, Kinetics-400 initialisation, stochastic depth, RandAugment, label smoothing, mixup; 4 temporal
views x 3 crops, 224^2 crops (sec. 4.2: "state-of-the-art results (Sec. 4.3) using a spatial resolution of
224"). No horizontal flip here (SSv2 classes name left/right). Strengths, lr, epochs and stride 1 follow
Scenic's public SSv2 config (which crops 256); sources and differences: docs/recipes.md.
Initialised from the Kinetics-400 ViViT-L/16x2 FE (configs/kinetics400/vivit_l_fe.py, exported with
`vvt export`). Without one:
  --config.init_from.path=imagenet21k/ViT-L_16.npz --config.init_from.format=big_vision
"""
from configs import common


def get_config(arg=None):
  del arg
  c = common.paper_config(
      model=dict(family='vivit', attention='factorised_encoder', variant='L/16x2',
                 num_frames=32, image_size=224, num_classes=174, temporal_layers=4,
                 classifier='token', stochastic_depth=0.3),
      dataset=dict(stride=1, num_test_clips=4, num_spatial_crops=3,
                   train_files='ssv2/train@256', eval_files='ssv2/validation@64',
                   **common.scale_jitter(256, 0.9, 1.33), eval_resize=256,
                   horizontal_flip=False, color_jitter=1.0, color_jitter_prob=0.8,
                   randaugment={'num_layers': 2, 'magnitude': 10},  # Scenic: 20 on TF's open scale; 10 is our max
                   normalization='zero_centre'),
      train={'batch_size': 64, 'num_epochs': 35.0,
             'optimizer.name': 'sgd', 'optimizer.momentum': 0.9, 'optimizer.grad_clip_norm': 1.0,
             'schedule.name': 'cosine', 'schedule.base_lr': 0.4, 'schedule.warmup_epochs': 2.5,
             'loss.label_smoothing': 0.3, 'loss.mixup_alpha': 0.3,
             'eval.batch_size': 64, 'eval.average': 'logits', 'eval.split': 'validation',
             'checkpoint.every_steps': 1000})
  c.init_from = common.kinetics400_init('vivit_l_fe')
  return c
