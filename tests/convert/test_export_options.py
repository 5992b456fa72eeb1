"""`vvt export --workdir` refuses what it would ignore: `--config` / `--config.FIELD` (the checkpoint is written as its
run saved it), and an --output folder holding another model's files (they would stay beside the new model). One
line, exit 2, nothing written; a folder holding only a previous export is replaced."""
import json

import pytest

from tests.convert.test_export_fidelity import _model
from tests.convert.test_export_fidelity import _run
from vvt.cli import main as vvt_main


@pytest.fixture
def run(tmp_path):
  cfg, params = _model()
  return _run(tmp_path / 'run', params, cfg, dict(name='classification'))


@pytest.mark.parametrize('fmt', ['safetensors', 'hf'])
def test_overrides_are_refused_not_ignored(run, tmp_path, capsys, fmt):
  out = tmp_path / ('hf' if fmt == 'hf' else 'w.safetensors')
  code = vvt_main(['export', '--workdir', str(run), '--format', fmt, '--output', str(out),
                   '--config.model.num_classes=3'])
  assert code == 2
  assert capsys.readouterr().err.strip() == (
      'vvt export: error: --config.model.num_classes=3: vvt export --workdir writes the checkpoint as its run saved '
      'it; --config and --config.FIELD apply to --import only')
  assert not out.exists()


def test_a_folder_holding_another_model_is_refused_and_left_as_it_was(run, tmp_path, capsys):
  out = tmp_path / 'hf'
  out.mkdir()
  other = {'config.json': '{"model_type": "videomae"}', 'preprocessor_config.json': '{"image_mean": [0.5, 0.5, 0.5]}'}
  for name, text in other.items():
    (out / name).write_text(text)
  assert vvt_main(['export', '--workdir', str(run), '--format', 'hf', '--output', str(out)]) == 2
  assert capsys.readouterr().err.strip() == (
      f'vvt export: error: cannot export to Hugging Face: {out} holds files the export does not write '
      '(preprocessor_config.json): they would stay beside the new config.json and model.safetensors as if of this '
      'model; choose a new or empty folder')
  assert {p.name: p.read_text() for p in out.iterdir()} == other


def test_a_previous_export_is_replaced(run, tmp_path):
  out = tmp_path / 'hf'
  assert vvt_main(['export', '--workdir', str(run), '--format', 'hf', '--output', str(out)]) == 0
  (out / 'config.json').write_text(json.dumps({'model_type': 'timesformer', 'stale': True}))
  assert vvt_main(['export', '--workdir', str(run), '--format', 'hf', '--output', str(out)]) == 0
  assert 'stale' not in json.loads((out / 'config.json').read_text())
  assert sorted(p.name for p in out.iterdir()) == ['config.json', 'model.safetensors']
