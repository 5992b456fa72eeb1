"""Attention maps of a model on 48 x 40 frames: on its (n_t, 6, 5) token grid, and back on the frames' pixels."""
import jax
import numpy as np

from vvt.config import loader
from vvt.inspection import attention_maps as am
import vvt.models


def test_maps_of_a_48x40_model_are_on_its_grid_and_its_pixels():
  run = loader.load_run('configs/synthetic.py:divided', [
      ('num_classes', '4'), ('image_size', '(48,40)'), ('dataset.train_min_resize', '48'),
      ('dataset.train_max_resize', '56'), ('dataset.eval_resize', '48'), ('model.hidden_size', '16'),
      ('model.num_heads', '2'), ('model.mlp_dim', '16')], files=(), init=False)
  module = vvt.models.build(run.model)
  video = jax.random.normal(jax.random.key(1), (1, run.num_frames, 48, 40, 3))
  params = module.init(jax.random.key(0), video)['params']
  maps = am.attention_maps(params, video, run.model)
  assert maps.grid == (4, 6, 5) and maps.final.shape == (1, 4, 6, 5)
  np.testing.assert_allclose(maps.final.sum(), 1.0, atol=1e-4)  # a float32 distribution: 120 terms, ~1e-5 rounding
  pixels = am.upsample(maps.final[0], maps.tubelet_t, (48, 40))
  assert pixels.shape == (8, 48, 40)
  np.testing.assert_allclose(pixels.sum(), 1.0, atol=1e-4)  # the same mass, spread over the pixels
  mask = np.zeros((8, 48, 40), bool)
  mask[:, :8, 32:] = True  # the top-right patch of every frame
  tokens = am.token_mask(mask, maps.grid, maps.tubelet_t)
  assert tokens.shape == (4, 6, 5) and tokens.sum() == 4 and tokens[:, 0, 4].all()
