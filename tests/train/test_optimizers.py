"""Schedules, weight-decay mask, clipping and gradient accumulation."""
import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tests import specs
from vvt.config import run_spec
from vvt.train import optimizers

sched_cfg = specs.schedule_spec  # the ScheduleSpec of the schema's schedule section with some fields set
opt_cfg = specs.optimizer_spec    # the OptimizerSpec of the schema's optimizer section with some fields set


def test_cosine_with_linear_warmup():
  s = optimizers.make_schedule(sched_cfg(name='cosine', base_lr=0.1, end_lr=0.001,
                                         warmup_epochs=2.0), total_steps=100,
                               steps_per_epoch=10)
  lr = np.array([float(s(i)) for i in range(101)])
  assert lr[0] == 0.0
  np.testing.assert_allclose(lr[10], 0.05, rtol=1e-6)           # half-way through warmup
  np.testing.assert_allclose(lr[20], 0.1, rtol=1e-6)            # peak after 2 epochs
  np.testing.assert_allclose(lr[60], (0.1 + 0.001) / 2, rtol=1e-5)  # cosine mid-point
  np.testing.assert_allclose(lr[100], 0.001, rtol=1e-5)
  assert np.all(np.diff(lr[:21]) > 0) and np.all(np.diff(lr[20:]) < 0)


def test_step_decay_timesformer():
  # 15 epochs, /10 at epochs 11 and 14 (TimeSformer).
  s = optimizers.make_schedule(sched_cfg(name='step', base_lr=0.005, decay_epochs=(11, 14),
                                         decay_factor=0.1), total_steps=150,
                               steps_per_epoch=10)
  np.testing.assert_allclose([float(s(i)) for i in (0, 109, 110, 139, 140, 149)],
                             [0.005, 0.005, 0.0005, 0.0005, 0.00005, 0.00005], rtol=1e-5)


def test_constant_and_bad_names():
  s = optimizers.make_schedule(sched_cfg(name='constant', base_lr=0.3), 10, 5)
  assert float(s(0)) == pytest.approx(0.3) and float(s(9)) == pytest.approx(0.3)
  with pytest.raises(ValueError, match='schedule.name'):
    optimizers.make_schedule(sched_cfg(name='linear'), 10, 5)
  with pytest.raises(ValueError, match='optimizer.name'):
    optimizers.make_optimizer(opt_cfg(name='lamb'), s)


def _tiny_params():
  import vvt.models
  cfg = vvt.models.get_config(family='timesformer', attention='divided', variant='Ti/16',
                              num_frames=4, image_size=16, num_classes=3, hidden_size=16,
                              num_layers=1, num_heads=2, mlp_dim=32, tubelet=(1, 8, 8))
  module = vvt.models.build(cfg)
  return module, module.init({'params': jax.random.PRNGKey(0)},
                             jnp.zeros((1, 4, 16, 16, 3)), train=False)['params']


def test_weight_decay_mask_on_a_real_model():
  _, params = _tiny_params()
  mask = optimizers.weight_decay_mask(params)
  flat = {'/'.join(str(getattr(k, 'key', k)) for k in path): (m, x)
          for (path, m), x in zip(jax.tree_util.tree_flatten_with_path(mask)[0],
                                  jax.tree.leaves(params), strict=True)}
  names = list(flat)
  assert any('pos_embedding' in n for n in names) and any(n.endswith('cls') for n in names)
  for name, (decay, x) in flat.items():
    leaf = name.split('/')[-1]
    expected = x.ndim > 1 and 'embedding' not in leaf and 'cls' not in leaf
    assert decay == expected, name
  assert sum(d for d, _ in flat.values()) >= 5  # the kernels are decayed


def test_weight_decay_mask_is_the_same_for_scanned_layers():
  """model.scan_layers stacks every layer leaf to (L, *shape): a (L, D) norm scale or bias is still not
  decayed, a (L, D, F) kernel still is (the mask of the stacked tree is the per-layer mask, stacked)."""
  from vvt.models import layout
  _, params = _tiny_params()
  params = {**params, 'encoder': {**params['encoder'], 'layers': {
      'block_0': params['encoder']['layers']['block_0'], 'block_1': params['encoder']['layers']['block_0']}}}
  stacked = layout.to_stacked(params)
  assert layout.layout_of(stacked) == 'stacked'
  per_layer_mask = layout.to_stacked(jax.tree.map(jnp.asarray, optimizers.weight_decay_mask(params)))
  stacked_mask = optimizers.weight_decay_mask(stacked)
  for expected, got in zip(jax.tree.leaves(per_layer_mask), jax.tree.leaves(stacked_mask), strict=True):
    assert bool(expected[0] if expected.ndim else expected) == got
  block = stacked_mask['encoder']['layers']['blocks']['block']
  assert block['mlp_norm']['scale'] is False and block['mlp']['Dense_0']['kernel'] is True


