"""Resuming a workdir with a changed config: a change that alters what the run learns is refused
naming the fields (one line), unless allow_config_change; safe changes go on; both are logged and
config.json is rewritten."""
import json
import shutil

import pytest

import train_helpers as common
from vvt.train import checkpoints, defaults, run_config, trainer


@pytest.fixture(scope='module')
def checkpointed(tiny_data, tmp_path_factory):
  """A workdir with a training-state checkpoint at step 1 and its config.json."""
  wd = tmp_path_factory.mktemp('resume_config') / 'run'
  c = common.tiny_config(tiny_data)
  c.checkpoint.every_steps = 1
  trainer.train_and_evaluate(c, str(wd), log=lambda *a, **k: None, stop_after_step=1)
  assert checkpoints.all_steps(str(wd)) == [1]
  return wd


def _resume(checkpointed, tmp_path, config, **kwargs):
  """Resumes a copy of the checkpointed run for one step -> (result, log lines, workdir)."""
  wd = tmp_path / 'run'
  shutil.copytree(checkpointed, wd)
  lines = []
  res = trainer.train_and_evaluate(config, str(wd), log=lines.append, stop_after_step=2, **kwargs)
  return res, lines, wd


def _saved(wd):
  with open(wd / 'config.json') as f:
    return json.load(f)


def test_changed_learning_rate_is_refused_naming_the_field(checkpointed, tiny_data, tmp_path):
  c = common.tiny_config(tiny_data)
  c.schedule.base_lr = 0.01
  with pytest.raises(defaults.ConfigError) as err:
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


def test_refusal_names_a_few_fields_and_a_shared_field_once(tiny_data):
  saved = common.tiny_config(tiny_data)
  c = common.tiny_config(tiny_data)
  c.batch_size, c.image_size, c.model.hidden_size, c.seed = 16, 64, 48, 3
  c.eval.every_steps = 5  # safe: not named
  with pytest.raises(defaults.ConfigError) as err:
    run_config.check_resume(saved, c, log=lambda *a: None)
  msg = str(err.value)
  assert 'in 4 field(s)' in msg and '(+1 more)' in msg and 'eval.every_steps' not in msg
  assert 'batch_size: 8 -> 16' in msg and 'image_size: 32 -> 64' in msg
  assert 'model.image_size' not in msg and 'dataset.image_size' not in msg
  assert run_config.check_resume(saved, c, allow_config_change=True, log=lambda *a: None)
  assert run_config.check_resume(None, c) == []  # no saved config.json (older runs): nothing to check


def test_a_new_mesh_is_safe_on_resume(tiny_data):
  """A checkpoint restores onto another mesh (e.g. trained on fsdp=8, resumed on 1 device)."""
  saved = common.tiny_config(tiny_data)
  c = common.tiny_config(tiny_data)
  c.mesh.axes = {'data': 1, 'fsdp': -1}
  c.mesh.num_devices = 1
  lines = []
  changes = run_config.check_resume(saved, c, log=lines.append)
  assert changes and all(k.startswith('mesh.') for k, _, _ in changes), changes
  assert ('mesh.num_devices', -1, 1) in changes
  assert all('(safe)' in l for l in lines), lines
