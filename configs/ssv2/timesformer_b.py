"""TimeSformer (divided, B/16, 8 frames) on Something-Something v2 (Bertasius et al. 2021).

TimeSformer's SSv2 recipe: segment-based sampling (one frame per segment), no
horizontal flip, SGD momentum 0.9, weight decay 1e-4, lr 0.005 divided by 10
at epochs 11 and 14 of 15; test: 1 clip x 3 crops. This is also the setting of
the paper's Table 1 (space vs divided attention on SSv2).
"""
import ml_collections

from configs import common


def get_config(arg=None):
  attention = arg or 'divided'
  c = common.paper_config(
      model=dict(family='timesformer', attention=attention, variant='B/16',
                 num_frames=8, image_size=224, num_classes=174),
      dataset=dict(sampling='segment', num_test_clips=1, num_spatial_crops=3,
                   train_files='ssv2/train@256', eval_files='ssv2/validation@64',
                   horizontal_flip=False, normalization='imagenet'),
      batch_size=64, num_epochs=15.0,
      optimizer__name='sgd', optimizer__momentum=0.9, optimizer__nesterov=True,
      optimizer__weight_decay=1e-4,
      schedule__name='step', schedule__base_lr=0.005, schedule__decay_epochs=(11, 14),
      eval__batch_size=32, eval__split='validation', checkpoint__every_steps=1000)
  c.init_from = ml_collections.ConfigDict(dict(
      path='imagenet21k/ViT-B_16.npz', format='big_vision',
      positional_embedding='separate_time_zero', temporal_attention='copy_spatial'))
  return c
