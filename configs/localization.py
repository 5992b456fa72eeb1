"""Temporal action localisation: ActionFormer on the feature sequences of untrimmed videos (`vvt train`).

  vvt train --config configs/localization.py:data/untrimmed_features --workdir runs/loc
  vvt train --config configs/localization.py:dir=DIR,recipe=thumos14 --workdir runs/thumos

ARG: `DIR[,recipe=synthetic|thumos14]`. DIR holds the sequences of `vvt features --window` (sequences/,
sequences.json) and `annotations.json` (ActivityNet style: subsets 'training' and 'validation' for the synthetic
recipe, 'validation' and 'test' for THUMOS14).

recipe=thumos14: ActionFormer's THUMOS14 settings (configs/thumos_i3d.yaml: max_seq_len 2304, window 19, 6 levels,
AdamW lr 1e-4, weight decay 0.05, batch 2, 30 epochs after 5 of warmup, gradient clipping 1.0; mAP at tIoU
0.3:0.1:0.7); docs/recipes.md cites each. recipe=synthetic (default): a tiny head (width 64, 4 levels, window 9,
sequences of 128 steps) that trains on CPU in a minute or two.

The video backbone (`model`) only made the features: it is not trained here; `num_classes` comes from the
annotations' label list.
"""
from configs import common

THUMOS14 = dict(task=dict(train_subset='validation', eval_subset='test'),
                train=dict(batch_size=2, num_epochs=35, base_lr=1e-4, warmup_epochs=5))
SYNTHETIC = dict(task=dict(train_subset='training', eval_subset='validation', max_seq_len=128, embed_dim=64,
                           num_heads=4, window=9, levels=4, stem_layers=1, head_layers=2,
                           regression_ranges=((0, 4), (4, 8), (8, 16), (16, 10000))),
                 train=dict(batch_size=4, num_epochs=60, base_lr=1e-3, warmup_epochs=3))


def get_config(arg=None):
  a = common.parse_arg(arg, dir='data/untrimmed_features', recipe='synthetic')
  recipe = {'synthetic': SYNTHETIC, 'thumos14': THUMOS14}[a['recipe']]
  c = common.synthetic_config('divided', a['dir'])
  c.num_classes = 1  # replaced by the annotations' label list
  c.task.name = 'localization'
  c.task.localization.update(dict(sequences=a['dir'], annotations=f'{a["dir"]}/annotations.json',
                                  **recipe['task']))
  train = recipe['train']
  c.batch_size, c.num_epochs = train['batch_size'], train['num_epochs']
  c.optimizer.update(name='adamw', weight_decay=0.05, grad_clip_norm=1.0)
  c.schedule.update(name='cosine', base_lr=train['base_lr'], warmup_epochs=train['warmup_epochs'])
  return c
