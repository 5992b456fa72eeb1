"""X-ViT Table 1 (Bulat et al. 2021, sec. 4.2 "Effect of local window size"): the temporal window t_w = 0
(spatial-only attention), 1, 2 of space-time mixing, X-ViT-B/16 with 8 frames on Something-Something-v2,
trained with temporal averaging to isolate the window from the TA head (paper top-1: 44.2 / 61.6 / 59.7).

  vvt sweep --config experiments/xvit_window.py:ssv2 --workdir runs/xvit_window
  vvt sweep --config experiments/xvit_window.py:mini --workdir runs/xvit_window_mini

Base: configs/ssv2/xvit_b.py:8 with `frame_aggregation='mean'`. Table 1's "t_w = 2 (Bo.)" (only the window's
boundary frames) has no vvt field. `mini`: the same three on the synthetic data, 3 seeds, with X-ViT's
1-frame patches (8x8) and no time table (configs/common.py), so t_w = 0 is order-free like space-only.
"""
from configs.ssv2 import xvit_b
from experiments import common
from vvt.studies import sweep


def get_config(arg=None):
  a = common.parse(arg, ('ssv2',))
  c = common.miniature('space_time_mixing', a) if common.is_mini(a) else xvit_b.get_config('8')
  c.model.frame_aggregation = 'mean'  # Table 1: "trained using temporal averaging"
  if common.is_mini(a):
    # X-ViT's 1-frame (2D) patches: with 2-frame tubelets every window would see the local direction.
    c.model.tubelet = (1, 8, 8)
  return c


def get_sweep(arg=None):
  return common.with_seeds(sweep.axis('model.mixing.window', [0, 1, 2]), common.parse(arg, ('ssv2',)))
