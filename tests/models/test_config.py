import re

import pytest

import vvt.models as models
from vvt.models import config as config_lib


def tiny(family='timesformer', **kw):
  base = dict(variant='Ti/8', num_frames=8, image_size=32, num_classes=5, num_layers=1, hidden_size=32,
              num_heads=4, mlp_dim=64)
  base.update(kw)
  return models.get_config(family, **base)


def test_family_defaults_follow_papers():
  vivit, ts, xvit = (config_lib.resolve(models.get_config(f)) for f in ('vivit', 'timesformer', 'xvit'))
  assert vivit.tubelet == (2, 16, 16) and vivit.num_frames == 32 and vivit.gelu_approximate
  assert vivit.attention == 'factorised_encoder' and vivit.positional_embedding == 'joint'
  assert ts.tubelet == (1, 16, 16) and ts.attention == 'divided' and ts.temporal_projection
  assert not ts.gelu_approximate and ts.class_token == 'global'
  assert xvit.attention == 'space_time_mixing' and xvit.class_token == 'per_frame'
  assert xvit.frame_aggregation == 'temporal_attention' and xvit.temporal_head.layer_norm_eps == 1e-5
  assert not xvit.temporal_head.qkv_bias
  assert (vivit.hidden_size, vivit.num_layers, vivit.num_heads, vivit.mlp_dim) == (768, 12, 12, 3072)


@pytest.mark.parametrize('variant,expect', [('B/16x2', ('B', 16, 2)), ('L/14', ('L', 14, None))])
def test_parse_variant(variant, expect):
  assert config_lib.parse_variant(variant) == expect


def test_overrides_win_over_variant():
  c = config_lib.resolve(tiny(hidden_size=48, num_heads=6))
  assert (c.hidden_size, c.num_heads, c.num_layers) == (48, 6, 1)


@pytest.mark.parametrize('kwargs,message', [
    (dict(family='vivit', attention='factorised_self_attention'), "classifier='gap'"),
    (dict(family='vivit', attention='factorised_dot_product'), "classifier='gap'"),
    (dict(num_frames=7, tubelet=(2, 8, 8)), 'num_frames=7'),
    (dict(image_size=30), 'image_size=30'),
    (dict(attention='nonsense'), 'model.attention'),
    (dict(attention='local_global', num_frames=3), 'even token grid'),
    (dict(family='vivit', attention='factorised_dot_product', classifier='gap', num_heads=3, hidden_size=24),
     'num_heads=3'),
    (dict(variant='B16'), 'model.variant'),
    (dict(hidden_size=30), 'not divisible by model.num_heads'),
    (dict(family='xvit', attention='divided'), "class_token='per_frame'"),
    (dict(num_classes={'verb': 0}), "num_classes['verb']"),
    (dict(family='xvit', mixing=dict(window=3, shift_div=4, summary_token=False)), 'model.mixing'),
    (dict(dtype='float16'), 'model.dtype'),
])
def test_impossible_combinations_fail_before_compiling(kwargs, message):
  family = kwargs.pop('family', 'timesformer')
  with pytest.raises(ValueError, match=message.replace('[', r'\[').replace(']', r'\]')):
    models.build(tiny(family, **kwargs))


def test_unknown_field_is_named():
  cfg = tiny()
  cfg.num_layer = 3
  with pytest.raises(ValueError, match='model.num_layer'):
    models.build(cfg)


