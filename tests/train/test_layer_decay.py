"""Layer-wise learning-rate decay: each layer's update relative to plain AdamW, per layer and scanned; the layer
ids of every scheme's block layout (the factorised encoder's spatial-then-temporal numbering)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests import specs
import vvt.models
from vvt.models import schemes
from vvt.train import layer_decay
from vvt.train import optimizers

DECAY = 0.5


def _model_cfg(family, attention, scan, num_layers=3, **kw):
  scheme = schemes.get(attention)
  return vvt.models.get_config(family=family, attention=attention, variant='Ti/16', num_frames=4, image_size=16,
                               num_classes=3, hidden_size=16, num_layers=num_layers, num_heads=2, mlp_dim=32,
                               tubelet=(2, 8, 8), scan_layers=scan,
                               classifier='token' if scheme.class_token else 'gap', **kw)


def _params(cfg, abstract=False):
  module = vvt.models.build(cfg)
  init = lambda: module.init({'params': jax.random.PRNGKey(0)}, jnp.zeros((1, 4, 16, 16, 3)), train=False)
  return (jax.eval_shape(init) if abstract else jax.jit(init)())['params']


def _flat(tree):
  return {'/'.join(str(getattr(k, 'key', k)) for k in p): x for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _optimizer(**kw):
  schedule = optimizers.make_schedule(specs.schedule_spec(name='constant', base_lr=1e-2), 10, 10)
  return optimizers.make_optimizer(specs.optimizer_spec(name='adamw', weight_decay=0.05, **kw), schedule)


@pytest.mark.parametrize('scan', [False, True], ids=['per_layer', 'scan_layers'])
def test_each_layers_update_is_plain_adamws_times_its_power_of_the_decay(scan):
  """Same params and gradients, two steps: embedding x decay^(L+1), block l of L (1..L) x decay^(L+1-l), the final
  norm and head x 1, against plain AdamW (its step and its masked decoupled weight decay alike)."""
  L = 3
  params = _params(_model_cfg('timesformer', 'divided', scan, num_layers=L))
  rng = np.random.default_rng(0)
  grads = [jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), jnp.float32), params) for _ in range(2)]
  updates = {}
  for name, tx in (('plain', _optimizer()), ('decayed', _optimizer(layer_decay=DECAY))):
    def two_steps(params, grads, tx=tx):  # the same params at both: the moments and the decay see the same
      state = tx.init(params)
      for g in grads:
        u, state = tx.update(g, state, params)
      return u
    updates[name] = _flat(jax.jit(two_steps)(params, grads))
  plain, decayed = updates['plain'], updates['decayed']
  checked = 0
  for name, u in plain.items():
    if name.startswith('embedding') or name in ('encoder/cls',) or name.startswith('encoder/posembed'):
      expected = DECAY ** (L + 1)
    elif '/layers/' in name and scan:  # (L, ...): slice j is block l = j + 1
      expected = (DECAY ** (L - np.arange(L))).reshape((L,) + (1,) * (u.ndim - 1))
    elif '/layers/block_' in name:
      j = int(name.split('/layers/block_')[1].split('/')[0])
      expected = DECAY ** (L - j)
    else:
      assert name.startswith(('head/', 'encoder/encoder_norm/')), name
      expected = 1.0
    np.testing.assert_allclose(decayed[name], u * expected, rtol=2e-5, atol=1e-9, err_msg=name)
    checked += 1
  assert checked == len(decayed)
  kernel = 'encoder/layers/blocks/block/mlp/Dense_0/kernel' if scan else 'encoder/layers/block_0/mlp/Dense_0/kernel'
  assert np.abs(plain[kernel]).max() > 0  # a real update, not 0 = 0


def _ids(params):
  return {k: (np.asarray(v).tolist()) for k, v in _flat(layer_decay.layer_ids(params)).items()}


@pytest.mark.parametrize('attention', [s for s in schemes.SCHEMES if not schemes.get(s).two_encoders])
@pytest.mark.parametrize('scan', [False, True], ids=['per_layer', 'scan_layers'])
def test_layer_ids_of_every_single_encoder_scheme(attention, scan):
  family = schemes.get(attention).families[0]
  params = _params(_model_cfg(family, attention, scan, num_layers=2), abstract=True)
  ids = _ids(params)
  for name, i in ids.items():
    if name.startswith('embedding/') or name == 'encoder/cls' or name.startswith('encoder/posembed/'):
      assert i == 0, name
    elif name.startswith('encoder/layers/'):
      assert i == ([1, 2] if scan else int(name.split('block_')[1].split('/')[0]) + 1), name
    else:
      assert name.startswith(('head/', 'encoder/encoder_norm/', 'temporal_head/')), name
      assert i == 3, name
  assert layer_decay.num_layers(params) == 2


@pytest.mark.parametrize('attention', ['factorised_encoder', 'space_then_time'])
@pytest.mark.parametrize('scan', [False, True], ids=['per_layer', 'scan_layers'])
def test_factorised_encoder_numbers_spatial_then_temporal_blocks(scan, attention):
  """ViViT Model 2 and VideoPrism: L = L_s + L_t = 2 + 3; the spatial final norm and the temporal encoder's own
  inputs (class token, position table) are layer L_s; the temporal final norm and the head L + 1."""
  params = _params(_model_cfg('vivit', attention, scan, num_layers=2, temporal_layers=3), abstract=True)
  ids = _ids(params)
  assert layer_decay.encoder_depths(params) == [('spatial_encoder', 2), ('temporal_encoder', 3)]
  for name, i in ids.items():
    part = name.split('/')
    if part[0] == 'embedding' or part[0] == 'spatial_encoder' and part[1] in ('cls', 'posembed'):
      want = 0
    elif part[0] == 'spatial_encoder' and part[1] == 'layers':
      want = [1, 2] if scan else int(part[2][len('block_'):]) + 1
    elif part[0] == 'temporal_encoder' and part[1] == 'layers':
      want = [3, 4, 5] if scan else int(part[2][len('block_'):]) + 3
    elif part[0] == 'spatial_encoder' and part[1] == 'encoder_norm' or part[0] == 'temporal_encoder' and part[1] in (
        'cls', 'posembed'):
      want = 2
    else:
      assert part[0] == 'head' or name.startswith('temporal_encoder/encoder_norm/'), name
      want = 6
    assert i == want, (name, i, want)
  scales = _flat(layer_decay.lr_scales(params, DECAY))
  np.testing.assert_allclose(scales['embedding/conv/kernel'], DECAY ** 6)
  np.testing.assert_allclose(scales['head/output_projection/kernel'], 1.0)


def test_layer_decay_one_leaves_the_optimiser_as_it_was():
  """layer_decay = 1 (the default) adds nothing: the optimiser state has the structure of old checkpoints."""
  params = _params(_model_cfg('timesformer', 'divided', False), abstract=True)
  plain = jax.eval_shape(_optimizer().init, params)
  one = jax.eval_shape(_optimizer(layer_decay=1.0).init, params)
  assert jax.tree.structure(plain) == jax.tree.structure(one)
