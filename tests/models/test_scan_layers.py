"""model.scan_layers, model.remat policies and model.param_dtype: the same function in every layout, and the
params converter between the per-layer and stacked layouts (vvt.models.layout)."""
import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models.params import numpy_params
from tests.models.params import random_params
from tests.models.test_attention_impl import assert_close
from tests.models.test_attention_impl import loss_and_grads
from tests.models.test_models import tiny
from tests.models.test_models import video
import vvt.models as models
from vvt.models import config as config_lib
from vvt.models import layout

SCANNED = [  # (family, attention, overrides): one encoder + cls, two encoders (Model 2), X-ViT's TA head
    ('vivit', 'spatiotemporal', dict(stochastic_depth=0.2)),
    ('vivit', 'factorised_encoder', {}),
    ('xvit', 'space_time_mixing', dict(mixing=dict(summary_token=True))),
]


@pytest.mark.parametrize('case,remat', [(SCANNED[0], 'none'), (SCANNED[0], 'full'),
                                        (SCANNED[0], 'dots_with_no_batch_dims_saveable'),
                                        (SCANNED[1], 'full'), (SCANNED[2], 'dots_saveable')])
def test_scan_gives_the_unrolled_logits_and_gradients(case, remat):
  family, attention, kw = case
  x, w = video(b=2), jax.random.normal(jax.random.key(5), (2, 3))
  plain = models.build(tiny(family, attention, num_layers=3, **kw))
  scanned = models.build(tiny(family, attention, num_layers=3, scan_layers=True, remat=remat, **kw))
  params = random_params(plain, x)
  stacked = layout.to_model_layout(params, scanned.spec)
  assert jax.tree.structure(stacked) == jax.tree.structure(
      jax.eval_shape(scanned.init, jax.random.key(0), x)['params'])
  out, grads = loss_and_grads(plain, params, x, w)
  out_s, grads_s = loss_and_grads(scanned, stacked, x, w)
  assert_close(out_s, out)
  assert_close(layout.to_per_layer(grads_s), grads)


def test_scanned_train_mode_uses_dropout_and_stochastic_depth():
  x = video(b=2)
  module = models.build(tiny('timesformer', 'divided', scan_layers=True, dropout_rate=0.1, stochastic_depth=0.5))
  params = random_params(module, x)
  run = jax.jit(lambda p, key: module.apply({'params': p}, x, train=True, rngs={'dropout': key}))
  assert float(jnp.abs(run(params, jax.random.key(1)) - run(params, jax.random.key(2))).max()) > 1e-4


def test_layout_round_trip_abstract_leaves_and_optimizer_states():
  x = video(b=1)
  module = models.build(tiny('vivit', 'factorised_encoder', num_layers=3, temporal_layers=2))
  params = random_params(module, x)
  assert layout.layout_of(params) == 'per_layer'
  stacked = layout.to_stacked(params)
  assert layout.layout_of(stacked) == 'stacked'
  assert stacked['spatial_encoder']['layers']['blocks']['block']['mlp']['Dense_0']['kernel'].shape == (3, 32, 64)
  assert stacked['temporal_encoder']['layers']['blocks']['block']['mlp']['Dense_0']['kernel'].shape == (2, 32, 64)
  back = layout.to_per_layer(stacked)
  assert jax.tree.structure(back) == jax.tree.structure(params)
  for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(params), strict=True):
    np.testing.assert_array_equal(a, b)
  assert jax.tree.structure(layout.to_stacked(stacked)) == jax.tree.structure(stacked)  # idempotent
  cfg = tiny('vivit', 'factorised_encoder', scan_layers=True)
  assert jax.tree.structure(layout.to_model_layout(back, cfg)) == jax.tree.structure(stacked)
  abstract = layout.to_stacked(jax.eval_shape(lambda: params))
  assert abstract['spatial_encoder']['layers']['blocks']['block']['mlp']['Dense_0']['kernel'].shape == (3, 32, 64)
  State = collections.namedtuple('State', 'count mu')  # an optax-like state mirroring the params
  state = layout.to_stacked(State(jnp.zeros([]), params))
  assert isinstance(state, State) and layout.layout_of(state.mu) == 'stacked'


def test_abstract_leaves_keep_their_shardings_with_the_layer_axis_unsharded():
  """A restore target converted between layouts: the stacked leaf's spec is the layer's with None in front."""
  mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]).reshape(1, 1), ('fsdp', 'model'))
  spec = lambda *s: jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*s))
  per_layer = {'encoder': {f'block_{i}': {'kernel': jax.ShapeDtypeStruct((4, 8), jnp.float32,
                                                                        sharding=spec('fsdp', 'model')),
                                          'bias': jax.ShapeDtypeStruct((8,), jnp.float32, sharding=spec())}
                           for i in range(3)}}
  stacked = layout.to_stacked(per_layer)['encoder']['blocks']['block']
  assert stacked['kernel'].shape == (3, 4, 8)
  assert stacked['kernel'].sharding.spec == jax.sharding.PartitionSpec(None, 'fsdp', 'model')
  assert stacked['bias'].sharding.spec == jax.sharding.PartitionSpec(None)
  back = layout.to_per_layer(layout.to_stacked(per_layer))
  assert back == per_layer


def test_remat_policy_names_exist_and_bools_still_work():
  for name in config_lib.REMAT_POLICIES[2:]:
    assert callable(getattr(jax.checkpoint_policies, name)), name
  assert models.resolve(tiny('vivit', 'spatiotemporal', remat=True)).remat == 'full'
  assert models.resolve(tiny('vivit', 'spatiotemporal', remat=False)).remat == 'none'
  cfg = tiny('vivit', 'spatiotemporal')
  cfg.remat = True  # an existing config file's assignment on the policy-string field
  assert models.resolve(cfg).remat == 'full'
  cfg.remat = 'dots_saveable'
  assert models.resolve(cfg).remat == 'dots_saveable'


@pytest.mark.parametrize('field,value,message', [
    ('remat', 'dots_savable', r"^model.remat must be True, False or one of .*did you mean 'dots_saveable'"),
    ('scan_layers', 'yes', r'^model.scan_layers must be True or False'),
    ('param_dtype', 'float16', r"^model.param_dtype must be 'float32' or 'bfloat16'"),
])
def test_bad_values_are_one_line_errors(field, value, message):
  with pytest.raises(ValueError, match=message):
    models.resolve(tiny('vivit', 'spatiotemporal', **{field: value}))


def test_param_dtype_bfloat16():
  x = video(b=2)
  module = models.build(tiny('xvit', 'space_time_mixing', param_dtype='bfloat16', dtype='bfloat16'))
  shapes = jax.eval_shape(module.init, jax.random.key(0), x)['params']  # init's dtypes, traced, not compiled
  assert {a.dtype for a in jax.tree.leaves(shapes)} == {jnp.dtype(jnp.bfloat16)}
  params = numpy_params(shapes)
  out = jax.jit(lambda p: module.apply({'params': p}, x))(params)
  assert out.dtype == jnp.float32 and np.all(np.isfinite(out))
