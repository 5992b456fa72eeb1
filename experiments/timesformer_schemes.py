"""TimeSformer Table 1 (Bertasius et al. 2021): the five space-time attention schemes, space (S), joint
space-time (ST), divided space-time (T+S), sparse local-global (L+G) and axial (T+W+H), on Kinetics-400
and Something-Something-v2 (paper: 76.9 / 77.4 / 78.0 / 75.9 / 73.5 on K400, 36.6 / 58.5 / 59.5 / 56.3 /
56.2 on SSv2; 85.9M-156.8M params).

  vvt sweep --config experiments/timesformer_schemes.py:k400 --workdir runs/tsf_schemes_k400
  vvt sweep --config experiments/timesformer_schemes.py:ssv2 --workdir runs/tsf_schemes_ssv2
  vvt sweep --config experiments/timesformer_schemes.py:mini --workdir runs/tsf_schemes_mini

Base: configs/kinetics400/timesformer_b.py or configs/ssv2/timesformer_b.py (ViT-B/16 from ImageNet-21k,
8 frames of 224^2, 1x3 views); space-only without a time embedding, as the authors build it
(configs/common.py: TIMESFORMER_SCHEME_FIELDS). `mini`: the synthetic recipe of each scheme (space-only without a time
embedding, as configs/synthetic.py), 3 seeds.
"""
from configs import common as configs_common
from configs.kinetics400 import timesformer_b as k400
from configs.ssv2 import timesformer_b as ssv2
from experiments import common
from vvt.studies import sweep

SETTINGS = ('k400', 'ssv2')
SCHEMES = ('space', 'joint', 'divided', 'local_global', 'axial')


def get_config(arg=None):
  a = common.parse(arg, SETTINGS)
  if common.is_mini(a):
    return common.miniature('divided', a)
  return (k400 if a['setting'] == 'k400' else ssv2).get_config()


def get_sweep(arg=None):
  a = common.parse(arg, SETTINGS)
  fields = ((lambda s: common.scheme_fields(s, 'divided') | {'model.attention': s}) if common.is_mini(a)
            else (lambda s: {f'model.{k}': v for k, v in configs_common.timesformer_scheme(s).items()}))
  return common.with_seeds(sweep.variants('scheme', {s: fields(s) for s in SCHEMES}), a)
