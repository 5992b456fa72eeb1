"""The localisation task: point targets, losses, decoding, and a tiny ActionFormer that learns synthetic events."""
import json
import os

import jax.numpy as jnp
import numpy as np
import pytest

from configs import common
from vvt.config import run_spec
from vvt.data.reading import feature_sequences as fs
from vvt.tasks import localization
from vvt.tasks import localization_options
from vvt.tasks import registry

TINY = dict(max_seq_len=64, embed_dim=32, num_heads=2, window=9, levels=3, stem_layers=1, head_layers=2,
            regression_ranges=((0, 4), (4, 8), (8, 10000)), protocol='thumos14', crop_ratio=(0.9, 1.0))


def synthetic_sequences(root, videos=12, length=64, dim=16, classes=2, seed=0):
  """Sequences with events: noise, plus a class's pattern over each event's steps; -> truth {id: (segs s, labels)}."""
  rng = np.random.default_rng(seed)
  patterns = rng.normal(0, 1, (classes, dim)) * 2.0
  os.makedirs(os.path.join(root, 'sequences'), exist_ok=True)
  index, truth = {}, {}
  for v in range(videos):
    x = rng.normal(0, 0.5, (length, dim)).astype(np.float32)
    segs, labels, t = [], [], int(rng.integers(2, 8))
    while t < length - 6:
      n, c = int(rng.integers(4, 14)), int(rng.integers(0, classes))
      end = min(t + n, length - 1)
      x[t:end] += patterns[c]
      segs.append((0.25 + t * 0.5, 0.25 + end * 0.5))  # step i is centred at 0.25 + 0.5 i seconds
      labels.append(c)
      t = end + int(rng.integers(3, 10))
    np.save(os.path.join(root, 'sequences', f'v{v}.npy'), x)
    index[f'v{v}'] = {'path': f'sequences/v{v}.npy', 'duration': length * 0.5, 'fps': 2.0,
                      'centres': [0.25 + 0.5 * i for i in range(length)]}
    truth[f'v{v}'] = (segs, labels)
  with open(os.path.join(root, 'sequences.json'), 'w') as f:
    json.dump({'window_seconds': 0.5, 'stride_seconds': 0.5, 'feature_dim': dim, 'layers': [-1], 'combine': 'mean',
               'checkpoint': 'synthetic', 'videos': index}, f)
  return truth


def _config(**options):
  c = common.synthetic_config('divided', 'data/synthetic', hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_classes = 2
  c.task.name = 'localization'
  c.task.localization.update(dict(TINY, **options))
  return c


def test_point_targets_follow_center_sampling_and_the_regression_ranges():
  pts = jnp.asarray(localization.points_of(16, 3, ((0, 4), (4, 8), (8, 10000))))
  cls, reg = localization.point_targets(pts, jnp.array([[4.0, 8.0], [0.0, 0.0]]), jnp.array([1, -1]), 2, 1.5)
  cls, reg = np.asarray(cls), np.asarray(reg)
  positive = np.flatnonzero(cls.sum(1))
  # level 0 (stride 1): steps 5..7 are within 1.5 of the centre 6 and inside (4, 8); their largest distance
  # to a boundary (2..3) is in (0, 4); level 1 (stride 2): steps 4, 6, 8 within 3 of 6, inside: 6 (reach 2 < 4: no)
  assert pts[positive, 0].tolist() == [5.0, 6.0, 7.0] and cls[positive, 1].tolist() == [1.0] * 3
  np.testing.assert_allclose(reg[positive], [[1, 3], [2, 2], [3, 1]])


def test_the_diou_loss_is_zero_on_the_target_and_grows_with_the_shift():
  target = jnp.array([[2.0, 2.0]])
  assert float(localization.diou_loss(target, target)[0]) == pytest.approx(0.0, abs=1e-6)
  near, far = (float(localization.diou_loss(jnp.array([[2.0 + d, 2.0 - d]]), target)[0]) for d in (0.5, 1.5))
  assert 0 < near < far


def test_bad_options_are_one_line_each_naming_the_field():
  c = _config(max_seq_len=62, protocol='coco', nms='greedy', regression_ranges=((0, 4), (4, 8)), window=0)
  problems = registry.check_options(c)
  assert any(p.startswith('task.localization.max_seq_len=62 must be a multiple of 2^(levels - 1) = 4')
             for p in problems)
  assert any(p.startswith("task.localization.protocol must be one of 'thumos14', 'activitynet'") for p in problems)
  assert any(p.startswith("task.localization.nms must be one of 'soft'") for p in problems)
  assert 'task.localization.regression_ranges has 2 ranges for 3 pyramid levels' in problems
  assert 'task.localization.window must be a positive int, got 0' in problems
  assert all('\n' not in p for p in problems)
  assert registry.check_options(_config()) == []
  assert [p.split(':')[0] for p in localization_options.start_problems(_config())] == [
      'task.localization.sequences is not set', 'task.localization.annotations is not set']


def test_a_tiny_actionformer_learns_synthetic_events(tmp_path):
  from vvt.train import localization as loc_train
  truth = synthetic_sequences(str(tmp_path))
  train = fs.open_sequences(str(tmp_path), {k: v for k, v in truth.items() if int(k[1:]) < 9})
  test = fs.open_sequences(str(tmp_path), {k: v for k, v in truth.items() if int(k[1:]) >= 9})
  c = _config()
  c.batch_size, c.num_train_steps, c.seed = 4, 120, 0
  c.optimizer.update(name='adamw', weight_decay=0.05, grad_clip_norm=1.0)
  c.schedule.update(base_lr=3e-3, warmup_steps=10)
  run = run_spec.resolve(c)
  assert run.task.localization.max_seq_len == 64
  _, result, agg = loc_train.fit(run, train, test, log=None, class_names=['a', 'b'])
  assert result['protocol'] == 'thumos14' and sorted(k for k in result if k.startswith('map@')) == [
      'map@0.3', 'map@0.4', 'map@0.5', 'map@0.6', 'map@0.7']
  assert result['map@0.5'] > 0.7 and result['average_map'] > 0.6, result
  assert agg.per_class_csv().splitlines()[0] == 'class,segments,ap@0.3,ap@0.4,ap@0.5,ap@0.6,ap@0.7,average'