# One case per numeric field: (overrides, the field the one-line error must name).
RANGE_CASES = [
    (dict(dropout_rate=-0.5), 'model.dropout_rate'),
    (dict(dropout_rate=1.0), 'model.dropout_rate'),
    (dict(attention_dropout_rate=1.2), 'model.attention_dropout_rate'),
    (dict(stochastic_depth=1.5), 'model.stochastic_depth'),
    (dict(stochastic_depth=True), 'model.stochastic_depth'),
    (dict(num_layers=0), 'model.num_layers'),
    (dict(num_heads=0), 'model.num_heads'),
    (dict(num_heads=True), 'model.num_heads'),
    (dict(hidden_size=-32), 'model.hidden_size'),
    (dict(mlp_dim=0), 'model.mlp_dim'),
    (dict(mlp_dim=64.0), 'model.mlp_dim'),
    (dict(num_frames=0), 'model.num_frames'),
    (dict(image_size=-32), 'model.image_size'),
    (dict(tubelet=(1, 0, 8)), 'model.tubelet'),
    (dict(tubelet=(1, 8.5, 8)), 'model.tubelet'),
    (dict(tubelet=(True, 8, 8)), 'model.tubelet'),
    (dict(family='vivit', attention='factorised_encoder', temporal_num_heads=0), 'model.temporal_num_heads'),
    (dict(family='vivit', attention='factorised_encoder', temporal_num_heads=3), 'model.temporal_num_heads=3'),
    (dict(family='vivit', attention='factorised_encoder', temporal_mlp_dim=-1), 'model.temporal_mlp_dim'),
    (dict(family='vivit', attention='factorised_encoder', temporal_layers=-1), 'model.temporal_layers'),
    (dict(representation_size=0), 'model.representation_size'),
    (dict(layer_norm_eps=0.0), 'model.layer_norm_eps'),
    (dict(family='xvit', temporal_head=dict(layer_norm_eps=-1e-5)), 'model.temporal_head.layer_norm_eps'),
    (dict(family='xvit', temporal_head=dict(num_layers=0)), 'model.temporal_head.num_layers'),
    (dict(family='xvit', temporal_head=dict(num_heads=0)), 'model.temporal_head.num_heads'),
    (dict(family='xvit', temporal_head=dict(num_heads=3)), 'model.temporal_head.num_heads=3'),
    (dict(family='xvit', temporal_head=dict(mlp_ratio=0)), 'model.temporal_head.mlp_ratio'),
    (dict(family='xvit', temporal_head=dict(mlp_dim=-8)), 'model.temporal_head.mlp_dim'),
    (dict(family='xvit', mixing=dict(window=-1)), 'model.mixing.window'),
    (dict(family='xvit', mixing=dict(shift_div=0)), 'model.mixing.shift_div'),
    (dict(family='xvit', mixing=dict(shift_div=2.5)), 'model.mixing.shift_div'),
]


@pytest.mark.parametrize('kwargs,field', RANGE_CASES, ids=[f'{f}={list(k.values())[-1]}' for k, f in RANGE_CASES])
def test_numeric_field_out_of_range_is_one_line_naming_it(kwargs, field):
  family = kwargs.pop('family', 'timesformer')
  with pytest.raises(ValueError, match=re.escape(field)) as err:
    config_lib.resolve(tiny(family, **kwargs))
  assert '\n' not in str(err.value)


@pytest.mark.parametrize('where,typo,hint', [
    (None, 'stochastic_dept', 'model.stochastic_depth'),
    ('mixing', 'shift_dv', 'model.mixing.shift_div'),
    ('temporal_head', 'num_layer', 'model.temporal_head.num_layers'),
])
def test_unknown_field_names_the_closest_valid_one(where, typo, hint):
  cfg = tiny('xvit')
  if where is None:
    cfg[typo] = 0.1
  else:
    cfg[where][typo] = 1
  prefix = 'model.' + (f'{where}.' if where else '')
  with pytest.raises(ValueError, match=re.escape(f'{prefix}{typo} (did you mean {hint}?)')):
    config_lib.resolve(cfg)


@pytest.mark.parametrize('family,attention', [('timesformer', 'divided'), ('vivit', 'factorised_encoder')])
@pytest.mark.parametrize('shape', [(2, 4, 32, 32, 3), (2, 8, 16, 16, 3), (2, 8, 32, 32, 1), (8, 32, 32, 3)])
def test_wrong_input_shape_names_the_expected_shape(family, attention, shape):
  import jax
  import numpy as np
  module = models.build(tiny(family, attention=attention))
  good = np.zeros((1, 8, 32, 32, 3), np.float32)
  params = jax.eval_shape(lambda v: module.init(jax.random.key(0), v), good)
  with pytest.raises(AssertionError, match=re.escape('(B, T, H, W, 3) = (B, 8, 32, 32, 3)')):
    jax.eval_shape(lambda p, v: module.apply(p, v), params, np.zeros(shape, np.float32))
