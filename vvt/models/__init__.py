"""vvt models: `build(config.model)` returns the Flax module of any scheme of ViViT, TimeSformer, X-ViT and VideoPrism.

    module = vvt.models.build(cfg)                  # cfg = vvt.models.get_config(family=..., ...), or a ModelSpec
    variables = module.init(rngs, video, train=False)      # video (B, T, H, W, 3)
    logits = module.apply({'params': p}, video, train=True, rngs={'dropout': key})
    out = module.apply({'params': p}, video, outputs=('pooled', 'block3'))   # named outputs: vvt/models/outputs.py

A model with a text tower (`model.text`, vvt/models/text_config.py) is a video-text model: `build` returns its
`VideoTextModel` (vvt/models/video_text.py: encode_video, encode_text, similarity); family 'pe_video' its
`PeVideoText` (vvt/models/pe_video_text.py), with the same methods.

The package's API is `build`, `get_config` and `resolve` (`vvt.models.config`: a model config checked, its
derived fields filled in); everything else is imported from its module. The config functions import without
Flax or JAX (config files and the CLI's checks stay fast); the modules load on first use.
"""
from vvt.models import schemes
from vvt.models.config import get_config  # noqa: F401  (the package's API, with `build`)
from vvt.models.config import resolve  # noqa: F401  (the package's API, with `build`)


def build(model, backend: str | None = None):
  """The flax module of `model`: a `vvt.models.spec.ModelSpec` (a resolved model, as a run's specs hold it), or a
  model ConfigDict, resolved here (clear ValueError naming the field).

  backend: the platform the model will be compiled for ('cpu', 'gpu', 'tpu'; None: jax's default backend):
  model.attention_impl='auto' chooses per stage for it, and 'splash' (the Pallas TPU kernel) is a ValueError
  for any backend but 'tpu'. A deviceless TPU compile on a CPU host passes backend='tpu'. The module gets the
  resolved model as explicit fields (`ModelSpec`, its `spec`).
  """
  import jax

  from vvt.models import kernels
  from vvt.models import spec
  from vvt.models.video_transformer import FactorisedEncoder
  from vvt.models.video_transformer import SpaceThenTime
  from vvt.models.video_transformer import VideoTransformer
  if not isinstance(model, spec.ModelSpec):
    model = spec.spec_of(resolve(model))
  backend = backend or jax.default_backend()
  kernels.check_backend(model.attention_impl, backend, field='model.attention_impl')
  if model.pe_video is not None:  # Perception Encoder video (vvt/models/pe_video_text.py): the same interface
    from vvt.models.pe_video_text import PeVideoText
    return PeVideoText(model.pe_video.temporal, model.pe_video.text, model.pe_video.frame, model.text.max_length)
  if model.text is not None:  # a video-text model (vvt/models/video_text.py)
    from vvt.models.video_text import VideoTextModel
    return VideoTextModel(model, backend=backend)
  scheme = schemes.get(model.attention)
  if scheme.temporal_over_positions:
    return SpaceThenTime(model, backend=backend)
  if scheme.two_encoders:
    return FactorisedEncoder(model, backend=backend)
  return VideoTransformer(model, backend=backend)
