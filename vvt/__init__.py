"""vvt: video vision transformers (ViViT, TimeSformer, X-ViT) in JAX/Flax linen.

Importing vvt on a host that has libtpu installed (the `tpu` or `test` extra) but no TPU sets JAX_PLATFORMS=cpu
before JAX starts (`cpu_without_tpu`): JAX would otherwise probe for a TPU, and libtpu print its warnings and an
`E0000 ... INVALID_ARGUMENT` line, on the first computation. A JAX_PLATFORMS already set, a TPU device file, a
GPU plugin (jax[cuda12], ...) or JAX imported before vvt leave everything as it is.
"""
import glob
import importlib.util
import os
import sys

__version__ = '0.1.0'


def cpu_without_tpu() -> bool:
  """Sets JAX_PLATFORMS=cpu where libtpu is installed, no TPU is present and JAX has not started; returns whether
  it did. `vvt memory` still compiles for TPU topologies: libtpu's deviceless compiler needs no TPU backend."""
  if 'JAX_PLATFORMS' in os.environ or 'jax' in sys.modules or importlib.util.find_spec('libtpu') is None:
    return False
  if glob.glob('/dev/accel[0-9]*') or glob.glob('/dev/vfio/[0-9]*'):  # a TPU VM (v4: accel, v5e and later: vfio)
    return False
  if importlib.util.find_spec('jax_plugins') is not None:  # a GPU plugin (jax[cuda12], ...) is installed
    return False
  os.environ['JAX_PLATFORMS'] = 'cpu'
  return True


cpu_without_tpu()
