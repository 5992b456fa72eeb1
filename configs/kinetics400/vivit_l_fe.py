"""ViViT-L/16x2 factorised encoder (Model 2) on Kinetics-400 (Arnab et al. 2021, sec. 4).

Same recipe as vivit_b_fe.py (SGD momentum 0.9, cosine, 30 epochs, batch 64,
4x3 test views, 32 frames at stride 2) from the ImageNet-21k ViT-L/16.
"""
import ml_collections

from vvt.train import defaults


def get_config(arg=None):
  del arg
  c = defaults.paper_config(
      model=dict(family='vivit', attention='factorised_encoder', variant='L/16x2',
                 num_frames=32, image_size=224, num_classes=400, temporal_layers=4,
                 classifier='token'),
      dataset=dict(stride=2, num_test_clips=4, num_spatial_crops=3,
                   train_files='kinetics400/train@1024', eval_files='kinetics400/test@512',
                   horizontal_flip=True, normalization='zero_centre'),
      batch_size=64, num_epochs=30.0,
      optimizer__name='sgd', optimizer__momentum=0.9, optimizer__grad_clip_norm=1.0,
      schedule__name='cosine', schedule__base_lr=0.1, schedule__warmup_epochs=2.5,
      eval__batch_size=64, checkpoint__every_steps=1000)
  c.init_from = ml_collections.ConfigDict(dict(
      path='imagenet21k/ViT-L_16.npz', format='big_vision', tubelet_init='central_frame',
      positional_embedding='repeat'))
  return c
