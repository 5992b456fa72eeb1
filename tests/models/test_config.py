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
