"""Every attention scheme of the three papers in miniature: ViViT Table 2 (Models 1-4) and TimeSformer
Table 1 (space, joint, divided, local-global, axial) plus X-ViT's space-time mixing, on the synthetic motion
data, 3 seeds each (each trial is exactly `configs/synthetic.py:SCHEME`: ~0.2M params, 8 frames of 32^2,
20 epochs, ~4 min on 2 CPU cores).

  vvt sweep --config experiments/synthetic_schemes.py --workdir runs/schemes
  vvt sweep --config experiments/synthetic_schemes.py:seeds=1 --workdir runs/smoke --only 'space|divided' \\
      --config.num_epochs=1

ARG: `[seeds=N][,data_dir=DIR]` (default 3 seeds, data/synthetic).
"""
from configs import common as configs_common
from experiments import common
from vvt.models import schemes as scheme_table
from vvt.studies import sweep

BASE = 'divided'
# The schemes of the three papers (the scheme table also holds VideoPrism's space_then_time, not part of this study).
PAPER_SCHEMES = tuple(s for s in configs_common.SYNTHETIC_SCHEMES
                      if scheme_table.get(s).paper.startswith(('ViViT', 'TimeSformer', 'X-ViT')))


def _args(arg):
  return common.parse((f'mini,{arg}' if arg else 'mini'), ())


def get_config(arg=None):
  return common.miniature(BASE, _args(arg))


def get_sweep(arg=None):
  schemes = sweep.variants('scheme', {s: common.scheme_fields(s, BASE) | {'model.attention': s}
                                      for s in PAPER_SCHEMES})
  return common.with_seeds(schemes, _args(arg))
