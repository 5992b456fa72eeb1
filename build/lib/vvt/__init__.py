"""vvt: video vision transformers (ViViT, TimeSformer, X-ViT) in JAX/Flax linen."""

__version__ = '0.1.0'
