"""Pixel normalisation, run on the device inside the jitted train/eval steps.

The input pipeline delivers clips as uint8 pixels (B, T, H, W, 3): a quarter
of the bytes of float32 to batch on the host and to copy to the accelerator,
where the normalisation is one fused multiply-add. `dataset.normalization`
names it:
  'imagenet':    (x / 255 - mean) / std with ImageNet's mean and std (timm,
                 TimeSformer, X-ViT);
  'zero_centre': x / 127.5 - 1, i.e. [-1, 1] (Scenic's ViViT, big_vision).
"""
import jax.numpy as jnp

from vvt.data import choices

IMAGENET_MEAN = (0.485 * 255, 0.456 * 255, 0.406 * 255)
IMAGENET_STD = (0.229 * 255, 0.224 * 255, 0.225 * 255)


def mean_std(mode):
  """((3,) mean, (3,) std) on the [0, 255] scale for `mode`."""
  if mode == 'imagenet':
    return IMAGENET_MEAN, IMAGENET_STD
  if mode == 'zero_centre':
    return (127.5,) * 3, (127.5,) * 3
  raise ValueError(f'dataset.normalization must be one of {choices.NORMALIZATIONS}, '
                   f'got {mode!r}')


def normalize(pixels, mode, dtype=jnp.float32):
  """uint8 (..., 3) pixels -> `dtype` normalised by `mode`.

  Floating-point inputs are returned unchanged (cast to `dtype`): they are
  taken as already normalised (e.g. features from another pipeline).
  """
  mean, std = mean_std(mode)
  if jnp.issubdtype(pixels.dtype, jnp.floating):
    return pixels.astype(dtype)
  scale = jnp.asarray([1.0 / s for s in std], jnp.float32)
  offset = jnp.asarray([-m / s for m, s in zip(mean, std, strict=True)], jnp.float32)
  return (pixels.astype(jnp.float32) * scale + offset).astype(dtype)
