"""A finished probe trial re-met by its sweep: the run's config names its converted copy of the backbone
(WORKDIR/init/weights.safetensors), which is the same weights as the source the sweep names, not a change."""
import copy
import os
import types

import numpy as np
from safetensors.numpy import save_file

from experiments import pretrain_probe
from vvt.cli import finetune
from vvt.cli import sweep as sweep_cli
from vvt.config import run_file

TRIAL = 'backbone=mae,seed=0'


def _finished_trial(source: str, recorded_source: str):
  """A probe config on the backbone `source`, and a trial folder whose saved config names its own copy of the
  weights of `recorded_source` (as `vvt train` leaves a probe run)."""
  config = pretrain_probe.get_config('probe,pretrained=pre')
  config.task.probe.backbone = source
  trial_dir = os.path.join('sweep', TRIAL)
  weights = os.path.join(trial_dir, finetune.INIT_FILE)
  os.makedirs(os.path.dirname(weights))
  save_file({'x': np.zeros(1, np.float32)}, weights, metadata={'init_source': os.path.abspath(recorded_source)})
  saved = copy.deepcopy(config)
  saved.task.probe.backbone = weights
  run_file.write(trial_dir, run_file.as_json(saved))
  return config


def _warnings(config) -> list:
  lines = []
  sweep_cli._warn_changed('sweep', types.SimpleNamespace(name=TRIAL), config, lines.append)
  return lines


def test_the_trials_own_copy_of_its_backbone_is_no_change(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert _warnings(_finished_trial('pre/start=mae,seed=0', 'pre/start=mae,seed=0')) == []


def test_a_copy_of_another_backbone_is_a_change(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  lines = _warnings(_finished_trial('pre/start=random,seed=0', 'pre/start=mae,seed=0'))
  assert len(lines) == 1
  assert "task.probe.backbone: 'sweep/backbone=mae,seed=0/init/weights.safetensors' -> 'pre/start=random,seed=0'" \
      in lines[0]
