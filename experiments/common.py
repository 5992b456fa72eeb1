"""What the study files share: their ARG, the miniature base config, the seeds of a study.

ARG of every study: `SETTING[,seeds=N][,data_dir=DIR]`. SETTING is one of the study's datasets (its first is
the default) or `mini`; a miniature study runs 3 seeds unless `seeds=N`, a paper-scale one 1 (no seed in
the trial names) unless `seeds=N` with N > 1. DIR is the synthetic data of `mini` (default data/synthetic,
written by `vvt sweep` the first time).
"""
from configs import common as configs_common
from vvt.config import paths
from vvt.config import schema
from vvt.studies import sweep

MINI = 'mini'
MINI_SEEDS = 3


def parse(arg, settings) -> dict:
  """{'setting', 'seeds', 'data_dir'} of a study's ARG; ValueError naming the choices."""
  a = configs_common.parse_arg(arg, setting=settings[0] if settings else MINI, seeds=0, data_dir=schema.SYNTHETIC_DIR)
  if a['setting'] not in (*settings, MINI):
    raise ValueError(f'setting {a["setting"]!r} is not one of {", ".join((*settings, MINI))}')
  return a


def is_mini(a: dict) -> bool:
  return a['setting'] == MINI


def with_seeds(trials, a: dict):
  """The trials over the study's seeds (always for `mini`; at paper scale only if seeds > 1)."""
  n = a['seeds'] or (MINI_SEEDS if is_mini(a) else 1)
  return sweep.product(trials, sweep.seeds(n)) if is_mini(a) or n > 1 else list(trials)


def miniature(scheme: str, a: dict, **model):
  """The synthetic recipe (configs/common.py: synthetic_config) of `scheme` as a study's base."""
  return configs_common.synthetic_config(scheme, a['data_dir'], **model)


def scheme_fields(scheme: str, base: str) -> dict:
  """The overrides that turn the miniature of `base` into the miniature of `scheme` (its family's
  defaults included), so a trial is exactly `configs/synthetic.py:SCHEME`."""
  want = paths.flatten(configs_common.synthetic_config(scheme))
  have = paths.flatten(configs_common.synthetic_config(base))
  return {k: v for k, v in want.items() if k.startswith('model.') and have.get(k) != v}
