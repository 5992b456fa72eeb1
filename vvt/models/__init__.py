"""vvt models: `build(config.model)` returns the Flax module of any scheme of ViViT, TimeSformer and X-ViT.

    module = vvt.models.build(cfg)                  # cfg = vvt.models.get_config(family=..., ...)
    variables = module.init(rngs, video, train=False)      # video (B, T, H, W, 3)
    logits = module.apply({'params': p}, video, train=True, rngs={'dropout': key})

The config functions import without Flax or JAX (config files and the CLI's checks stay fast); the modules
load on first use.
"""
from vvt.models.config import get_config, resolve, token_grid  # noqa: F401


def build(cfg):
  """Validates `cfg` (a model ConfigDict; clear ValueError naming the field) and returns the flax module."""
  from vvt.models.video_transformer import FactorisedEncoder, VideoTransformer  # pylint: disable=g-import-not-at-top
  cfg = resolve(cfg)
  if cfg.attention == 'factorised_encoder':
    return FactorisedEncoder(cfg)
  return VideoTransformer(cfg)


def __getattr__(name):
  if name in ('FactorisedEncoder', 'VideoTransformer'):
    from vvt.models import video_transformer  # pylint: disable=g-import-not-at-top
    return getattr(video_transformer, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
