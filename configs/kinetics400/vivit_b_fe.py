"""ViViT-B/16x2 factorised encoder (Model 2) on Kinetics-400 (Arnab et al. 2021, sec. 4).

Paper: 32 frames at stride 2, tubelets 2x16x16 with central-frame init, positional embeddings repeated over
time, ImageNet-21k ViT init, SGD momentum + cosine, random crop / flip / colour jitter only (Table 3's first
row: "For larger datasets like Kinetics ... we use only the first row"), per-view logits averaged. Test
views (`views=` argument, configs/common.py VIVIT_VIEWS):

  --config configs/kinetics400/vivit_b_fe.py                 4 temporal views (sec. 4.1 "Unless otherwise
                                                             specified, we use a total of 4 views"): the
                                                             ablations of sec. 4.2, ViViT-B's
  --config configs/kinetics400/vivit_b_fe.py:views=sota      4 x 3 (sec. 4.3: 3 spatial crops "for each
                                                             temporal view", Table 5)

Kinetics at its 25 fps (sec. 4.1; `vvt data convert --fps 25`), a clip longer than its video looped (as
Scenic's DMVR reader). What the paper leaves to its supplementary (lr, epochs, batch, warmup, clipping, jitter
strengths) is from Scenic's public config; every value and its source: docs/recipes.md.

  vvt train --config configs/kinetics400/vivit_b_fe.py --workdir runs/k400_vivit_b_fe \\
      --config.dataset.train_files='K400/train@1024' --config.dataset.eval_files='K400/test@512' \\
      --config.init_from.path=ViT-B_16_imagenet21k.npz
"""
from configs import common

KINETICS400 = dict(num_classes=400, train_files='kinetics400/train@1024', eval_files='kinetics400/test@512')


def get_config(arg=None):
  views = common.parse_arg(arg, views='ablation')['views']
  c = kinetics_config(dict(attention='factorised_encoder', variant='B/16x2', temporal_layers=4), views,
                      base_lr=0.05)
  c.init_from = common.vivit_image_init('imagenet21k', 'B')
  return c


def kinetics_config(model: dict, views: str, base_lr: float, data: dict = KINETICS400):
  """ViViT's recipe for the large datasets (Kinetics, Moments in Time: "we use only the first row of Tab. 3")
  for `model` fields (attention, variant, ...): 32 frames at stride 2 of 25-fps video, 224^2 class-token
  model, Scenic's schedule at `base_lr`; `data`: num_classes, train_files, eval_files[, split]. No init_from."""
  data = dict(data)
  num_classes, split = data.pop('num_classes'), data.pop('split', 'test')
  return common.paper_config(
      model=dict(family='vivit', num_frames=32, image_size=224, num_classes=num_classes, classifier='token',
                 **model),
      dataset=dict(stride=2, fps=25, short_video_policy='loop', **common.vivit_views(views), **data,
                   **common.scale_jitter(256, 0.9, 1.33), eval_resize=256,
                   horizontal_flip=True, color_jitter=1.0, color_jitter_prob=0.8,
                   normalization='zero_centre'),
      train={'batch_size': 64, 'num_epochs': 30.0,
             'optimizer.name': 'sgd', 'optimizer.momentum': 0.9, 'optimizer.grad_clip_norm': 1.0,
             'schedule.name': 'cosine', 'schedule.base_lr': base_lr, 'schedule.warmup_epochs': 2.5,
             'eval.batch_size': 64, 'eval.average': 'logits', 'eval.split': split,
             'checkpoint.every_steps': 1000})
