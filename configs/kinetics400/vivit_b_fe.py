"""ViViT-B/16x2 factorised encoder (Model 2) on Kinetics-400 (Arnab et al. 2021, sec. 4).

Paper recipe: 32 frames at stride 2, 224^2, tubelets 2x16x16, initialised from
the ImageNet-21k ViT-B/16 (central-frame / filter-inflation tubelet init),
synchronous SGD with momentum 0.9 and a cosine schedule, 30 epochs, batch 64,
multi-view test with 4 temporal clips x 3 spatial crops. Fields the paper
leaves open (base lr 0.1, 2.5 warmup epochs, clipping at global norm 1) follow
Scenic's public ViViT configs as we know them; check them before claiming a
reproduction.

  vvt train --config configs/kinetics400/vivit_b_fe.py --workdir runs/vivit_b_k400 \
      --config.dataset.train_files='K400/train@1024' --config.dataset.eval_files='K400/test@512' \
      --config.init_from.path=ViT-B_16_imagenet21k.npz
"""
import ml_collections

from configs import common

IMAGENET21K_B16 = 'imagenet21k/ViT-B_16.npz'


def get_config(arg=None):
  del arg
  c = common.paper_config(
      model=dict(family='vivit', attention='factorised_encoder', variant='B/16x2',
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
      path=IMAGENET21K_B16, format='big_vision', tubelet_init='central_frame',
      positional_embedding='repeat'))
  return c
