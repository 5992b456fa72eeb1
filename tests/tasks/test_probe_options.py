"""The probe task's options, checked by its `check` hook in the config's one-run list of problems (no JAX): the
grid's values, the attentive pooler, a backbone to read and what it is; the best probe of a tie."""
import os
import subprocess
import sys

import pytest

from configs import common
from tests.conftest import REPO
from vvt.config import validation
from vvt.convert import init_options
from vvt.tasks import base
from vvt.tasks import probe_options
from vvt.tasks import registry


def _config(**probe):
  c = common.synthetic_config('divided', 'data/synthetic', hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_classes = 3
  c.task.name = 'probe'
  for k, v in probe.items():
    c.task.probe[k] = v
  return c


def test_every_bad_probe_option_is_a_line_of_the_configs_one_run_list():
  c = _config(lrs=(1e-3, 'fast', -0.1), weight_decays=(0.0, -0.05), head='attentive', num_queries=0, num_heads=0)
  c.optimizer.layer_decay = 0.75
  c.schedule.base_lr = -1.0  # a run-level problem: in the same list
  lines = validation.problems(c)
  assert lines == [
      'schedule.base_lr must be positive, got -1.0',
      "task.probe.lrs[1] must be a number > 0 (a learning rate), got 'fast'",
      'task.probe.lrs[2] must be a number > 0 (a learning rate), got -0.1',
      'task.probe.weight_decays[1] must be a number >= 0 (a weight decay), got -0.05',
      'task.probe.num_queries must be >= 1 for an attentive probe (its learned query tokens), got 0',
      'task.probe.num_heads must be >= 1 for an attentive probe (its attention heads), got 0',
      'optimizer.layer_decay=0.75: a probe run trains no backbone layer: leave it at 1']
  # with the files a training run starts from (the loader adds them to the same list)
  assert validation.missing_files(c) == [
      'task.probe.backbone is not set: the probes would read the features of a randomly initialised backbone; set '
      "it to the backbone's weights (a vvt run or converted folder, a `vvt export` .safetensors file or a Hugging "
      'Face model folder), or give `vvt train --init CHECKPOINT`']


def test_a_probe_config_with_a_backbone_is_valid_and_init_from_is_one(tmp_path):
  (tmp_path / 'checkpoints').mkdir()
  c = _config(backbone=str(tmp_path))  # a params folder
  assert validation.problems(c) == [] and validation.missing_files(c) == []
  assert validation.problems(_config()) == []  # no backbone: a problem of the files a training run starts from only
  weights = tmp_path / 'weights.safetensors'
  weights.write_bytes(b'')
  c = _config()
  c.init_from = init_options.get_config(checkpoint=str(weights), format='vvt')
  assert validation.problems(c) == [] and validation.missing_files(c) == []


def test_the_grid_fields_take_tuples_of_numbers_only():
  assert probe_options.option_problems(dict(base='classification', head='linear', lrs='fast', weight_decays=())) == [
      "task.probe.lrs must be a tuple of learning rates, got 'fast'",
      'task.probe.weight_decays is empty: the grid of probes needs at least one weight decay']


@pytest.mark.parametrize('make,message', [
    (lambda d: d / 'missing', 'no such file or folder'),
    (lambda d: d / 'notes.txt', 'expected a vvt run folder, a .safetensors file'),
    (lambda d: d / 'empty', 'the folder has no config.json'),
    (lambda d: d / 'bert', "config.json has model_type='bert'; vvt converts"),
    (lambda d: d / 'broken', 'broken/config.json: not JSON (Expecting value'),
])
def test_a_backbone_that_is_not_weights_is_refused_naming_the_field(tmp_path, make, message):
  (tmp_path / 'notes.txt').write_text('x')
  (tmp_path / 'empty').mkdir()
  for name, text in (('bert', '{"model_type": "bert"}'), ('broken', '{"model_type": ')):
    (tmp_path / name).mkdir()
    (tmp_path / name / 'config.json').write_text(text)
  path = str(make(tmp_path))
  (line,) = validation.missing_files(_config(backbone=path))
  assert line.startswith(f'task.probe.backbone {path}') and message in line


def test_validating_a_probe_config_imports_no_jax():
  code = ('import sys; from configs import common; from vvt.config import validation\n'
          "c = common.synthetic_config('divided', 'data/synthetic'); c.num_classes = 3; c.task.name = 'probe'\n"
          "c.task.probe.lrs = (-1.0,)\n"
          'lines = validation.problems(c) + validation.missing_files(c)\n'
          "assert any(l.startswith('task.probe.lrs[0]') for l in lines), lines\n"
          'from vvt.tasks import registry\n'
          'hooks = [registry.hooks_named(n) for n in registry.TASKS]\n'
          "assert 'jax' not in sys.modules and 'flax' not in sys.modules, 'jax imported'\n")
  env = dict(os.environ, PYTHONPATH=str(REPO))
  done = subprocess.run([sys.executable, '-c', code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
  assert done.returncode == 0, done.stderr


def test_a_task_without_options_has_no_problems_and_every_hook_is_jax_free_and_registered():
  assert registry.check_options(_config(lrs=())) == ['task.probe.lrs is empty: the grid of probes needs at least '
                                                      'one learning rate']  # the probe's hook
  c = _config(lrs=())
  c.task.name = 'classification'
  assert registry.check_options(c) == []
  assert set(registry.HOOKS) == set(registry.TASKS)
  assert all(isinstance(registry.hooks_named(n), base.ConfigHooks) for n in registry.TASKS)


def test_of_tied_probes_the_smaller_lr_then_the_smaller_weight_decay_wins():
  from vvt.tasks import probe
  rows = [('probe_0', 0.1, 0.0, 0.5), ('probe_1', 0.1, 0.5, 0.75), ('probe_2', 0.01, 0.5, 0.75),
          ('probe_3', 0.01, 0.1, 0.75), ('probe_4', 0.001, 0.0, float('nan'))]
  table = [dict(probe=n, lr=lr, weight_decay=wd, m=m) for n, lr, wd, m in rows]
  assert probe.best_of(table, 'm') == ('probe_3', ('probe_2', 'probe_1'))
  assert probe.best_of(table[:1], 'm') == ('probe_0', ())
