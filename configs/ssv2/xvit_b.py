"""X-ViT-B/16 space-time mixing attention on Something-Something v2 (Bulat et al. 2021, sec. 4.1).

  --config configs/ssv2/xvit_b.py      16 frames (default; Table 7 also has 8 and 32: `:8`, `:32`)
Training details (sec. 4.1): SGD momentum 0.9, cosine with linear warmup, 35 epochs on SSv2, base lr 0.05
"set at a batch size of 128", random scaling 0.9x to 1.3x and cropping, no flip on SSv2, autoaugment
(Cubuk et al.'s ImageNet policy), random erasing 0.5, label smoothing 0.3; ImageNet-21k init;
test 1x3 views. Weight decay, warmup length, Nesterov, segment sampling and [-1, 1] inputs are the official
code's; sources: docs/recipes.md. As the official SSv2 config runs X-ViT: one segment of all the frames
(`XVIT.NUM_SEGMENTS: 16`), the backbone's 8-row time table used periodically (row t mod 8), shift_div 4 (half
of the channels from the neighbours), all blocks mixing, and the TA head's MLP of width 768.
"""
from configs import common


def get_config(arg=None):
  frames = int(arg or 16)
  if frames not in (8, 16, 32):
    raise ValueError(f'ssv2/xvit_b.py: frames must be 8, 16 or 32, got {arg!r}')
  c = common.paper_config(
      model=dict(family='xvit', attention='space_time_mixing', variant='B/16',
                 num_frames=frames, image_size=224, num_classes=174,
                 frame_aggregation='temporal_attention', time_embedding_rows=8,
                 mixing=dict(window=1, shift_div=4, num_segments=frames),
                 temporal_head=dict(mlp_dim=768)),
      dataset=dict(sampling='segment', short_video_policy='pad', num_test_clips=1, num_spatial_crops=3,
                   train_files='ssv2/train@256', eval_files='ssv2/validation@64',
                   **common.scale_jitter(256, 0.9, 1.3), eval_resize=224,
                   horizontal_flip=False, autoaugment='imagenet',
                   random_erasing=0.5, normalization='zero_centre'),
      train={'batch_size': 128, 'num_epochs': 35.0,
             'optimizer.name': 'sgd', 'optimizer.momentum': 0.9, 'optimizer.nesterov': True,
             'optimizer.weight_decay': 1e-4,
             'schedule.name': 'cosine', 'schedule.base_lr': 0.05, 'schedule.warmup_epochs': 5.0,
             'loss.label_smoothing': 0.3,
             'eval.batch_size': 32, 'eval.average': 'logits', 'eval.split': 'validation',
             'checkpoint.every_steps': 1000})
  c.init_from = common.imagenet21k_init('B', positional_embedding='separate_time_zero')
  return c
