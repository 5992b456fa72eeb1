"""The video-text model (vvt/models/video_text.py, vvt/models/text.py): its API and shapes, the normalised
embeddings, the learned scale and bias of the logits, the text tower's causal and padding masks, and `model.text`'s
checks, every problem named in one error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import REPO
from tests.models.params import numpy_params
from vvt.config import loader
import vvt.models as models
from vvt.models import spec as model_spec
from vvt.models import text_config
from vvt.models.config import ModelConfigError
from vvt.models.text import TextEncoder

TEXT = dict(vocab_size=40, num_layers=2, max_length=8)


def tiny_video_text(**text):
  """VideoPrism's shape in miniature: 2 frames of 16^2, width 32, one auxiliary layer before the pooler."""
  return models.get_config(
      'vivit', attention='space_then_time', num_frames=2, image_size=16, tubelet=(1, 8, 8), hidden_size=32,
      num_layers=1, num_heads=2, mlp_dim=64, temporal_layers=1, classifier='attentive', layer_norm_scale_offset=1.0,
      attention_logit_cap=50.0, attentive_pooler=dict(depth=1, cross_attention='plain', per_dim_scale=True,
                                                      mlp_dim=64, head_dim=32),
      text=text_config.text_config(**{**TEXT, **text}))


@pytest.fixture(scope='module')
def built():
  module = models.build(tiny_video_text(logit_scale=0.5, logit_bias=-1.0))
  videos = jax.random.uniform(jax.random.key(0), (3, 2, 16, 16, 3))
  ids = jax.random.randint(jax.random.key(1), (4, 8), 3, 40, jnp.int32)
  mask = jnp.array([[1] * 8, [1] * 5 + [0] * 3, [1] * 2 + [0] * 6, [1] * 8], jnp.int32)
  shapes = jax.eval_shape(module.init, jax.random.key(2), videos, ids, mask)['params']  # nothing compiled
  embeddings = jnp.ones((1, 32))
  start = module.init(jax.random.key(2), embeddings, embeddings, method='similarity')['params']  # the scalars only
  params = {**numpy_params(shapes), 'logit_scale': jnp.float32(0.5), 'logit_bias': jnp.float32(-1.0)}
  return module, {'params': params}, videos, ids, mask, {k: float(v) for k, v in start.items()}


def _apply(module, variables, *args, method=None):
  return jax.jit(lambda v, *a: module.apply(v, *a, method=method))(variables, *args)


def _everything(m, videos, ids, mask):
  v, t = m.encode_video(videos), m.encode_text(ids, mask)
  return v, t, m(videos, ids, mask), m.similarity(v, t)


def test_embeddings_logits_and_params(built):
  """encode_video (B_v, E) and encode_text (B_t, E) are unit vectors; the logits are exp(s) v.t + b with the
  learned s and b (initialised as configured); the call gives the same logits; no classification head exists."""
  module, variables, videos, ids, mask, start = built
  assert start == {'logit_scale': 0.5, 'logit_bias': -1.0}
  v, t, logits, similarity = _apply(module, variables, videos, ids, mask, method=_everything)
  assert v.shape == (3, 32) and t.shape == (4, 32) and logits.shape == (3, 4)
  np.testing.assert_allclose(np.linalg.norm(v, axis=-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(t, axis=-1), 1.0, atol=1e-5)
  np.testing.assert_allclose(logits, np.exp(0.5) * np.asarray(v) @ np.asarray(t).T - 1.0, atol=1e-5)
  np.testing.assert_allclose(similarity, logits, atol=1e-6)
  p = variables['params']
  assert set(p) == {'video', 'text', 'logit_scale', 'logit_bias'} and 'head' not in p['video']
  assert module.spec.num_classes is None


def test_padding_is_ignored_and_tokens_count(built):
  """A padded token's id changes nothing; a real token's changes the embedding; no mask is all tokens real."""
  module, variables, _, ids, mask, _ = built
  encode = jax.jit(lambda i, m: module.apply(variables, i, m, method='encode_text'))
  base = np.asarray(encode(ids, mask))
  np.testing.assert_array_equal(encode(ids.at[1, 6].set(7), mask)[1], base[1])
  assert np.abs(encode(ids.at[1, 3].set(7), mask)[1] - base[1]).max() > 1e-3
  np.testing.assert_array_equal(encode(ids, jnp.ones_like(mask))[0], base[0])


def _block_tokens(enc, params, ids):
  """The tokens (2, L + 1, D) after the text encoder's first block, of ids (2, L)."""
  _, state = jax.jit(lambda p, i: enc.apply(p, i, capture_intermediates=lambda m, _: m.name == 'block_0'))(params, ids)
  return np.asarray(state['intermediates']['block_0']['__call__'][0])


def test_causal_tokens_see_only_the_past():
  """With causal attention a token's features do not depend on later tokens (the class token, last, sees all)."""
  spec = model_spec.spec_of(models.resolve(tiny_video_text()))
  ids = jnp.arange(3, 11, dtype=jnp.int32)[None]
  for causal in (True, False):
    enc = TextEncoder(model_spec.TextSpec(**{**spec.text.__dict__, 'causal': causal}), 1.0)
    params = numpy_params(jax.eval_shape(enc.init, jax.random.key(0), ids))
    tokens = _block_tokens(enc, params, jnp.concatenate([ids, ids.at[0, 5].set(30)]))
    change = np.abs(tokens[1] - tokens[0]).max(axis=-1)  # per token
    assert (change[:5].max() == 0) == causal and change[5:].min() > 0


def test_bad_text_sections_every_problem_named():
  with pytest.raises(ModelConfigError) as info:
    models.resolve(tiny_video_text(hidden_size=48, activation='swish', num_layer=2, logit_bias='x'))
  problems = info.value.problems
  assert any('unknown model config field model.text.num_layer (did you mean model.text.num_layers?)' in p
             for p in problems)
  assert any('model.text.activation must be one of' in p for p in problems)
  assert any("model.text.logit_bias must be a number or None, got 'x'" in p for p in problems)
  with pytest.raises(ModelConfigError, match=r'model.text.hidden_size=48 must be the video embedding'):
    models.resolve(tiny_video_text(hidden_size=48, num_heads=2))


def test_the_tiny_config_resolves():
  """configs/synthetic_video_text.py: a VideoTextModel whose text tower is filled from the video model."""
  run = loader.load_run(str(REPO / 'configs/synthetic_video_text.py'), [('num_classes', '2')], files=(),
                        init=False)
  text = run.model.text
  assert (text.hidden_size, text.num_heads, text.mlp_dim, text.vocab_size) == (64, 4, 128, 256)
