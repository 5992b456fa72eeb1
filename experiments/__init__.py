"""Ablation studies: one file per table or figure of the papers, each a base config and a sweep.

Every file has `get_config(arg=None)` (the base run config, like a file in configs/) and `get_sweep(arg=None)`
(the trials: dicts of config overrides built with vvt.studies.sweep). ARG picks the dataset of the paper's
table (`k400`, `ssv2`, `epic`) or `mini`: the same study in miniature on the synthetic motion data, which
a CPU runs in minutes a trial. Run one with

  vvt sweep --config experiments/timesformer_schemes.py:mini --workdir runs/schemes

Shared pieces (ARG parsing, the miniature base, seeds) are in experiments/common.py; see experiments/README.md.
"""
