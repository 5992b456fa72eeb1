"""Attention maps (vvt/train/attention_maps.py): the recomputed attention is the model's own, for every scheme."""
import jax
import numpy as np
import pytest

from configs import common
from vvt.cli import config as config_cli
import vvt.models
from vvt.train import attention_maps as am

SCHEMES = tuple(common.SYNTHETIC_SCHEMES)


def tiny(scheme, **overrides):
  """A tiny random model of `scheme` from configs/synthetic.py, its params and a random clip."""
  ov = [(f'model.{k}', str(v)) for k, v in dict(hidden_size=16, num_heads=2, mlp_dim=16, **overrides).items()]
  cfg = config_cli.load(f'configs/synthetic.py:{scheme}', ov, files=(), init=False)
  module = vvt.models.build(cfg.model)
  video = jax.random.normal(jax.random.key(1), (2, cfg.model.num_frames, cfg.model.image_size,
                                                cfg.model.image_size, 3))
  params = module.init(jax.random.key(0), video)['params']
  params = jax.tree.map(lambda p: p + 0.3 * jax.random.normal(jax.random.key(2), p.shape), params)  # not zero-init
  return cfg, module, params, video


VARIANTS = [(s, {}) for s in SCHEMES] + [
    ('divided', dict(classifier='token')),  # global class token, skips `time`
    ('joint', dict(classifier='token')),
    ('space', dict(classifier='token', class_token='per_frame')),
    ('space_time_mixing', dict(classifier='token', class_token='per_frame')),
    ('space_time_mixing', {'mixing.summary_token': True}),
    ('factorised_encoder', dict(classifier='token')),
    ('factorised_self_attention', dict(attention_order='time_space')),
]


@pytest.mark.parametrize('scheme,overrides', VARIANTS, ids=[f'{s}-{i}' for i, (s, _) in enumerate(VARIANTS)])
def test_recomputed_attention_reproduces_the_module_output(scheme, overrides):
  cfg, module, params, video = tiny(scheme, **overrides)
  stages = am.attention_stages(module, params, video, cfg.model)
  assert stages
  for st in stages:
    rows = st.attn.sum(-1)
    if st.summary is not None:
      rows = rows + st.summary.sum(-1)
    np.testing.assert_allclose(rows, 1.0, atol=1e-9, err_msg=st.name)
    y, cy = st.recompute_output()
    y_model, cy_model = st.output
    scale = np.abs(y_model).max()
    np.testing.assert_allclose(y, y_model, atol=1e-4 * scale, err_msg=st.name)
    assert (cy is None) == (cy_model is None), st.name
    if cy is not None:
      np.testing.assert_allclose(cy, cy_model, atol=1e-4 * scale, err_msg=st.name)


def test_a_wrong_grouping_would_be_caught():
  """The parity check is falsifiable: permuting the keys of one stage changes the output."""
  cfg, module, params, video = tiny('divided')
  st = am.attention_stages(module, params, video, cfg.model)[0]
  st.attn = st.attn[..., ::-1]
  y, _ = st.recompute_output()
  assert np.abs(y - st.output[0]).max() > 1e-2 * np.abs(st.output[0]).max()
