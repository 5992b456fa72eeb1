"""The probe task: the grid of probes, the frozen backbone (no gradient, no optimiser state, bytes unchanged by
an update), each probe's own learning rate and weight decay, features shared by the probes, the results table."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import common
from tests import specs
from vvt.train import optimizers


def _config(head='linear', **probe):
  c = common.synthetic_config('divided', 'data/synthetic', hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_classes, c.num_frames, c.image_size = 3, 4, 16
  c.model.num_frames, c.model.image_size = 4, 16
  c.task.name, c.task.probe.head, c.task.probe.num_heads = 'probe', head, 2
  c.task.probe.lrs, c.task.probe.weight_decays = (0.1, 0.001), (0.0, 0.5)
  c.optimizer.name, c.optimizer.weight_decay, c.schedule.name, c.schedule.base_lr = 'adamw', 0.0, 'constant', 0.01
  c.schedule.warmup_steps, c.schedule.warmup_epochs = 0, 0.0
  for k, v in probe.items():
    c.task.probe[k] = v
  return c


def _init(task, c):
  """(module, params, video (2, 4, 16, 16, 3)): params of the shapes init gives, drawn with numpy (N(0, 0.1)):
  no program is compiled to make them (the tests read gradients, updates and programs, whatever the values)."""
  module = task.build_model(specs.run_spec(c).model)
  rng = np.random.default_rng(1)
  video = rng.uniform(size=(2, 4, 16, 16, 3)).astype(np.float32)
  shapes = jax.eval_shape(lambda v: module.init({'params': jax.random.PRNGKey(0)}, v, train=False)['params'], video)
  return module, jax.tree.map(lambda s: rng.normal(0, 0.1, s.shape).astype(s.dtype), shapes), video


def test_the_grid_is_every_lr_with_every_weight_decay():
  task = specs.task_for(_config())
  assert task.settings == ((0.1, 0.0), (0.1, 0.5), (0.001, 0.0), (0.001, 0.5))
  assert task.heads == {'probe_0': 3, 'probe_1': 3, 'probe_2': 3, 'probe_3': 3} and task.main_metric == 'video_top1'


@pytest.mark.parametrize('field,value', [('head', 'mlp'), ('base', 'detection'), ('lrs', ())])
def test_a_bad_probe_setting_is_one_line_naming_the_field(field, value):
  with pytest.raises(ValueError, match=f'task.probe.{field}'):
    specs.task_for(_config(**{field: value}))


def test_layer_decay_is_refused_for_probes():
  c = _config()
  c.optimizer.layer_decay = 0.75
  with pytest.raises(ValueError, match='optimizer.layer_decay'):
    specs.task_for(c)


@pytest.mark.parametrize('head', ['linear', 'attentive'])
def test_the_backbone_is_frozen_and_each_probe_has_its_own_optimiser(head):
  c = _config(head, depth=1)
  task = specs.task_for(c)
  module, params, video = _init(task, c)
  assert set(params['probes']) == set(task.names)
  labels = jnp.array([0, 2])

  def loss(p):
    outputs = task.outputs(module, p, video, train=True, rng=jax.random.PRNGKey(2))
    assert set(outputs) == set(task.names) and all(o.shape == (2, 3) for o in outputs.values())
    return jnp.mean(task.loss(outputs, task.prepare({'label': labels}, video, None)[1]))

  grads = jax.jit(jax.grad(loss))(params)  # jitted: one program instead of each operation compiled on its own
  backbone = {k: v for k, v in grads.items() if k != 'probes'}
  grads = jax.tree.map(np.asarray, grads)  # the checks below in numpy: no program compiled per leaf shape
  assert all(np.abs(g).max() == 0.0 for g in jax.tree.leaves(backbone))  # no gradient reaches it
  assert all(np.abs(g).max() > 0 for g in jax.tree.leaves(grads['probes']))
  run = specs.run_spec(c)
  schedule = optimizers.make_schedule(run.schedule, 10, 10)
  tx = task.optimizer(optimizers.make_optimizer, run.optimizer, schedule)
  state = jax.jit(tx.init)(params)
  n_state = sum(x.size for x in jax.tree.leaves(state))
  n_probes = sum(x.size for x in jax.tree.leaves(params['probes']))
  assert n_state <= 2 * n_probes + 4 * len(task.names)  # Adam's two moments of the probes (and counts) only
  updates, _ = jax.jit(tx.update)(grads, state, params)
  updates = jax.tree.map(np.asarray, updates)
  new = jax.tree.map(lambda p, u: p + u, params, updates)  # float32 numpy adds: IEEE, as XLA's
  for k in params:
    if k != 'probes':
      for a, b in zip(jax.tree.leaves(params[k]), jax.tree.leaves(new[k]), strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
  # Adam's first step moves each weight by about lr (the sign of its gradient), plus lr * wd * weight
  for name, (lr, wd) in zip(task.names, task.settings, strict=True):
    p, u, g = (t['probes'][name]['output_projection']['kernel'] for t in (params, updates, grads))
    expected = -lr * (np.sign(g) * (np.abs(g) > 1e-6) + wd * p)
    np.testing.assert_allclose(u, expected, atol=lr * 1e-2)


def test_the_features_are_computed_once_for_all_probes():
  c = _config()
  task = specs.task_for(c)
  module, params, video = _init(task, c)
  jaxpr = str(jax.make_jaxpr(lambda p: task.outputs(module, p, video, train=False))(params))
  one = specs.task_for(_config(lrs=(0.1,), weight_decays=(0.0,)))
  m1, p1, _ = _init(one, c)
  jaxpr1 = str(jax.make_jaxpr(lambda p: one.outputs(m1, p, video, train=False))(p1))
  # 3 more probes add 3 linear heads (one dot each), not 3 more backbones
  assert jaxpr.count('dot_general') - jaxpr1.count('dot_general') == 3


def test_the_results_name_the_best_probe():
  task = specs.task_for(_config())
  agg = task.aggregator(4)
  labels = np.array([0, 1, 2, 0])
  good = np.eye(3)[labels] * 5.0
  scores = {n: (good if n == 'probe_2' else np.roll(good, 1, axis=1)) for n in task.names}
  agg.add(scores, np.arange(4), np.ones(4), {'': labels})
  res = agg.result()
  assert res['best_probe'] == 'probe_2' and res['video_top1'] == 1.0
  assert [(r['probe'], r['lr'], r['weight_decay'], r['video_top1']) for r in res['probes']] == [
      ('probe_0', 0.1, 0.0, 0.0), ('probe_1', 0.1, 0.5, 0.0), ('probe_2', 0.001, 0.0, 1.0),
      ('probe_3', 0.001, 0.5, 0.0)]
  files = dict(agg.report_files('/tmp/x/P'))
  assert files['/tmp/x/P_probes.csv'].splitlines()[3] == 'probe_2,0.001,0.0,1.000000'
