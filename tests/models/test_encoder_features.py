"""The model features V-JEPA 2 and VideoPrism need, off by default: 3D RoPE, the attentive pooler, the logit cap,
the offset LayerNorm, resized position tables and the space_then_time scheme (their parity with transformers is in
tests/convert/test_hf_vjepa2.py and test_hf_videoprism.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.models.params import random_params
from tests.models.test_models import jitted
from tests.models.test_models import tiny
from tests.models.test_models import video
from vvt.convert import weight_files
from vvt.inspection import attention_maps as am
import vvt.models as models
from vvt.models import kernels
from vvt.models import layout
from vvt.train import layer_decay

VJEPA2_LIKE = dict(classifier='attentive', positional_embedding='rope', attentive_pooler=dict(depth=2))
VIDEOPRISM_LIKE = dict(classifier='attentive', tubelet=(1, 8, 8), attention_logit_cap=2.0, layer_norm_scale_offset=1.0,
                       pos_table_grid=(2, 3, 3), attentive_pooler=dict(cross_attention='plain', per_dim_scale=True,
                                                                        head_dim=16))


def test_new_fields_are_off_by_default():
  c = models.resolve(models.get_config('vivit'))
  assert (c.attention_logit_cap, c.layer_norm_scale_offset, c.pos_table_grid) == (None, 0.0, None)
  assert c.classifier == 'token' and c.positional_embedding == 'joint'
  for family, attention, kw in (('vivit', 'spatiotemporal', {}), ('timesformer', 'divided', {}),
                                ('xvit', 'space_time_mixing', {})):
    model = models.build(tiny(family, attention, **kw))
    names = weight_files.flatten(jax.eval_shape(lambda x, m=model: m.init(jax.random.key(0), x),
                                          jax.ShapeDtypeStruct((1, 4, 16, 16, 3), jnp.float32))['params'])
    assert not any(n.startswith('pooler/') or 'per_dim_scale' in n for n in names), attention


@pytest.mark.parametrize('attention,kw', [('spatiotemporal', VJEPA2_LIKE), ('divided', VJEPA2_LIKE),
                                          ('space_then_time', VIDEOPRISM_LIKE)])
def test_runs_and_batch_equals_per_example(attention, kw):
  module = models.build(tiny('vivit', attention, **kw))
  apply = jitted(module)
  x = video()
  params = random_params(module, x)
  out = apply(params, x)
  assert out.shape == (3, 3) and np.all(np.isfinite(out))
  single = jnp.concatenate([apply(params, x[i:i + 1]) for i in range(3)])
  np.testing.assert_allclose(out, single, atol=1e-5, rtol=1e-5)
  assert np.abs(out[0] - out[1]).max() > 1e-3


def test_rope_makes_the_model_see_order_and_runs_any_clip_with_the_same_weights():
  """Joint attention without a table is blind to token order; with RoPE it is not, and the same params run a
  longer clip and a larger frame (nothing in them depends on the grid)."""
  x = video(b=1, t=4, s=16)
  reversed_x = x[:, ::-1]
  outs = {}
  for pos in ('none', 'rope'):
    cfg = tiny('vivit', 'spatiotemporal', tubelet=(1, 8, 8), classifier='attentive', positional_embedding=pos)
    module = models.build(cfg)
    apply = jitted(module)
    params = random_params(module, x)
    outs[pos] = np.abs(apply(params, x) - apply(params, reversed_x)).max()
  assert outs['none'] < 1e-5 and outs['rope'] > 1e-3
  longer = models.build(tiny('vivit', 'spatiotemporal', tubelet=(1, 8, 8), classifier='attentive',
                             positional_embedding='rope', num_frames=6, image_size=24))
  assert jitted(longer)(params, video(b=1, t=6, s=24)).shape == (1, 3)


def test_resized_tables_keep_their_trained_shape_and_equal_them_on_their_grid():
  """pos_table_grid: the tables keep the trained (t0, h0 * w0) size whatever the clip; on the table's own grid
  the model is the one without resizing."""
  base = tiny('vivit', 'space_then_time', tubelet=(1, 8, 8), image_size=24, num_frames=2, classifier='gap')
  module = models.build(base)
  apply = jitted(module)
  x = video(t=2, s=24)
  params = random_params(module, x)
  same = models.build(models.get_config(**{**base.to_dict(), 'pos_table_grid': (2, 3, 3)}))
  np.testing.assert_allclose(jitted(same)(params, x), apply(params, x), atol=1e-6)
  other = models.build(models.get_config(**{**base.to_dict(), 'pos_table_grid': (2, 3, 3), 'num_frames': 5,
                                            'image_size': 40}))
  assert jitted(other)(params, video(t=5, s=40)).shape == (3, 3)
  assert params['spatial_encoder']['posembed']['pos_embedding'].shape == (1, 9, 32)
  assert params['temporal_encoder']['posembed']['pos_embedding'].shape == (1, 2, 32)


def test_logit_cap_is_the_einsum_kernels_and_refused_elsewhere():
  rng = np.random.default_rng(0)
  q, k, v = (jnp.asarray(3 * rng.standard_normal((2, 5, 2, 8)), jnp.float32) for _ in range(3))
  s = np.einsum('gqhd,gkhd->ghqk', np.asarray(q), np.asarray(k)) / np.sqrt(8)
  s = 2.0 * np.tanh(s / 2.0)
  w = np.exp(s - s.max(-1, keepdims=True))
  ref = np.einsum('ghqk,gkhd->gqhd', w / w.sum(-1, keepdims=True), np.asarray(v))
  got = kernels.dot_product_attention(q, k, v, impl='auto', logit_cap=2.0)
  np.testing.assert_allclose(got, ref, atol=1e-5)
  assert np.abs(np.asarray(kernels.dot_product_attention(q, k, v)) - ref).max() > 1e-2
  with pytest.raises(ValueError, match="attention_impl='chunked' has no logit cap"):
    kernels.dot_product_attention(q, k, v, impl='chunked', logit_cap=2.0)


@pytest.mark.parametrize('change,message', [
    (dict(positional_embedding='rope'), "model.positional_embedding='rope' rotates the patch tokens"),
    (dict(positional_embedding='rope', classifier='gap', attention='factorised_encoder'),
     "model.positional_embedding='rope' needs a single-encoder scheme"),
    (dict(attention_logit_cap=-1.0), 'model.attention_logit_cap must be a number > 0'),
    (dict(attention_logit_cap=50.0, attention_impl='chunked'), "model.attention_impl='chunked' has no logit cap"),
    (dict(pos_table_grid=(2, 3, 3)), "model.pos_table_grid resizes the learned 'joint' tables"),
    (dict(pos_table_grid=(2, 3)), 'model.pos_table_grid must be three positive ints'),
    (dict(layer_norm_scale_offset='one'), 'model.layer_norm_scale_offset must be a number'),
    (dict(classifier='attentive', attentive_pooler=dict(cross_attention='mean')),
     "model.attentive_pooler.cross_attention must be 'block' or 'plain'"),
    (dict(classifier='attentive', attentive_pooler=dict(head_dim=16)),
     "model.attentive_pooler.cross_attention='block' has no output projection"),
    (dict(classifier='attentive', attention='factorised_encoder'),
     "model.classifier='attentive' pools the tokens of the last encoder"),
    (dict(classifier='attentive', attentive_pooler=dict(depht=1)),
     'unknown model config field model.attentive_pooler.depht (did you mean model.attentive_pooler.depth?)'),
    (dict(classifier='attentive', attentive_pooler=dict(num_queries=0)),
     'model.attentive_pooler.num_queries must be a positive int'),
])
def test_bad_fields_are_one_line_naming_them(change, message):
  with pytest.raises(ValueError) as info:
    models.build(tiny('vivit', change.pop('attention', 'spatiotemporal'), **change))
  assert message in str(info.value) and '\n' not in str(info.value), str(info.value)


def test_scanned_pooler_blocks_equal_the_unscanned_ones():
  cfg = tiny('vivit', 'spatiotemporal', **VJEPA2_LIKE)
  module = models.build(cfg)
  apply = jitted(module)
  x = video()
  params = random_params(module, x)
  scanned = models.build(models.get_config(**{**cfg.to_dict(), 'scan_layers': True}))
  stacked = layout.to_stacked(params)
  assert stacked['pooler']['layers']['blocks']['block']['mlp']['Dense_0']['kernel'].shape[0] == 2
  np.testing.assert_allclose(scanned.apply({'params': stacked}, x), apply(params, x), atol=1e-5)


def test_the_pooler_is_scaled_as_the_head_by_layer_decay():
  params = jax.eval_shape(lambda x: models.build(tiny('vivit', 'spatiotemporal', **VJEPA2_LIKE)).init(
      jax.random.key(0), x), jax.ShapeDtypeStruct((1, 4, 16, 16, 3), jnp.float32))['params']
  ids = weight_files.flatten(layer_decay.layer_ids(params))
  assert {v for k, v in ids.items() if k.startswith('pooler/')} == {ids['head/output_projection/kernel']} == {3}


@pytest.mark.parametrize('attention,kw', [('spatiotemporal', VJEPA2_LIKE), ('space_then_time', VIDEOPRISM_LIKE)])
def test_attention_maps_recompute_the_rotated_and_capped_attention(attention, kw):
  """The maps' recomputed attention (RoPE applied to q and k, the cap to the scores) reproduces every stage's
  output; VideoPrism's stages are rolled out on the clip's tokens into a map that sums to 1."""
  cfg = tiny('vivit', attention, **kw)
  module = models.build(cfg)
  x = video(b=2)
  params = random_params(module, x)
  maps = am.attention_maps(params, x, module.spec)
  assert maps.stages
  for st in maps.stages:
    y, _ = st.recompute_output()
    np.testing.assert_allclose(y, st.output[0], atol=1e-4 * np.abs(st.output[0]).max(), err_msg=st.name)
  nt, nh, nw = module.spec.grid
  assert maps.final.shape == (2, nt, nh, nw)
  np.testing.assert_allclose(maps.final.sum(axis=(1, 2, 3)), 1.0, atol=1e-6)
