"""`task.name='jepa'` (vvt/tasks/jepa.py): a tiny V-JEPA 2-shaped run's jitted steps on one batch of moving squares
(the loss falls, the features' standard deviations are train metrics), the target encoder the EMA of the online
one (not trained by the optimiser), an evaluation's loss from fixed masks, and the refusals of bad options."""
import jax
import numpy as np
import pytest

from configs import common
from vvt.config import run_spec
from vvt.config import validation
from vvt.tasks import jepa
from vvt.tasks import registry
from vvt.train import mesh as mesh_lib
from vvt.train import program as program_lib

STEPS = 12


def _config():
  c = common.synthetic_config('spatiotemporal', 'unused', hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64,
                              num_frames=4, positional_embedding='rope', num_classes=4)
  c.task.name = 'jepa'
  c.task.jepa.pred_depth, c.task.jepa.pred_width, c.task.jepa.pred_heads = 1, 24, 2
  c.task.jepa.momentum = (0.9, 1.0)
  c.task.jepa.mask_sets = ((4, 0.25),)  # one set: one context encoder and predictor pass per step
  c.batch_size, c.num_train_steps = 4, STEPS
  c.schedule.name, c.schedule.base_lr, c.schedule.warmup_steps = 'constant', 3e-3, 0
  return c


def _clips(rng, b=4):
  """Bright squares moving right over noise: uint8 (B, 4, 32, 32, 3)."""
  x = rng.integers(0, 60, size=(b, 4, 32, 32, 3))
  for i in range(b):
    top = rng.integers(0, 20)
    for t in range(4):
      left = (4 * i + 5 * t) % 20
      x[i, t, top:top + 12, left:left + 12] = 230
  return x.astype(np.uint8)


@pytest.fixture(scope='module')
def trained():
  run = run_spec.resolve(_config())
  mesh = mesh_lib.make_mesh()
  program = program_lib.build_program(run, mesh, num_train_videos=64)
  batch = mesh_lib.global_batch({'inputs': _clips(np.random.default_rng(0)), 'mask': np.ones(4, np.float32)},
                                mesh, 4)
  state = program.init_state(jax.random.PRNGKey(0))
  history = [jax.device_get(state.params)]
  metrics = []
  for _ in range(STEPS):
    state, m, _ = program.training.step(state, batch)
    metrics.append({k: float(v) for k, v in m.compute().items()})
    history.append(jax.device_get(state.params))
  return program, batch, state, history, metrics


def test_a_tiny_jepa_run_learns_and_logs_the_feature_spread(trained):
  _, _, _, _, metrics = trained
  losses = [m['loss'] for m in metrics]
  print('losses', [f'{v:.4f}' for v in losses])
  assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])
  for m in metrics:
    assert m['target_std'] > 0.1 and m['pred_std'] >= 0  # the target's features are LayerNorm'd: std ~1
  assert metrics[-1]['pred_std'] > metrics[0]['pred_std']  # the predictor leaves its zero-ish start


def test_the_target_encoder_is_the_ema_of_the_online_encoder(trained):
  program, _, _, history, _ = trained
  online = lambda p: {k: v for k, v in p.items() if k not in program.task.own_params}
  leaves = lambda t: jax.tree.leaves(t)
  # at init the target is a copy; after the first update it is the online encoder (momentum 0 at step 0)
  for a, b in zip(leaves(history[0][jepa.TARGET]), leaves(online(history[0])), strict=True):
    np.testing.assert_array_equal(a, b)
  for a, b in zip(leaves(history[1][jepa.TARGET]), leaves(online(history[1])), strict=True):
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
  # then target_t = m_t target_{t-1} + (1 - m_t) online_t, m_t on the ramp 0.9 -> 1.0 over 12 x 1.25 steps
  for t in (2, 7):
    m = 0.9 + (t - 1) * 0.1 / (STEPS * 1.25)
    for a, prev, o in zip(leaves(history[t][jepa.TARGET]), leaves(history[t - 1][jepa.TARGET]),
                          leaves(online(history[t])), strict=True):
      np.testing.assert_allclose(a, m * prev + (1 - m) * o, rtol=1e-5, atol=1e-6)
  moved = [float(np.abs(a - b).max()) for a, b in zip(leaves(history[-1][jepa.TARGET]), leaves(online(history[-1])),
                                                      strict=True)]
  assert max(moved) > 1e-4  # the target lags the online encoder


def test_evaluation_is_the_loss_on_fixed_masks(trained):
  program, batch, state, _, _ = trained
  a, _ = program.eval_step(state.params, batch)
  b, _ = program.eval_step(state.params, batch)
  np.testing.assert_array_equal(np.asarray(a['loss']), np.asarray(b['loss']))
  assert a['loss'].shape == (4, 1) and np.all(np.asarray(a['loss']) > 0)
  agg = program.task.aggregator(2)  # views 0, 1 of video 0 and view 2 of video 1 (a padding row last)
  agg.add({'loss': np.asarray(a['loss'])}, np.array([0, 0, 1, 1]), np.array([1, 1, 1, 0], np.float32), {})
  loss = np.asarray(a['loss'])[:3, 0]
  res = agg.result()
  assert res['loss'] == pytest.approx((loss[:2].mean() + loss[2]) / 2) and res['num_views'] == 3


def test_bad_jepa_options_are_one_line_each():
  c = _config()
  c.task.jepa.pred_width, c.task.jepa.momentum = 25, (1.0, 0.9)
  c.task.jepa.mask_sets = ((0, 0.15), (2, 1.5))
  c.num_train_steps = -1
  # the options with the config's other problems; the run's length with the files a training run starts from
  text = '\n'.join(validation.problems(c) + registry.hooks_of(c).start_problems(c))
  for expected in ('task.jepa.pred_width=25 is not divisible by task.jepa.pred_heads=2',
                   'task.jepa.mask_sets[0] must be (num_blocks >= 1, 0 < spatial scale <= 1), got (0, 0.15)',
                   'task.jepa.mask_sets[1] must be', 'task.jepa.momentum must satisfy 0 <= low <= high <= 1',
                   'num_train_steps must be set (> 0) for task.name=\'jepa\''):
    assert expected in text, text
