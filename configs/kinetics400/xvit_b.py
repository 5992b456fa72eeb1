"""X-ViT-B/16 space-time mixing attention on Kinetics-400 (Bulat et al. 2021, sec. 4.1).

  --config configs/kinetics400/xvit_b.py      8 frames (default)
  --config configs/kinetics400/xvit_b.py:16   16 frames
ViT-B/16 from ImageNet-21k (spatial positions from the image model, temporal ones at zero), temporal window
t_w=1 and the one-layer temporal-attention (TA) head. Training details (sec. 4.1): SGD momentum 0.9, cosine
with linear warmup, 30 epochs on Kinetics, base lr 0.03 "set at a batch size of 128", random scaling 0.9x to
1.3x and cropping, flip, autoaugment (Cubuk et al.'s ImageNet policy, one sub-policy per clip), mixup 0.4;
test 1x3 views. Weight decay, warmup length, Nesterov, sampling rate, videos at 30 fps (`vvt data convert --fps
30`), a clip longer than its video padded with the last frame and [-1, 1] inputs are the official code's (rate
32 for 8 frames is ours: the span of its 16x16); sources: docs/recipes.md. As the official code runs X-ViT: mixing
within segments of 8 frames (`XVIT.NUM_SEGMENTS: 8`, so the 16-frame model is two 8-frame clips that meet in
the TA head), the backbone's 8-row time table used periodically (row t mod 8), shift_div 8 (a quarter of the
channels from the neighbours), all blocks mixing, and the TA head's MLP of width 768.
"""
from configs import common

STRIDE = {8: 32, 16: 16}  # frames: sampling rate (each clip covers 256 frames: 8.5 s at 30 fps)


def get_config(arg=None):
  frames = int(arg or 8)
  if frames not in STRIDE:
    raise ValueError(f'xvit_b.py: frames must be 8 or 16, got {arg!r}')
  c = common.paper_config(
      model=dict(family='xvit', attention='space_time_mixing', variant='B/16',
                 num_frames=frames, image_size=224, num_classes=400,
                 frame_aggregation='temporal_attention', time_embedding_rows=8,
                 mixing=dict(window=1, shift_div=8, num_segments=8),
                 temporal_head=dict(mlp_dim=768)),
      dataset=dict(stride=STRIDE[frames], fps=30, short_video_policy='pad', num_test_clips=1, num_spatial_crops=3,
                   train_files='kinetics400/train@1024', eval_files='kinetics400/test@512',
                   **common.scale_jitter(256, 0.9, 1.3), eval_resize=224,
                   horizontal_flip=True, autoaugment='imagenet',
                   normalization='zero_centre'),
      train={'batch_size': 128, 'num_epochs': 30.0,
             'optimizer.name': 'sgd', 'optimizer.momentum': 0.9, 'optimizer.nesterov': True,
             'optimizer.weight_decay': 1e-5,
             'schedule.name': 'cosine', 'schedule.base_lr': 0.03, 'schedule.warmup_epochs': 5.0,
             'loss.mixup_alpha': 0.4,
             'eval.batch_size': 32, 'eval.average': 'logits', 'checkpoint.every_steps': 1000})
  c.init_from = common.imagenet21k_init('B', positional_embedding='separate_time_zero')
  return c
