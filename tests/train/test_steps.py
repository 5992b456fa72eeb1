"""The jitted train and eval steps normalise uint8 pixel batches on the device (the steps always run jitted;
op-by-op they took 30 s of the suite and tested nothing more)."""
import chex
import jax
import numpy as np
import train_helpers

from vvt.config import run_spec
from vvt.data.transforms import normalization
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import optimizers
from vvt.train import steps


class StepsTest(chex.TestCase):

  @chex.variants(with_jit=True)
  def test_steps_normalise_uint8_pixels_like_the_config_says(self):
    c = train_helpers.tiny_config('unused')  # the steps read no files
    c.optimizer.name = 'sgd'
    c.schedule.name = 'constant'
    c.schedule.warmup_steps = 0
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(4, 8, 32, 32, 3)).astype(np.uint8)
    batch = {'inputs': pixels, 'label': np.array([0, 1, 2, 3], np.int32),
             'mask': np.ones(4, np.float32)}
    run = run_spec.resolve(c)
    mesh = mesh_lib.make_mesh()
    sched = optimizers.make_schedule(run.schedule, 10, 10)
    tx = optimizers.make_optimizer(run.optimizer, sched)
    module = model_state.build_model(run.model)
    init = jax.jit(model_state.init_fn(module, model_state.ClipShape.of(run), tx))
    outs = {}
    for mode in ('zero_centre', 'imagenet'):
      c.dataset.normalization = mode
      run = run_spec.resolve(c)
      normalised = dict(batch, inputs=np.asarray(normalization.normalize(pixels, mode)))
      train_step = self.variant(steps.train_step_fn(module, tx, sched, steps.TrainSettings.of(run), mesh))
      eval_step = self.variant(steps.eval_step_fn(module, steps.EvalSettings.of(run)))
      for name, b in (('uint8', batch), ('float', normalised)):
        # one training step (the head starts at zero), then an evaluation
        state, _, status = train_step(init(jax.random.PRNGKey(0)),
                                      mesh_lib.global_batch(b, mesh, 4))
        scores, _ = eval_step(state.params, mesh_lib.global_batch(b, mesh, 4))
        outs[mode, name] = (scores[''], status['loss'])
      (scores_u8, loss_u8), (scores_f, loss_f) = outs[mode, 'uint8'], outs[mode, 'float']
      # normalised inside the step vs before it: the same values up to float32 rounding (> 10x margin)
      chex.assert_trees_all_close(scores_u8, scores_f, rtol=1e-4, atol=1e-6)
      chex.assert_trees_all_close(loss_u8, loss_f, rtol=1e-5, atol=0)
      assert np.abs(outs[mode, 'uint8'][0]).max() > 1e-4
    # the two normalisations give different logits: the mode is applied
    assert not np.allclose(outs['zero_centre', 'uint8'][0],
                           outs['imagenet', 'uint8'][0], rtol=1e-2, atol=1e-6)
