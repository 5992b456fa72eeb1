"""Named model outputs (vvt/models/outputs.py): the logits as before, bit for bit, and on request the tokens after
any block, the final-normed tokens and the pooled representation the head reads, in every family and with
scanned layers; nothing kept when nothing is asked."""
import jax
import numpy as np
import pytest

from tests.models.params import random_params
from tests.models.test_attention_impl import assert_close
from tests.models.test_models import tiny
from tests.models.test_models import video
from vvt.convert import weight_files
import vvt.models as models
from vvt.models import layout
from vvt.models import outputs

FAMILIES = [  # (family, attention, overrides, blocks): every way to the head's input, one encoder or two
    ('vivit', 'spatiotemporal', {}, 2),
    ('vivit', 'factorised_encoder', dict(classifier='gap'), 3),
    ('vivit', 'space_then_time', dict(classifier='attentive', tubelet=(1, 8, 8)), 3),
    ('timesformer', 'divided', dict(classifier='attentive'), 2),
    ('xvit', 'space_time_mixing', {}, 2),
]


def _model(family, attention, kw, **more):
  module = models.build(tiny(family, attention, **kw, **more))
  x = video(b=2)
  return module, random_params(module, x), x


def _apply(module, params, x, names=None):
  return jax.jit(lambda p, v: module.apply({'params': p}, v, outputs=names))(params, x)


@pytest.mark.parametrize('family,attention,kw,count', FAMILIES)
def test_outputs_beside_the_unchanged_logits(family, attention, kw, count):
  """The logits asked for by name are the default call's (another program: to float32 rounding); the params'
  tree is the same whatever is asked; 'encoded<i>' is block i through its encoder's final norm, the last one
  'encoded'; 'pooled' through a linear head gives the logits."""
  module, params, x = _model(family, attention, kw)
  assert outputs.num_layers(module.spec) == count
  names = ('logits', 'pooled', 'encoded', 'block0', 'block-1', 'encoded-1', 'encoded0')
  got = _apply(module, params, x, names)
  plain = np.asarray(_apply(module, params, x))
  np.testing.assert_allclose(np.asarray(got['logits']), plain, rtol=0, atol=1e-5 * np.abs(plain).max())
  with_outputs = jax.eval_shape(lambda v: module.init(jax.random.key(0), v, outputs=names), x)['params']
  shapes = lambda tree: weight_files.flatten(jax.tree.map(np.shape, tree))
  assert shapes(with_outputs) == shapes(params)
  b, d = 2, module.spec.hidden_size
  assert got['pooled'].shape == (b, d) and got['encoded'].ndim == got['block0'].ndim == 4
  assert got['encoded'].shape == got['block-1'].shape and got['encoded'].shape[0] == b
  np.testing.assert_array_equal(got['encoded-1'], got['encoded'])
  assert np.abs(np.asarray(got['block-1']) - np.asarray(got['encoded'])).max() > 1e-3  # the norm is applied
  head = weight_files.flatten(params)
  if not any(k.startswith(('head/head_norm', 'head/head_hidden')) for k in head):  # a linear head (not X-ViT's)
    kernel, bias = head['head/output_projection/kernel'], head['head/output_projection/bias']
    np.testing.assert_allclose(got['pooled'] @ kernel + bias, got['logits'], rtol=1e-5, atol=1e-5)


def test_scanned_layers_give_the_unrolled_blocks_and_keep_none_unasked():
  """A scanned encoder's blocks (its scan's per-layer outputs) equal the unrolled encoder's; a call that asks for
  no block has no stacked (layers, B, ...) array in its program."""
  plain, params, x = _model('vivit', 'spatiotemporal', {}, num_layers=3)
  scanned = models.build(tiny('vivit', 'spatiotemporal', num_layers=3, scan_layers=True, remat='full'))
  stacked = layout.to_model_layout(params, scanned.spec)
  names = ('block0', 'block2', 'encoded1', 'logits')
  want, got = _apply(plain, params, x, names), _apply(scanned, stacked, x, names)
  for name in names:
    assert_close(got[name], want[name])
  stack = 'f32[3,2,2,4,32]'  # (layers, B, n_t, N, D): every block's tokens
  assert stack in str(jax.make_jaxpr(lambda p: scanned.apply({'params': p}, x, outputs=('block1',)))(stacked))
  for asked in (None, ('pooled', 'encoded')):
    assert stack not in str(jax.make_jaxpr(lambda p, a=asked: scanned.apply({'params': p}, x, outputs=a))(stacked))


@pytest.mark.parametrize('name,message', [
    ('tokens', "outputs: 'tokens' is not an output of the model (logits, pooled, encoded, block<i>, encoded<i>)"),
    ('block2', "outputs: 'block2': the model has 2 layers (0 ... 1, or -2 ... -1)"),
    ('encoded-3', "outputs: 'encoded-3': the model has 2 layers (0 ... 1, or -2 ... -1)")])
def test_an_unknown_output_is_one_line(name, message):
  module, params, x = _model('vivit', 'spatiotemporal', {})
  with pytest.raises(ValueError) as e:
    module.apply({'params': params}, x, outputs=('logits', name))
  assert str(e.value) == message


def test_layers_are_averaged_or_concatenated():
  """`features` of a list of layers: their 'encoded<i>' tokens averaged or concatenated along D, the pooled
  features their mean over the tokens; no layers: the model's own."""
  module, params, x = _model('vivit', 'spatiotemporal', {})
  got = _apply(module, params, x, ('pooled', 'encoded', 'encoded0', 'encoded1'))
  pooled, tokens = outputs.features(got, ())
  assert pooled is got['pooled'] and tokens is got['encoded']
  pooled, tokens = outputs.features(got, (0, 1), 'mean')
  # float32 sums in another order: a few ulps of tokens of magnitude ~1, far below 1e-4
  np.testing.assert_allclose(tokens, (got['encoded0'] + got['encoded1']) / 2, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(pooled, tokens.mean(axis=(1, 2)), rtol=1e-4, atol=1e-4)
  _, tokens = outputs.features(got, (1, 0), 'concat')
  assert tokens.shape == got['encoded'].shape[:-1] + (64,)
  np.testing.assert_array_equal(tokens[..., :32], got['encoded1'])
  assert outputs.check_layers('task.probe.layers', (0, -2, 2, 'x'), 2) == [
      "task.probe.layers[2] must be a layer of the model's 2 (0 ... 1, or -2 ... -1), got 2",
      "task.probe.layers[3] must be a layer index (an int), got 'x'"]
