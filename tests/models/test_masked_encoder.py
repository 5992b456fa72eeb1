"""The encoder on kept tokens only (vvt/models/masking.py): all tokens kept is the unmasked encoder; a mask is the
encoder's blocks run on the grid with the dropped tokens removed (positions added before); positions travel with
their tokens (learned tables, sine-cosine, RoPE); schemes where dropping tokens means nothing are refused."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models.params import random_params
from tests.models.test_attention_impl import assert_close
from tests.models.test_models import tiny
import vvt.models as models
from vvt.models import masking
from vvt.models.blocks import Encoder
from vvt.models.embedding import PositionalEmbedding
from vvt.models.embedding import TubeletEmbedding
from vvt.models.video_transformer import block_fields

# float32 sums in another order or over another set of tokens: rounding only (measured ~1e-6 of the range)
RTOL = 1e-4
SUPPORTED = [  # (family, attention, overrides): every scheme that may drop tokens, every positional embedding
    ('vivit', 'spatiotemporal', {}),
    ('vivit', 'spatiotemporal', dict(positional_embedding='rope', classifier='gap')),
    ('vivit', 'spatiotemporal', dict(positional_embedding='sinusoidal', classifier='gap')),
    ('timesformer', 'divided', {}),
    ('vivit', 'factorised_self_attention', dict(classifier='gap')),
    ('vivit', 'factorised_dot_product', dict(classifier='gap', scan_layers=True)),
    ('vivit', 'factorised_encoder', dict(classifier='gap')),
    ('vivit', 'space_then_time', dict(classifier='gap')),
]


def _model(family, attention, kw):
  module = models.build(tiny(family, attention, image_size=32, **kw))
  x = jax.random.normal(jax.random.key(0), (2, 4, 32, 32, 3))
  params = random_params(module, x, seed=2)
  return module, params, x


def _apply(module, params, x, kept=None, names=('logits', 'encoded', 'block-1')):
  return jax.jit(lambda p, v, k: module.apply({'params': p}, v, outputs=names, kept=k))(params, x, kept)


def tube(b, t, n, keep_spatial, seed=0):
  """A tube mask (B, t * K_s), time-major, the same K_s sorted spatial positions in every temporal index."""
  rng = np.random.default_rng(seed)
  rows = [np.sort(rng.permutation(n)[:keep_spatial]) for _ in range(b)]
  return jnp.asarray(np.stack([np.concatenate([s + i * n for i in range(t)]) for s in rows]), jnp.int32)


@pytest.mark.parametrize('family,attention,kw', SUPPORTED[5:7])
def test_all_kept_is_the_unmasked_encoder(family, attention, kw):
  module, params, x = _model(family, attention, kw)
  t, nh, nw = module.spec.grid
  every = jnp.broadcast_to(jnp.arange(t * nh * nw, dtype=jnp.int32), (2, t * nh * nw))
  full, masked = _apply(module, params, x), _apply(module, params, x, every)
  assert_close(masked['logits'], full['logits'], RTOL)
  assert_close(masked['encoded'].reshape(full['encoded'].shape), full['encoded'], RTOL)


def _reference(module, params, x, kept):
  """The blocks of a single-encoder model run on the grid with the dropped tokens removed: embedding and
  positions over the full grid, the kept tokens taken out with NumPy, then the encoder's layers alone."""
  spec, p = module.spec, params['encoder']
  tokens = TubeletEmbedding(spec.hidden_size, spec.tubelet).apply({'params': p and params['embedding']}, x)
  b, t, n, d = tokens.shape
  cls = None if spec.class_token is None else jnp.broadcast_to(p['cls'], (b, 1, d))
  tokens, cls = PositionalEmbedding(spec.positional_embedding, time_rows=spec.time_embedding_rows).apply(
      {'params': p.get('posembed', {})}, tokens, cls)
  rows = t if masking.tube_only(spec.stages) else 1
  flat = np.asarray(tokens).reshape(b, t * n, d)
  kept_tokens = np.stack([flat[i, np.asarray(kept[i])] for i in range(b)]).reshape(b, rows, -1, d)
  block = block_fields(spec, spec.stages, spec.grid, projected=spec.projected)
  out, _, _ = Encoder(spec.num_layers, block).apply({'params': p['layers']}, jnp.asarray(kept_tokens), cls)
  return out


