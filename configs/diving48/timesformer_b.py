"""TimeSformer divided space-time attention on Diving-48 (Bertasius et al. 2021, Table 7).

  --config configs/diving48/timesformer_b.py      TimeSformer:    8 frames x rate 32, 224^2 (74.9)
  --config configs/diving48/timesformer_b.py:hr   TimeSformer-HR: 16 frames x rate 16, 448^2 (78.0)
  --config configs/diving48/timesformer_b.py:l    TimeSformer-L:  96 frames x rate 4, 224^2 (81.0)
Diving-48: 48 classes, read with its corrected (V2) labels: Table 7's "**Due to an issue with Diving-48 labels
used in previously published results" (docs/data.md). The Kinetics recipe of kinetics400/timesformer_b.py
(Appendix A; the first author in the official repository's Diving-48 config discussion: "the Diving-48
configuration is essentially the same as Kinetics configurations ... All the other hyperparameters were the
same as for Kinetics") with 48 classes and Table 7's start, "All models are pre-trained on ImageNet-1K" (the
official code's default image model: common.IMAGENET1K). Sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import timesformer_b


def get_config(arg=None):
  c = timesformer_b.get_config(arg)
  c.init_from = common.imagenet1k_init('B', positional_embedding='separate_time_zero',
                                       temporal_attention='copy_spatial')
  return common.on_dataset(c, 48, 'diving48/train@64', 'diving48/test@16', 'test')
