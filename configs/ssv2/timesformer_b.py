"""TimeSformer (B/16, 8 frames) on Something-Something v2 (Bertasius et al. 2021).

  --config configs/ssv2/timesformer_b.py          divided space-time attention
  --config configs/ssv2/timesformer_b.py:space    any other scheme of Table 1 (space, joint, ...); space-only
                                                  has no time embedding, as the authors build it
The Kinetics recipe of Appendix A (SGD momentum 0.9, weight decay 1e-4, lr 0.005 divided by 10 at epochs 11
and 14 of 15, batch 16, 1 clip x 3 crops, softmax scores averaged) with the official SSv2 config's
segment-based sampling and no horizontal flip; sources: docs/recipes.md.
"""
from configs import common


def get_config(arg=None):
  attention = arg or 'divided'
  c = common.paper_config(
      model=dict(family='timesformer', **common.timesformer_scheme(attention), variant='B/16',
                 num_frames=8, image_size=224, num_classes=174, stochastic_depth=0.1),
      dataset=dict(sampling='segment', short_video_policy='pad', num_test_clips=1, num_spatial_crops=3,
                   train_files='ssv2/train@256', eval_files='ssv2/validation@64',
                   train_min_resize=256, train_max_resize=320, eval_resize=224,
                   horizontal_flip=False, normalization='imagenet'),
      train={'batch_size': 16, 'num_epochs': 15.0,
             'optimizer.name': 'sgd', 'optimizer.momentum': 0.9, 'optimizer.nesterov': True,
             'optimizer.weight_decay': 1e-4,
             'schedule.name': 'step', 'schedule.base_lr': 0.005, 'schedule.decay_epochs': (11, 14),
             'schedule.decay_factor': 0.1,
             'eval.batch_size': 32, 'eval.average': 'softmax', 'eval.split': 'validation',
             'checkpoint.every_steps': 1000})
  c.init_from = common.imagenet21k_init('B', positional_embedding='separate_time_zero',
                                        temporal_attention='copy_spatial')
  return c
