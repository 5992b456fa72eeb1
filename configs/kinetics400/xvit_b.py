"""X-ViT-B/16 space-time mixing attention on Kinetics-400 (Bulat et al. 2021).

  --config configs/kinetics400/xvit_b.py      8 frames (default)
  --config configs/kinetics400/xvit_b.py:16   16 frames
ViT-B/16 from ImageNet-21k, time embedding at zero, temporal window t_w=1 and
the one-layer temporal-attention (TA) head. Recipe as in the paper's training
details: SGD momentum 0.9, 35 epochs with cosine decay and 5 warmup epochs,
batch 64; test: 1 temporal clip x 3 spatial crops. (Base lr and weight decay
are not in the paper text we have; 0.05 / 1e-4 here — check before claiming
a reproduction.)
"""
import ml_collections

from configs import common


def get_config(arg=None):
  frames = int(arg or 8)
  if frames not in (8, 16):
    raise ValueError(f'xvit_b.py: frames must be 8 or 16, got {arg!r}')
  c = common.paper_config(
      model=dict(family='xvit', attention='space_time_mixing', variant='B/16',
                 num_frames=frames, image_size=224, num_classes=400,
                 frame_aggregation='temporal_attention'),
      dataset=dict(stride=8 if frames == 8 else 4, num_test_clips=1,
                   num_spatial_crops=3,
                   train_files='kinetics400/train@1024', eval_files='kinetics400/test@512',
                   horizontal_flip=True, normalization='imagenet'),
      batch_size=64, num_epochs=35.0,
      optimizer__name='sgd', optimizer__momentum=0.9, optimizer__weight_decay=1e-4,
      schedule__name='cosine', schedule__base_lr=0.05, schedule__warmup_epochs=5.0,
      eval__batch_size=32, checkpoint__every_steps=1000)
  c.init_from = ml_collections.ConfigDict(dict(
      path='imagenet21k/ViT-B_16.npz', format='big_vision',
      positional_embedding='separate_time_zero'))
  return c
