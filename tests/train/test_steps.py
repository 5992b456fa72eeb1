"""The jitted steps normalise uint8 pixel batches on the device."""
import jax
import numpy as np

from vvt.data import normalization
from vvt.train import mesh as mesh_lib, optimizers, steps, trainer

import train_helpers


def test_steps_normalise_uint8_pixels_like_the_config_says(tiny_data):
  c = train_helpers.tiny_config(tiny_data)
  c.optimizer.name = 'sgd'
  c.schedule.name = 'constant'
  c.schedule.warmup_steps = 0
  rng = np.random.default_rng(0)
  pixels = rng.integers(0, 256, size=(4, 8, 32, 32, 3)).astype(np.uint8)
  batch = {'inputs': pixels, 'label': np.array([0, 1, 2, 3], np.int32),
           'mask': np.ones(4, np.float32)}
  mesh = mesh_lib.make_mesh()
  sched = optimizers.make_schedule(c.schedule, 10, 10)
  tx = optimizers.make_optimizer(c.optimizer, sched)
  module, init_fn, _ = trainer.build_model_and_init(c, mesh, tx)
  outs = {}
  for mode in ('zero_centre', 'imagenet'):
    c.dataset.normalization = mode
    normalised = dict(batch, inputs=np.asarray(
        normalization.normalize(pixels, mode)))
    for name, b in (('uint8', batch), ('float', normalised)):
      # one training step (the head starts at zero), then an evaluation
      state = jax.jit(init_fn)(jax.random.PRNGKey(0))
      train_step = steps.make_train_step(module, tx, sched, c, mesh)
      state, _, status = train_step(state, mesh_lib.global_batch(b, mesh, 4))
      eval_step = steps.make_eval_step(module, c, mesh)
      scores, _ = eval_step(state.params, mesh_lib.global_batch(b, mesh, 4))
      outs[mode, name] = (np.asarray(scores['']), float(status['loss']))
    np.testing.assert_allclose(outs[mode, 'uint8'][0], outs[mode, 'float'][0],
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(outs[mode, 'uint8'][1], outs[mode, 'float'][1],
                               rtol=1e-5)
    assert np.abs(outs[mode, 'uint8'][0]).max() > 1e-4
  # the two normalisations give different logits: the mode is applied
  assert not np.allclose(outs['zero_centre', 'uint8'][0],
                         outs['imagenet', 'uint8'][0], rtol=1e-2, atol=1e-6)
