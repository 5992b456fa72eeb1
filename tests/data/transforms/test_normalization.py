"""Normalisation of uint8 pixels on the device."""
import jax.numpy as jnp
import numpy as np
import pytest

from vvt.data.transforms import normalization


def test_zero_centre_and_imagenet():
  px = jnp.asarray([[0, 127, 255]], jnp.uint8).reshape(1, 1, 3)
  out = normalization.normalize(jnp.broadcast_to(px, (2, 1, 3)), 'zero_centre')
  assert out.dtype == jnp.float32
  np.testing.assert_allclose(out[0, 0], [-1.0, 127 / 127.5 - 1, 1.0], atol=1e-6)
  mean = np.round(np.array(normalization.IMAGENET_MEAN)).astype(np.uint8)
  imnet = normalization.normalize(jnp.asarray(mean)[None], 'imagenet')
  np.testing.assert_allclose(imnet, 0.0, atol=0.01)
  one = normalization.normalize(jnp.full((1, 3), 255, jnp.uint8), 'imagenet')
  np.testing.assert_allclose(
      one[0], [(1 - m) / s for m, s in
               zip((0.485, 0.456, 0.406), (0.229, 0.224, 0.225), strict=True)], rtol=1e-5)
  half = normalization.normalize(jnp.zeros((1, 3), jnp.uint8), 'zero_centre',
                                 jnp.bfloat16)
  assert half.dtype == jnp.bfloat16


def test_float_inputs_pass_through_and_bad_names_fail():
  x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 3)), jnp.float32)
  np.testing.assert_array_equal(normalization.normalize(x, 'imagenet'), x)
  with pytest.raises(ValueError, match='dataset.normalization'):
    normalization.normalize(x, 'unit')
