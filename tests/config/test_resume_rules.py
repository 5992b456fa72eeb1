"""The resume rules (vvt.config.resume): a change that alters what the run learns is refused naming the fields
(one line), unless allow_config_change; safe changes (the mesh, evaluation) are logged. Resuming a workdir with
them: tests/train/test_resume_config.py."""
import json
import sys

import pytest

from tests.conftest import REPO
from vvt.config import resume
from vvt.config import run_file
from vvt.config.errors import ConfigError

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import train_helpers as common  # noqa: E402


def values(config) -> dict:
  """The JSON values of a config, as a run hands them to the resume check (its RunSpec's `config_values`)."""
  return json.loads(run_file.as_json(config))


def test_refusal_names_a_few_fields_and_a_shared_field_once():
  saved = common.tiny_config('unused')
  c = common.tiny_config('unused')
  c.batch_size, c.image_size, c.model.hidden_size, c.seed = 16, 64, 48, 3
  c.eval.every_steps = 5  # safe: not named
  c = values(c)
  with pytest.raises(ConfigError) as err:
    resume.check_resume(saved, c, log=lambda *a: None)
  msg = str(err.value)
  assert 'in 4 field(s)' in msg and '(+1 more)' in msg and 'eval.every_steps' not in msg
  assert 'batch_size: 8 -> 16' in msg and 'image_size: 32 -> 64' in msg
  assert 'model.image_size' not in msg and 'dataset.image_size' not in msg
  assert resume.check_resume(saved, c, allow_config_change=True, log=lambda *a: None)
  assert resume.check_resume(None, c) == []  # no saved config.json (older runs): nothing to check


def test_a_new_mesh_is_safe_on_resume():
  """A checkpoint restores onto another mesh (e.g. trained on fsdp=8, resumed on 1 device)."""
  saved = common.tiny_config('unused')
  c = common.tiny_config('unused')
  c.mesh.axes = {'data': 1, 'fsdp': -1}
  c.mesh.num_devices = 1
  lines = []
  changes = resume.check_resume(saved, values(c), log=lines.append)
  assert changes and all(k.startswith('mesh.') for k, _, _ in changes), changes
  assert ('mesh.num_devices', -1, 1) in changes
  assert all('(safe)' in l for l in lines), lines
