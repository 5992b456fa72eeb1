"""Every scheme builds and runs; batching, dtypes, heads, regularisation and remat behave."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models.params import random_params
import vvt.models as models

SCHEMES = [
    ('vivit', 'spatiotemporal', {}),
    ('vivit', 'factorised_encoder', {}),
    ('vivit', 'factorised_encoder', dict(classifier='gap')),
    ('vivit', 'factorised_self_attention', dict(classifier='gap')),
    ('vivit', 'factorised_self_attention', dict(classifier='gap', attention_order='time_space')),
    ('vivit', 'factorised_dot_product', dict(classifier='gap')),
    ('timesformer', 'space', {}),
    ('timesformer', 'joint', {}),
    ('timesformer', 'divided', {}),
    ('timesformer', 'local_global', {}),
    ('timesformer', 'axial', {}),
    ('xvit', 'space_time_mixing', {}),
    ('xvit', 'space_time_mixing', dict(frame_aggregation='mean')),
    ('xvit', 'space_time_mixing', dict(mixing=dict(window=1, shift_div=4, summary_token=True))),
    ('xvit', 'space_time_mixing', dict(mixing=dict(num_segments=2, summary_token=True), time_embedding_rows=2)),
    ('vivit', 'divided', dict(tubelet=(2, 8, 8), positional_embedding='sinusoidal')),
]


def tiny(family, attention, **kw):
  base = dict(attention=attention, variant='Ti/8', num_frames=4, image_size=16, num_classes=3, num_layers=2,
              hidden_size=32, num_heads=4, mlp_dim=64, temporal_layers=1)
  if family == 'vivit' and 'tubelet' not in kw:
    base['tubelet'] = (2, 8, 8)
  base.update(kw)
  return models.get_config(family, **base)


def jitted(module):
  """`module.apply` compiled once per shape: eager flax runs op by op and is far slower to test (params come from
  `tests/models/params.py`, no init is compiled)."""
  return jax.jit(lambda p, x, key=None, train=False: module.apply(
      {'params': p}, x, train=train, rngs=None if key is None else {'dropout': key}), static_argnames='train')


def video(b=3, t=4, s=16, seed=0):
  return jax.random.normal(jax.random.key(seed), (b, t, s, s, 3))


@pytest.mark.parametrize('family,attention,kw', SCHEMES)
def test_scheme_runs_and_batch_equals_per_example(family, attention, kw):
  module = models.build(tiny(family, attention, **kw))
  apply = jitted(module)
  x = video()
  params = random_params(module, x)
  out = apply(params, x)
  assert out.shape == (3, 3) and out.dtype == jnp.float32
  assert np.all(np.isfinite(out))
  single = jnp.concatenate([apply(params, x[i:i + 1]) for i in range(3)])
  # a batch of 3 vs 3 batches of 1: other sums, float32 rounding only (measured > 10x below the tolerance)
  np.testing.assert_allclose(out, single, atol=1e-5, rtol=1e-5)
  assert np.abs(out[0] - out[1]).max() > 1e-3  # inputs matter


@pytest.mark.parametrize('family,attention,kw', SCHEMES[:1] + SCHEMES[8:9] + SCHEMES[11:12])
def test_bfloat16_within_tolerance_of_float32(family, attention, kw):
  """bf16 compute (params float32) stays within 5% of the logit range of float32."""
  cfg32 = tiny(family, attention, **kw)
  cfg16 = tiny(family, attention, dtype='bfloat16', **kw)
  x = video()
  module32 = models.build(cfg32)
  apply32 = jitted(module32)
  params = random_params(module32, x)
  out32 = apply32(params, x)
  out16 = jitted(models.build(cfg16))(params, x)
  assert out16.dtype == jnp.float32
  scale = float(jnp.abs(out32).max())
  assert float(jnp.abs(out32 - out16).max()) < 0.05 * scale
  assert float(jnp.abs(out32 - out16).max()) > 0  # bf16 really ran


def test_dict_heads_for_epic_kitchens():
  cfg = tiny('vivit', 'factorised_encoder', num_classes={'verb': 97, 'noun': 300})
  module = models.build(cfg)
  out = jitted(module)(random_params(module, video()), video())
  assert set(out) == {'verb', 'noun'} and out['verb'].shape == (3, 97) and out['noun'].shape == (3, 300)


def test_train_mode_uses_dropout_and_stochastic_depth_rngs():
  cfg = tiny('timesformer', 'divided', dropout_rate=0.1, stochastic_depth=0.5)
  module = models.build(cfg)
  apply = jitted(module)
  x = video()
  params = random_params(module, x)
  eval_a = apply(params, x)
  eval_b = apply(params, x, jax.random.key(1), train=False)
  np.testing.assert_array_equal(eval_a, eval_b)
  tr_a = apply(params, x, jax.random.key(1), train=True)
  tr_b = apply(params, x, jax.random.key(2), train=True)
  assert float(jnp.abs(tr_a - tr_b).max()) > 1e-4
  assert float(jnp.abs(tr_a - eval_a).max()) > 1e-4


def test_remat_gives_identical_outputs_and_gradients():
  x = video()
  plain, remat = (models.build(tiny('timesformer', 'divided', remat=r)) for r in (False, True))
  params = random_params(plain, x)
  loss = lambda m: jax.jit(jax.grad(lambda p: jnp.sum(m.apply({'params': p}, x) ** 2)))(params)
  for a, b in zip(jax.tree.leaves(loss(plain)), jax.tree.leaves(loss(remat)), strict=True):
    np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-5)


def test_factorised_encoder_without_temporal_layers_is_the_average_pool_baseline():
  cfg = tiny('vivit', 'factorised_encoder', temporal_layers=0, classifier='gap')
  module = models.build(cfg)
  apply = jitted(module)
  x = video()
  params = random_params(module, x)
  assert 'temporal_encoder' not in params
  # Averaging over time makes the output invariant to the order of the tubelets.
  swapped = jnp.concatenate([x[:, 2:], x[:, :2]], axis=1)
  np.testing.assert_allclose(apply(params, x), apply(params, swapped), atol=1e-5)


def test_space_only_is_blind_to_frame_order_and_divided_is_not():
  x = video()
  reverse = x[:, ::-1]
  for attention, pos, blind in (('space', 'spatial', True), ('divided', 'separable', False)):
    cfg = tiny('timesformer', attention, positional_embedding=pos)
    module = models.build(cfg)
    apply = jitted(module)
    params = random_params(module, x)
    diff = float(jnp.abs(apply(params, x) - apply(params, reverse)).max())
    assert (diff < 1e-5) == blind, (attention, diff)


def test_shorter_time_table_is_used_periodically():
  """time_embedding_rows=R < T: temporal index t gets row t mod R (official X-ViT), i.e. exactly the model with a
  T-row table holding the R rows T/R times; any other T-row table (here: the rows interpolated) differs."""
  short = models.build(tiny('xvit', 'space_time_mixing', time_embedding_rows=2))
  full = models.build(tiny('xvit', 'space_time_mixing'))
  x = video()
  params = random_params(short, x)
  table = params['encoder']['posembed']['time_embedding']
  assert table.shape == (1, 2, 32)
  tiled = jax.tree.map(lambda a: a, params)
  tiled['encoder']['posembed']['time_embedding'] = jnp.tile(table, (1, 2, 1))
  out = short.apply({'params': params}, x)
  np.testing.assert_allclose(out, full.apply({'params': tiled}, x), atol=1e-6)
  tiled['encoder']['posembed']['time_embedding'] = jnp.repeat(table, 2, axis=1)  # rows 0,0,1,1: not periodic
  assert np.abs(out - full.apply({'params': tiled}, x)).max() > 1e-3
