"""vvt models: `build(config.model)` returns the Flax module of any scheme of ViViT, TimeSformer, X-ViT and VideoPrism.

    module = vvt.models.build(cfg)                  # cfg = vvt.models.get_config(family=..., ...)
    variables = module.init(rngs, video, train=False)      # video (B, T, H, W, 3)
    logits = module.apply({'params': p}, video, train=True, rngs={'dropout': key})

The package's API is `build`, `get_config` and `resolve` (`vvt.models.config`: a model config checked, its
derived fields filled in); everything else is imported from its module. The config functions import without
Flax or JAX (config files and the CLI's checks stay fast); the modules load on first use.
"""
from vvt.models import schemes
from vvt.models.config import get_config, resolve  # noqa: F401  (the package's API, with `build`)


def build(cfg, backend: str | None = None):
  """Validates `cfg` (a model ConfigDict; clear ValueError naming the field) and returns the flax module.

  backend: the platform the model will be compiled for ('cpu', 'gpu', 'tpu'; None: jax's default backend):
  model.attention_impl='auto' chooses per stage for it, and 'splash' (the Pallas TPU kernel) is a ValueError
  for any backend but 'tpu'. A deviceless TPU compile on a CPU host passes backend='tpu'. The module gets the
  resolved config as explicit fields (`vvt.models.spec.ModelSpec`, its `spec`).
  """
  import jax  # pylint: disable=g-import-not-at-top
  from vvt.models import kernels, spec  # pylint: disable=g-import-not-at-top
  from vvt.models.video_transformer import (  # pylint: disable=g-import-not-at-top
      FactorisedEncoder, SpaceThenTime, VideoTransformer)
  cfg = resolve(cfg)
  backend = backend or jax.default_backend()
  kernels.check_backend(cfg.attention_impl, backend, field='model.attention_impl')
  model = spec.spec_of(cfg)
  scheme = schemes.get(cfg.attention)
  if scheme.temporal_over_positions:
    return SpaceThenTime(model, backend=backend)
  if scheme.two_encoders:
    return FactorisedEncoder(model, backend=backend)
  return VideoTransformer(model, backend=backend)