@pytest.mark.parametrize('family,attention,kw', [SUPPORTED[0], SUPPORTED[3]])
def test_a_mask_is_the_encoder_on_the_remaining_tokens(family, attention, kw):
  """Joint attention: any kept set, in any order; factorised schemes: a tube mask, (B, n_t, K_s, D)."""
  module, params, x = _model(family, attention, kw)
  t, nh, nw = module.spec.grid
  if masking.tube_only(module.spec.stages):
    kept = tube(2, t, nh * nw, 5)
  else:
    kept = jnp.asarray(np.stack([np.random.default_rng(i).permutation(t * nh * nw)[:7] for i in range(2)]),
                       jnp.int32)
  got = _apply(module, params, x, kept)
  want = _reference(module, params, x, kept)
  assert got['block-1'].shape == want.shape == ((2, t, 5, 32) if masking.tube_only(module.spec.stages)
                                                 else (2, 1, 7, 32))
  assert_close(got['block-1'], want, RTOL)
  full = _apply(module, params, x)
  assert np.abs(np.asarray(got['logits']) - np.asarray(full['logits'])).max() > 1e-3  # dropping tokens matters


@pytest.mark.parametrize('family,attention,kw', [SUPPORTED[1], SUPPORTED[7]])
def test_positions_travel_with_their_tokens(family, attention, kw):
  """Keeping every token in another order (joint: any permutation; factorised: the same permutation of the
  spatial positions in every temporal index) gives the unmasked tokens in that order: RoPE rotates by the
  token's own (t, h, w), learned tables were added before the tokens moved."""
  module, params, x = _model(family, attention, kw)
  t, nh, nw = module.spec.grid
  n = nh * nw
  if attention != 'spatiotemporal':
    perm = np.random.default_rng(3).permutation(n)
    order = np.concatenate([perm + i * n for i in range(t)])
  else:
    order = np.random.default_rng(3).permutation(t * n)
  kept = jnp.asarray(np.broadcast_to(order, (2, t * n)), jnp.int32)
  full, moved = _apply(module, params, x), _apply(module, params, x, kept)
  want = np.asarray(full['encoded']).reshape(2, t * n, -1)[:, order]
  assert_close(np.asarray(moved['encoded']).reshape(2, t * n, -1), want, RTOL)
  assert_close(moved['logits'], full['logits'], RTOL)  # mean pooling: the order does not matter


@pytest.mark.parametrize('family,attention,kw,why', [
    ('xvit', 'space_time_mixing', {}, 'shifts keys and values in from the same spatial positions'),
    ('timesformer', 'local_global', {}, 'attends within local/global windows of the full spatial grid'),
    ('timesformer', 'axial', {}, 'attends within width/height windows'),
    ('timesformer', 'space', dict(class_token='per_frame'), "model.class_token='per_frame' sits among"),
])
def test_schemes_that_cannot_drop_tokens_are_refused(family, attention, kw, why):
  cfg = models.resolve(tiny(family, attention, **kw))
  line = masking.refusal(cfg.attention, cfg.class_token, cfg.classifier)
  assert why in line and '\n' not in line
  module = models.build(cfg)
  x = jnp.zeros((1, 4, 16, 16, 3))
  with pytest.raises(ValueError, match='cannot drop tokens'):
    jax.eval_shape(lambda v: module.init(jax.random.key(0), v, kept=jnp.zeros((1, 4), jnp.int32)), x)
  assert masking.refusal('divided') is None and masking.refusal('spatiotemporal', 'global', 'token') is None
