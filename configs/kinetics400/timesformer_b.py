"""TimeSformer divided space-time attention on Kinetics-400 (Bertasius et al. 2021).

  --config configs/kinetics400/timesformer_b.py      TimeSformer:    8 frames x rate 32, 224^2
  --config configs/kinetics400/timesformer_b.py:hr   TimeSformer-HR: 16 frames x rate 16, 448^2
  --config configs/kinetics400/timesformer_b.py:l    TimeSformer-L:  96 frames x rate 4, 224^2
All are ViT-B/16 from ImageNet-21k, time embedding at zero, temporal attention copied from the spatial one
(its temporal projection at zero). Appendix A: SGD momentum 0.9, weight decay 1e-4, lr 0.005 divided by 10
at epochs 11 and 14 of 15, batch 16, shorter side jittered in [256, 320] ([448, 512] for HR); test: 1 clip in
the middle x 3 crops of the shorter side scaled to 224 (448), "averaging the softmax scores". Nesterov,
stochastic depth 0.1, videos at 30 fps (`vvt data convert --fps 30`) and a clip longer than its video padded
with the last frame are the official code's; sources: docs/recipes.md.
"""
from configs import common

VARIANTS = {  # name: (frames, sampling rate, image size)
    'base': (8, 32, 224),
    'hr': (16, 16, 448),
    'l': (96, 4, 224),
}


def get_config(arg=None):
  name = (arg or 'base').lower()
  if name not in VARIANTS:
    raise ValueError(f'timesformer_b.py: unknown variant {arg!r}; expected one of '
                     f'{", ".join(VARIANTS)}')
  frames, rate, size = VARIANTS[name]
  c = common.paper_config(
      model=dict(family='timesformer', attention='divided', variant='B/16',
                 num_frames=frames, image_size=size, num_classes=400, classifier='token',
                 stochastic_depth=0.1),
      dataset=dict(stride=rate, fps=30, short_video_policy='pad', num_test_clips=1, num_spatial_crops=3,
                   train_files='kinetics400/train@1024', eval_files='kinetics400/test@512',
                   train_min_resize=256 if size == 224 else 448,
                   train_max_resize=320 if size == 224 else 512,
                   eval_resize=size, horizontal_flip=True, normalization='imagenet'),
      train={'batch_size': 16, 'num_epochs': 15.0,
             'optimizer.name': 'sgd', 'optimizer.momentum': 0.9, 'optimizer.nesterov': True,
             'optimizer.weight_decay': 1e-4,
             'schedule.name': 'step', 'schedule.base_lr': 0.005, 'schedule.decay_epochs': (11, 14),
             'schedule.decay_factor': 0.1,
             'eval.batch_size': 32, 'eval.average': 'softmax', 'checkpoint.every_steps': 1000})
  c.init_from = common.imagenet21k_init('B', positional_embedding='separate_time_zero',
                                        temporal_attention='copy_spatial')
  return c