@pytest.mark.parametrize('name', ['sgd', 'adamw'])
def test_weight_decay_applies_only_where_masked(name):
  _, params = _tiny_params()
  sched = optimizers.make_schedule(sched_cfg(name='constant', base_lr=0.1), 10, 10)
  tx = optimizers.make_optimizer(opt_cfg(name=name, weight_decay=0.5, momentum=0.0), sched)
  zeros = jax.tree.map(jnp.zeros_like, params)
  updates, _ = tx.update(zeros, tx.init(params), params)
  new = optax.apply_updates(params, updates)
  mask = optimizers.weight_decay_mask(params)
  for m, old, nw in zip(jax.tree.leaves(mask), jax.tree.leaves(params), jax.tree.leaves(new), strict=True):
    if m:
      np.testing.assert_allclose(nw, old * (1 - 0.1 * 0.5), rtol=1e-5, atol=1e-7)
    else:
      np.testing.assert_array_equal(nw, old)


def test_gradient_clipping_bounds_the_update():
  params = {'w': jnp.ones((4, 4))}
  sched = optimizers.make_schedule(sched_cfg(name='constant', base_lr=1.0), 10, 10)
  tx = optimizers.make_optimizer(opt_cfg(name='sgd', momentum=0.0, grad_clip_norm=0.5), sched)
  grads = {'w': jnp.full((4, 4), 100.0)}
  updates, _ = tx.update(grads, tx.init(params), params)
  assert float(optax.tree.norm(updates)) == pytest.approx(0.5, rel=1e-5)
  small = {'w': jnp.full((4, 4), 0.01)}
  updates, _ = tx.update(small, tx.init(params), params)
  np.testing.assert_allclose(updates['w'], -0.01, rtol=1e-6)


def test_gradient_accumulation_equals_full_batch(tiny_data):
  """4 micro-batches give the same update as one full batch (no dropout, no mixing)."""
  import train_helpers

  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  results = []
  rng = np.random.default_rng(0)
  batch = {'inputs': rng.normal(size=(8, 8, 32, 32, 3)).astype(np.float32),
           'label': rng.integers(0, 8, size=(8,)).astype(np.int32),
           'mask': np.array([1, 1, 1, 1, 1, 1, 0, 1], np.float32)}
  for accum in (1, 4):
    c = train_helpers.tiny_config(tiny_data)
    c.optimizer.accumulation_steps = accum
    c.optimizer.name = 'sgd'
    c.optimizer.momentum = 0.0
    c.schedule.warmup_steps = 0
    c.schedule.name = 'constant'
    mesh = mesh_lib.make_mesh()
    program = program_lib.build_program(run_spec.resolve(c), mesh, num_train_videos=8)  # the trainer's train step
    st = program.init_state(jax.random.PRNGKey(0))
    gb = mesh_lib.global_batch(batch, mesh, 8)
    new, metrics, status = program.training.step(st, gb)
    results.append((jax.device_get(new.params), metrics.compute(), status))
  (p1, m1, s1), (p4, m4, s4) = results
  chex.assert_trees_all_close(p1, p4, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(s1['loss'], s4['loss'], rtol=1e-5)
  np.testing.assert_allclose(m1['loss'], m4['loss'], rtol=1e-5)
  np.testing.assert_allclose(m1['accuracy'], m4['accuracy'])
  # the masked row does not count: the accuracy is a multiple of 1/7
  acc7 = float(m1['accuracy']) * 7
  assert acc7 == pytest.approx(round(acc7), abs=1e-4)


def test_a_step_decay_at_or_after_the_last_step_is_one_line_naming_the_field():
  """Epochs 11 and 14 of 10 steps each are steps 110 and 140: in a run of 140 steps (0 .. 139) the second never
  happens (a recipe shortened by num_train_steps: the trainer warns; a run of epochs is refused,
  tests/config/test_validation.py)."""
  spec = sched_cfg(name='step', decay_epochs=(11, 14))
  assert optimizers.decays_past_end(spec, total_steps=141, steps_per_epoch=10) == ''
  assert optimizers.decays_past_end(spec, total_steps=140, steps_per_epoch=10) == (
      'schedule.decay_epochs=(11.0, 14.0): 14.0 not before the end of the run (140 steps of 10 per epoch), so that '
      'decay never happens')
  assert optimizers.decays_past_end(sched_cfg(name='cosine', decay_epochs=(11, 14)), 10, 10) == ''
