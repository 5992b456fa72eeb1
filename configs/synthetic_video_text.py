"""A tiny random-init video-text model (VideoPrism's shape) on the synthetic data: the CPU-sized video-text config.

  vvt summary --config configs/synthetic_video_text.py

The video tower is VideoPrism's in miniature (attention='space_then_time', 1-frame 8x8 patches, LayerNorm scales
offset from 1, attention scores capped at 50, one auxiliary layer before the attention pooler); the text tower
(`model.text`, vvt/models/text_config.py) is VideoPrism's text encoder in miniature: 2 layers of width 64, a
vocabulary of 256 tokens, texts of at most 16 tokens. ARG: `data_dir=DIR` (default data/synthetic). The model is
`vvt.models.build`'s `VideoTextModel` (vvt/models/video_text.py, docs/models.md). Its task is zero-shot
classification by the data's class names (`task.name='zero_shot'`; 'retrieval' with captions): a video-text model
has no classifier head, and a checkpoint converted with this config keeps it (`vvt eval` and `vvt features` of it
then need no task override).
"""
from configs import common
from vvt.config import schema
from vvt.models import text_config

# VideoPrism's video tower (transformers' VideoPrismVideoModel) in miniature.
VIDEO = dict(tubelet=(1, 8, 8), classifier='attentive', layer_norm_scale_offset=1.0, attention_logit_cap=50.0,
             gelu_approximate=False, positional_embedding='joint',
             attentive_pooler=dict(num_queries=1, depth=1, mlp_dim=128, head_dim=32, cross_attention='plain',
                                   per_dim_scale=True))
TEXT = dict(vocab_size=256, num_layers=2, max_length=16)


def get_config(arg=None):
  a = common.parse_arg(arg, data_dir=schema.SYNTHETIC_DIR)
  c = common.synthetic_config('space_then_time', a['data_dir'], **VIDEO, text=text_config.text_config(**TEXT))
  c.task.name = 'zero_shot'
  return c
