"""ViViT-L/16x2 factorised encoder on Something-Something v2 (Arnab et al. 2021).

SSv2 is direction-sensitive: no horizontal flip. Regularisation as in ViViT's
progressive-regularisation table: random crop, RandAugment, label smoothing
0.3, mixup 0.3, stochastic depth 0.3; initialised from the Kinetics-400
ViViT-L model (or ImageNet-21k); SGD momentum, cosine; 4x3 test views.
"""
import ml_collections

from configs import common


def get_config(arg=None):
  del arg
  c = common.paper_config(
      model=dict(family='vivit', attention='factorised_encoder', variant='L/16x2',
                 num_frames=32, image_size=224, num_classes=174, temporal_layers=4,
                 stochastic_depth=0.3),
      dataset=dict(stride=2, num_test_clips=4, num_spatial_crops=3,
                   train_files='ssv2/train@256', eval_files='ssv2/validation@64',
                   horizontal_flip=False,
                   randaugment={'num_layers': 2, 'magnitude': 15},
                   normalization='zero_centre'),
      batch_size=64, num_epochs=35.0,
      optimizer__name='sgd', optimizer__momentum=0.9, optimizer__grad_clip_norm=1.0,
      schedule__name='cosine', schedule__base_lr=0.5, schedule__warmup_epochs=2.5,
      loss__label_smoothing=0.3, loss__mixup_alpha=0.3,
      eval__batch_size=64, eval__split='validation', checkpoint__every_steps=1000)
  c.init_from = ml_collections.ConfigDict(dict(
      path='imagenet21k/ViT-L_16.npz', format='big_vision', tubelet_init='central_frame',
      positional_embedding='repeat'))
  return c
