"""vvt models: `build(config.model)` returns the Flax module of any scheme of ViViT, TimeSformer and X-ViT.

    module = vvt.models.build(cfg)                  # cfg = vvt.models.get_config(family=..., ...)
    variables = module.init(rngs, video, train=False)      # video (B, T, H, W, 3)
    logits = module.apply({'params': p}, video, train=True, rngs={'dropout': key})
"""
from vvt.models.config import get_config, resolve, token_grid  # noqa: F401
from vvt.models.video_transformer import FactorisedEncoder, VideoTransformer


def build(cfg):
  """Validates `cfg` (a model ConfigDict; clear ValueError naming the field) and returns the flax module."""
  cfg = resolve(cfg)
  if cfg.attention == 'factorised_encoder':
    return FactorisedEncoder(cfg)
  return VideoTransformer(cfg)
