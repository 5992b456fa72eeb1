"""Params for tests whose values do not matter: drawn with numpy in the shapes and dtypes of the model's init,
which `jax.eval_shape` traces without compiling (a compiled init is pure cost when its values are overwritten)."""
import jax
import numpy as np


def numpy_params(shapes, seed=1):
  """0.3 N(0, 1) everywhere (no branch, e.g. a zero-init head, cls or time embedding, is a no-op) in the shapes and
  dtypes of `shapes`, a tree of ShapeDtypeStructs or arrays."""
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda s: (0.3 * rng.standard_normal(s.shape)).astype(s.dtype), shapes)


def random_params(module, x, seed=1, **kwargs):
  """`numpy_params` in the shapes of `module.init(key, x, **kwargs)['params']`; x an array or ShapeDtypeStruct
  of the input, e.g. (B, T, H, W, 3)."""
  shapes = jax.eval_shape(lambda v: module.init(jax.random.key(0), v, **kwargs), x)['params']
  return numpy_params(shapes, seed)
