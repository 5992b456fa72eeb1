"""Resuming a workdir with a changed config: a change that alters what the run learns is refused
naming the fields (one line), unless allow_config_change; safe changes go on; both are logged and
config.json is rewritten (the rules themselves: tests/config/test_resume_rules.py)."""
import json
import shutil

import chex
import jax
import pytest
import train_helpers as common

from vvt.config import run_spec
from vvt.config.errors import ConfigError
from vvt.models import layout
from vvt.train import checkpoints
from vvt.train import model_state
from vvt.train import trainer


@pytest.fixture(scope='module')
def checkpointed(tiny_data, tmp_path_factory):
  """A workdir with a training-state checkpoint at step 1 and its config.json."""
  wd = tmp_path_factory.mktemp('resume_config') / 'run'
  c = common.tiny_config(tiny_data)
  c.checkpoint.every_steps = 1
  trainer.train_and_evaluate(run_spec.resolve(c), str(wd), log=lambda *a, **k: None, stop_after_step=1)
  assert checkpoints.all_steps(str(wd)) == [1]
  return wd


def _resume(checkpointed, tmp_path, config, **kwargs):
  """Resumes a copy of the checkpointed run for one step -> (result, log lines, workdir)."""
  wd = tmp_path / 'run'
  shutil.copytree(checkpointed, wd)
  lines = []
  res = trainer.train_and_evaluate(run_spec.resolve(config), str(wd), log=lines.append, stop_after_step=2, **kwargs)
  return res, lines, wd


def _saved(wd):
  with open(wd / 'config.json') as f:
    return json.load(f)


def test_changed_learning_rate_is_refused_naming_the_field(checkpointed, tiny_data, tmp_path):
  c = common.tiny_config(tiny_data)
  c.schedule.base_lr = 0.01
  with pytest.raises(ConfigError) as err:
    _resume(checkpointed, tmp_path, c)
  msg = str(err.value)
  assert 'schedule.base_lr: 0.001 -> 0.01' in msg and '--allow_config_change' in msg
  assert '\n' not in msg
  wd = tmp_path / 'run'
  assert _saved(wd)['schedule']['base_lr'] == 0.001  # nothing rewritten, nothing trained
  assert checkpoints.all_steps(str(wd)) == [1]


def test_changed_eval_batch_size_is_allowed_and_logged(checkpointed, tiny_data, tmp_path):
  c = common.tiny_config(tiny_data)
  c.eval.batch_size = 32
  res, lines, wd = _resume(checkpointed, tmp_path, c)
  assert res['step'] == 2 and res['stopped_early']
  assert any('resumed from' in l for l in lines)
  assert any('(safe): eval.batch_size: 16 -> 32' in l for l in lines), lines
  assert _saved(wd)['eval']['batch_size'] == 32


def test_allow_config_change_resumes_with_the_new_learning_rate(checkpointed, tiny_data, tmp_path):
  c = common.tiny_config(tiny_data)
  c.schedule.base_lr = 0.01
  res, lines, wd = _resume(checkpointed, tmp_path, c, allow_config_change=True)
  assert res['step'] == 2 and res['stopped_early']
  assert any('(allowed): schedule.base_lr: 0.001 -> 0.01' in l for l in lines), lines
  assert _saved(wd)['schedule']['base_lr'] == 0.01


def test_switching_scan_layers_on_resume_restores_into_the_other_layout(checkpointed, tiny_data, tmp_path):
  """A per-layer checkpoint resumes with model.scan_layers=True (params and optimiser state restored stacked)
  and takes the step the per-layer resume takes; the scanned run's stacked checkpoint resumes per layer."""
  def config(scan):
    c = common.tiny_config(tiny_data)
    c.checkpoint.every_steps, c.model.scan_layers = 1, scan
    return c

  _, _, wd_plain = _resume(checkpointed, tmp_path / 'plain', config(False))
  c = config(True)
  res, lines, wd = _resume(checkpointed, tmp_path / 'scan', c)
  assert res['step'] == 2 and any('resumed from' in l for l in lines)
  assert any('(safe): model.scan_layers: False -> True' in l for l in lines), lines
  scanned, _ = checkpoints.load_params(str(wd), 2)  # no target: the step's own layout
  plain, _ = checkpoints.load_params(str(wd_plain), 2)
  assert layout.layout_of(scanned) == 'stacked' and layout.layout_of(plain) == 'per_layer'
  # a step of a scanned and of a per-layer program: other fusions, float32 rounding only (> 10x margin)
  chex.assert_trees_all_close(layout.to_per_layer(scanned), plain, rtol=1e-5, atol=1e-6)
  # what `vvt eval` does: the per-layer step restored into a scanned model's sharded params
  run = run_spec.resolve(c)
  module, clip = model_state.build_model(run.model), model_state.ClipShape.of(run)
  mesh = trainer.make_mesh(run)
  target = model_state.abstract_params(module, clip, model_state.param_shardings(module, clip, mesh, run.mesh))
  restored, _ = checkpoints.load_params(str(wd_plain), 2, target)
  assert jax.tree.structure(restored) == jax.tree.structure(target)
  chex.assert_trees_all_equal(layout.to_per_layer(restored), plain)
  assert all(r.sharding == t.sharding for r, t in zip(jax.tree.leaves(restored), jax.tree.leaves(target), strict=True))

  lines = []
  res = trainer.train_and_evaluate(run_spec.resolve(config(False)), str(wd), log=lines.append, stop_after_step=3)
  assert res['step'] == 3 and any('(safe): model.scan_layers: True -> False' in l for l in lines), lines
  assert layout.layout_of(checkpoints.load_params(str(wd), 3)[0]) == 'per_layer'


def test_config_saved_before_newer_fields_resumes_unchanged(checkpointed, tiny_data, tmp_path):
  """A config.json written before a model, dataset or optimizer field existed reads back with that
  field's default, so resuming with today's config sees no change."""
  wd = tmp_path / 'old_run'
  shutil.copytree(checkpointed, wd)
  saved = _saved(wd)
  for section, field in (('model', 'pooling'), ('model', 'key_bias'), ('dataset', 'autoaugment'),
                         ('optimizer', 'ema_decay')):
    del saved[section][field]
  (wd / 'config.json').write_text(json.dumps(saved))
  c = common.tiny_config(tiny_data)
  c.checkpoint.every_steps = 1  # as the checkpointed run
  lines = []
  res = trainer.train_and_evaluate(run_spec.resolve(c), str(wd), log=lines.append, stop_after_step=2)
  assert res['step'] == 2
  assert not [l for l in lines if 'config change' in l], lines
