"""X-ViT Table 3 (Bulat et al. 2021, sec. 4.2 "Effect of Summary token"): the summary token and the TA head,
each on or off, X-ViT-B/16 with 8 frames on Something-Something-v2 and Kinetics-400 (paper top-1, none /
summary / both / TA: 61.6 / 62.9 / 62.5 / 63.4 on SSv2, 77.8 / 78.7 / 78.0 / 78.5 on K400).

  vvt sweep --config experiments/xvit_summary_token.py:ssv2 --workdir runs/xvit_summary_ssv2
  vvt sweep --config experiments/xvit_summary_token.py:k400 --workdir runs/xvit_summary_k400
  vvt sweep --config experiments/xvit_summary_token.py:mini --workdir runs/xvit_summary_mini

Base: configs/ssv2/xvit_b.py:8 or configs/kinetics400/xvit_b.py (8 frames); without the TA head the frames
are averaged. `mini`: the four on the synthetic data, 3 seeds.
"""
from configs.kinetics400 import xvit_b as k400
from configs.ssv2 import xvit_b as ssv2
from experiments import common
from vvt.studies import sweep

SETTINGS = ('ssv2', 'k400')


def get_config(arg=None):
  a = common.parse(arg, SETTINGS)
  if common.is_mini(a):
    return common.miniature('space_time_mixing', a)
  return ssv2.get_config('8') if a['setting'] == 'ssv2' else k400.get_config('8')


def get_sweep(arg=None):
  a = common.parse(arg, SETTINGS)
  return common.with_seeds(sweep.product(
      sweep.axis('model.mixing.summary_token', [False, True]),
      sweep.axis('model.frame_aggregation', ['mean', 'temporal_attention'])), a)
