"""X-ViT-B/16 (space-time mixing, 16 frames) on Something-Something v2 (Bulat et al. 2021).

SSv2 training details: no horizontal flip, RandAugment, mixup, label smoothing
and stochastic depth (as ViViT), initialised from the Kinetics-400 X-ViT or
ImageNet-21k; SGD momentum, cosine; test 1 clip x 3 crops.
"""
import ml_collections

from configs import common


def get_config(arg=None):
  frames = int(arg or 16)
  c = common.paper_config(
      model=dict(family='xvit', attention='space_time_mixing', variant='B/16',
                 num_frames=frames, image_size=224, num_classes=174, stochastic_depth=0.2,
                 frame_aggregation='temporal_attention'),
      dataset=dict(sampling='segment', num_test_clips=1, num_spatial_crops=3,
                   train_files='ssv2/train@256', eval_files='ssv2/validation@64',
                   horizontal_flip=False, randaugment={'num_layers': 2, 'magnitude': 9},
                   normalization='imagenet'),
      batch_size=64, num_epochs=35.0,
      optimizer__name='sgd', optimizer__momentum=0.9, optimizer__weight_decay=1e-4,
      schedule__name='cosine', schedule__base_lr=0.05, schedule__warmup_epochs=5.0,
      loss__label_smoothing=0.3, loss__mixup_alpha=0.3,
      eval__batch_size=32, eval__split='validation', checkpoint__every_steps=1000)
  c.init_from = ml_collections.ConfigDict(dict(
      path='imagenet21k/ViT-B_16.npz', format='big_vision',
      positional_embedding='separate_time_zero'))
  return c
