"""vvt models: `build(config.model)` returns the Flax module of any scheme of ViViT, TimeSformer and X-ViT.

    module = vvt.models.build(cfg)                  # cfg = vvt.models.get_config(family=..., ...)
    variables = module.init(rngs, video, train=False)      # video (B, T, H, W, 3)
    logits = module.apply({'params': p}, video, train=True, rngs={'dropout': key})

The config functions import without Flax or JAX (config files and the CLI's checks stay fast); the modules
load on first use.
"""
from vvt.models.config import get_config, resolve, token_grid  # noqa: F401


def build(cfg, backend: str | None = None):
  """Validates `cfg` (a model ConfigDict; clear ValueError naming the field) and returns the flax module.

  backend: the platform the model will be compiled for ('cpu', 'gpu', 'tpu'; None: jax's default backend):
  model.attention_impl='auto' chooses per stage for it, and 'splash' (the Pallas TPU kernel) is a ValueError
  for any backend but 'tpu'. A deviceless TPU compile on a CPU host passes backend='tpu'.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from vvt.models.video_transformer import FactorisedEncoder, VideoTransformer  # pylint: disable=g-import-not-at-top
  cfg = resolve(cfg)
  backend = backend or jax.default_backend()
  if cfg.attention_impl == 'splash' and backend != 'tpu':
    raise ValueError(f"model.attention_impl='splash' is the Pallas TPU kernel: this model is built for backend "
                     f"{backend!r}; use 'auto', 'chunked' or 'dot_product'")
  if cfg.attention == 'factorised_encoder':
    return FactorisedEncoder(cfg, backend=backend)
  return VideoTransformer(cfg, backend=backend)


def __getattr__(name):
  if name in ('FactorisedEncoder', 'VideoTransformer'):
    from vvt.models import video_transformer  # pylint: disable=g-import-not-at-top
    return getattr(video_transformer, name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
