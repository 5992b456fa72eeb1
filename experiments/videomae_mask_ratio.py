"""VideoMAE's masking-ratio ablation (Tong et al. 2022, sec. 4: tube masking at ratios from 0.5 to 0.95, 0.9 the
best on both Something-Something v2 and Kinetics-400), as pretraining runs of task.name='mae' judged by their
reconstruction loss under fixed masks.

  vvt sweep --config experiments/videomae_mask_ratio.py:ssv2 --workdir runs/videomae_mask_ratio
  vvt sweep --config experiments/videomae_mask_ratio.py:mini --workdir runs/videomae_mask_ratio_mini

Base: configs/ssv2/videomae_b.py:800 (the 800-epoch schedule of the ablations; `k400`: the Kinetics one). The
paper judges each ratio by fine-tuning top-1, which is a second run per trial (`vvt train --init TRIAL`); the
sweep's own table is the pretraining loss, which is not comparable across ratios (more masked tubelets are
harder to predict) and says only that each trial trained. `mini`: the same ratios on the synthetic data (a
2-block width-64 encoder, a 1-block width-32 decoder, 8 frames of 32^2 in 2x8x8 tubelets: 4 x 16 tokens), 3 seeds.
"""
from configs.kinetics400 import videomae_b as k400
from configs.ssv2 import videomae_b as ssv2
from experiments import common
from vvt.studies import sweep

RATIOS = (0.5, 0.75, 0.9, 0.95)


def get_config(arg=None):
  a = common.parse(arg, ('ssv2', 'k400'))
  if not common.is_mini(a):
    return (k400 if a['setting'] == 'k400' else ssv2).get_config('800')
  c = common.miniature('spatiotemporal', a)
  c.task.name = 'mae'
  c.task.mae.decoder_depth, c.task.mae.decoder_width, c.task.mae.decoder_heads = 1, 32, 2
  c.model.classifier, c.model.positional_embedding = 'gap', 'sinusoidal'
  return c


def get_sweep(arg=None):
  return common.with_seeds(sweep.axis('task.mae.mask_ratio', list(RATIOS)), common.parse(arg, ('ssv2', 'k400')))
