"""Every attention scheme in miniature on the synthetic motion dataset (2 CPU cores, minutes).

  vvt train --config configs/synthetic.py:divided --workdir runs/divided
  vvt train --config configs/synthetic.py:scheme=space,data_dir=data/synthetic --workdir runs/space

ARG: `SCHEME[,data_dir=DIR]`, SCHEME one of spatiotemporal, factorised_encoder,
factorised_self_attention, factorised_dot_product (ViViT Models 1-4), space, joint, divided,
local_global, axial (TimeSformer), space_time_mixing (X-ViT); default divided. DIR defaults to
data/synthetic (written by `make demo` or `vvt data synthetic`). The config sets no `num_classes` or
`class_names`: they come from the data it is pointed at (its manifest; `vvt.config.labels`), so
`--config.dataset.train_files=data/mine/train.tfrecord@4` (a `vvt data convert` output) needs nothing else.

Shared recipe (`configs.common.synthetic_config`): 2 layers, width 64, 2x8x8 tubelets, sinusoidal
positions, GAP, 8 frames of 32^2, AdamW 1e-3 cosine, batch 8, 20 epochs. Space-only attention has,
like TimeSformer's space-only model, no time embedding (`positional_embedding='spatial'`), so nothing
but the tubelets' two frames tells it time; with a time-aware table
(`--config.model.positional_embedding=sinusoidal`) the per-frame features are time-stamped before the
average over frames and the order leaks in. X-ViT (space_time_mixing) has no time table either: its
window (t_w >= 1) is what orders the frames, and t_w = 0 is space-only attention.
"""
from configs import common
from vvt.config import schema


def get_config(arg=None):
  a = common.parse_arg(arg, scheme='divided', data_dir=schema.SYNTHETIC_DIR)
  return common.synthetic_config(a['scheme'], a['data_dir'])
