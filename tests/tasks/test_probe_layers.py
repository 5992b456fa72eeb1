"""The probe reads the backbone's named outputs: its tokens are the ones `vvt features --tokens` writes (an
attentive-classifier backbone too), and `task.probe.layers` takes layers inside the network, averaged or
concatenated (`task.probe.combine`), as `vvt features --layers` does; bad layers are one line each."""
import flax.linen as nn
import jax
import numpy as np
import pytest

from tests import specs
from tests.tasks.test_probe import _config
from vvt.inspection import features as features_lib
from vvt.tasks import probe as probe_lib
from vvt.tasks import registry


def _attentive_config(**probe):
  c = _config('attentive', **probe)
  c.model.classifier, c.model.num_layers = 'attentive', 2
  c.model.attentive_pooler.num_heads, c.model.attentive_pooler.mlp_dim = 2, 64
  return c


def _probe_inputs(module, params, video):
  """(pooled, tokens) the probes receive: the arguments of the module's ProbeGrid."""
  got = []

  def at_grid(next_fun, args, kwargs, context):
    if isinstance(context.module, probe_lib.ProbeGrid) and context.method_name == '__call__':
      got.append(args)
    return next_fun(*args, **kwargs)

  with nn.intercept_methods(at_grid):
    module.apply({'params': params}, video, train=False)
  return got[0]


@pytest.mark.parametrize('layers,combine,dim', [((), 'mean', 32), ((0, -1), 'mean', 32), ((1, 0), 'concat', 64)])
def test_the_probe_reads_the_tokens_vvt_features_writes(layers, combine, dim):
  c = _attentive_config(layers=layers, combine=combine)
  run = specs.run_spec(c)
  task = registry.task_of(run)
  module = task.build_model(run.model)
  video = jax.random.uniform(jax.random.PRNGKey(1), (2, 4, 16, 16, 3))
  params = module.init({'params': jax.random.PRNGKey(0)}, video, train=False)['params']
  params = jax.tree.map(lambda x: x + 0.1 * jax.random.normal(jax.random.PRNGKey(3), x.shape), params)
  pooled, tokens = _probe_inputs(module, params, video)
  step = features_lib.features_step_fn(module, 'imagenet', tokens=True, layers=layers, combine=combine)
  written, _ = jax.jit(step)(params, {'inputs': video})
  assert written['tokens'].ndim == 4 and written['tokens'].shape[-1] == dim == tokens.shape[-1]
  np.testing.assert_allclose(tokens, written['tokens'].reshape(2, -1, dim), rtol=1e-5, atol=1e-5)
  if layers:  # the linear probe's features: the layers' tokens' mean, the embedding vvt features writes
    np.testing.assert_allclose(pooled, written['embedding'], rtol=1e-5, atol=1e-5)
  else:  # an attentive-classifier backbone: the mean of its tokens (its pooler is its classifier's)
    np.testing.assert_allclose(pooled, tokens.mean(axis=1), rtol=1e-5, atol=1e-5)
  logits = task.outputs(module, params, video, train=False)
  assert set(logits) == set(task.names) and all(v.shape == (2, 3) for v in logits.values())


def test_bad_layers_are_one_line_each():
  c = _config(layers=(0, 2, -3, 'x'), combine='sum')
  assert registry.check_options(c) == [
      "task.probe.combine must be one of 'mean', 'concat', got 'sum'",
      "task.probe.layers[1] must be a layer of the model's 1 (0 ... 0, or -1 ... -1), got 2",
      "task.probe.layers[2] must be a layer of the model's 1 (0 ... 0, or -1 ... -1), got -3",
      "task.probe.layers[3] must be a layer index (an int), got 'x'"]
