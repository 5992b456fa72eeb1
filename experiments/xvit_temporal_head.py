"""X-ViT Table 2b (Bulat et al. 2021, sec. 4.2 "Effect of temporal aggregation"): temporal averaging against
the temporal-attention (TA) head with 1, 2 or 3 layers, X-ViT-B/16 with 8 frames and t_w = 1 on
Something-Something-v2 (paper top-1: 61.6 averaging, 63.4 with 1, 2 or 3 TA layers).

  vvt sweep --config experiments/xvit_temporal_head.py:ssv2 --workdir runs/xvit_temporal_head
  vvt sweep --config experiments/xvit_temporal_head.py:mini --workdir runs/xvit_temporal_head_mini

Base: configs/ssv2/xvit_b.py:8. `mini`: the same four on the synthetic data, 3 seeds.
"""
from configs.ssv2 import xvit_b
from experiments import common
from vvt.studies import sweep

HEADS = {'average': {'model.frame_aggregation': 'mean'}} | {
    f'ta{n}': {'model.frame_aggregation': 'temporal_attention', 'model.temporal_head.num_layers': n}
    for n in (1, 2, 3)}


def get_config(arg=None):
  a = common.parse(arg, ('ssv2',))
  return common.miniature('space_time_mixing', a) if common.is_mini(a) else xvit_b.get_config('8')


def get_sweep(arg=None):
  return common.with_seeds(sweep.variants('head', HEADS), common.parse(arg, ('ssv2',)))
