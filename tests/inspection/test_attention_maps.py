"""Attention maps (vvt/inspection/attention_maps.py): the recomputed attention is the model's own, for every scheme."""
import sys

import jax
import numpy as np
import pytest

from configs import common
from tests.conftest import REPO
from vvt.config import loader as config_cli
from vvt.config import run_spec
from vvt.inspection import attention_maps as am
import vvt.models

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import train_helpers  # noqa: E402

SCHEMES = tuple(common.SYNTHETIC_SCHEMES)


def tiny(scheme, **overrides):
  """A tiny random model of `scheme` from configs/synthetic.py (its RunSpec), the module, its params and a random
  clip."""
  ov = [(f'model.{k}', str(v)) for k, v in dict(hidden_size=16, num_heads=2, mlp_dim=16, **overrides).items()]
  run = config_cli.load_run(f'configs/synthetic.py:{scheme}', ov, files=(), init=False)
  module = vvt.models.build(run.model)
  video = jax.random.normal(jax.random.key(1), (2, run.num_frames, *run.image_size, 3))
  params = module.init(jax.random.key(0), video)['params']
  params = jax.tree.map(lambda p: p + 0.3 * jax.random.normal(jax.random.key(2), p.shape), params)  # not zero-init
  return run, module, params, video


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
  run, module, params, video = tiny(scheme, **overrides)
  stages = am.attention_stages(module, params, video, run.model)
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
  run, module, params, video = tiny('divided')
  st = am.attention_stages(module, params, video, run.model)[0]
  st.attn = st.attn[..., ::-1]
  y, _ = st.recompute_output()
  assert np.abs(y - st.output[0]).max() > 1e-2 * np.abs(st.output[0]).max()


def object_views(run, seeds):
  """[(float view (1, T, S, S, 3) normalised, bool object mask (T, S, S))] of synthetic clips: the clip and
  its noise-free twin (same generator draws) through the evaluation's centre view of RunSpec `run`; the object is
  the pixels with a channel above 150 (object colours have one channel >= 180, backgrounds stay <= 120)."""
  from vvt.data.transforms import normalization
  from vvt.data.transforms import views
  from vvt.data.writing import synthetic
  out = []
  for seed in seeds:
    label = seed % run.model.num_classes
    clip = synthetic.render_clip(label, np.random.default_rng(seed), 16, 64)
    clean = synthetic.render_clip(label, np.random.default_rng(seed), 16, 64, noise=0)
    idx = views.frame_indices(16, run.data).reshape(-1)
    mid = int(run.data.num_spatial_crops) // 2
    view = views.views_from_clips(clip[idx], run.data)[mid]
    mask = views.views_from_clips(clean[idx], run.data)[mid].max(-1) > 150
    out.append((normalization.normalize(view[None], run.data.normalization), mask))
  return out


@pytest.fixture(scope='module')
def train_data(tmp_path_factory):
  """The training tests' tiny synthetic set (48 train / 10 test clips, `train_helpers`), which the measurement
  below was made on."""
  return train_helpers.write_tiny_dataset(tmp_path_factory.mktemp('tiny_synthetic'))


def test_a_trained_divided_model_attends_to_the_moving_object(tmp_path, train_data):
  """Measured: a tiny divided model trained for 60 steps on the tiny synthetic set puts more of its rollout
  mass on the tokens that hold the moving object than their share of the tokens (the uniform map's). The run
  stops at its last step's checkpoint (`stop_after_step`): the test reads its params, not its final evaluation."""
  from vvt.train import checkpoints
  from vvt.train import trainer
  config = train_helpers.tiny_config(train_data, 'divided')
  config.num_train_steps = 60
  config.checkpoint.every_steps = 60
  wd = str(tmp_path / 'run')
  run = run_spec.resolve(config)
  trainer.train_and_evaluate(run, wd, log=lambda *a, **k: None, stop_after_step=60)
  params, _ = checkpoints.load_params(wd)
  shares, uniform = [], []
  for video, mask in object_views(run, range(100, 108)):
    maps = am.attention_maps(params, video, run.model)
    assert maps.kind == 'rollout' and maps.final.shape == (1, 4, 4, 4)
    np.testing.assert_allclose(maps.final.sum(), 1.0, atol=1e-9)
    s, u = am.mass_on_tokens(maps.final[0], mask, maps.tubelet_t)
    shares.append(s)
    uniform.append(u)
  print(f'mass on the object tokens {np.mean(shares):.3f}, their share of the tokens {np.mean(uniform):.3f}')
  assert 0 < np.mean(uniform) < 0.6
  assert np.mean(shares) > 1.1 * np.mean(uniform)  # measured 0.203 vs 0.162 (1.25x)
