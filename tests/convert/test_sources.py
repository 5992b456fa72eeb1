"""One record per converter source (`vvt.convert.sources`): every record names what exists, and a source added as
one module and one entry is taken everywhere a source is: `vvt convert` (its --help table and choices, the
conversion, the refusal its record says), `vvt train --init` (its folders' model_type, its normalisation) and the
export's targets. The toy source's module is this file (its `convert_for`); its folder is written with NumPy."""
import dataclasses
import importlib
import json

import pytest

from tests.conftest import REPO
from tests.convert import test_class_names
from vvt.cli import convert as convert_cli
from vvt.cli import finetune
from vvt.cli import main as vvt_main
from vvt.convert import hf_export
from vvt.convert import hf_vivit
from vvt.convert import init_options
from vvt.convert import sources
from vvt.convert import video
from vvt.convert import weight_files
from vvt.data import choices

TOY = 'hf_toyvit'


def convert_for(state, ask):
  """The toy source's reader: a ViViT whose folders say model_type 'toyvit'."""
  return hf_vivit.convert_for(state, dataclasses.replace(ask, hf_config={**ask.hf_config, 'model_type': 'vivit'}))


@pytest.fixture
def toy(monkeypatch):
  record = sources.Record(TOY, f'{__name__}:convert_for', 'configs/synthetic.py', 'a toy source of the tests',
                          safetensors_only=True, model_types=('toyvit',), normalization='zero_centre')
  monkeypatch.setitem(sources.SOURCES, TOY, record)
  return record


def _toy_folder(path):
  folder = test_class_names.write_hf_folder(path, {'0': 'a', '1': 'b', '2': 'c'}, 3)
  config = json.loads((folder / 'config.json').read_text())
  (folder / 'config.json').write_text(json.dumps({**config, 'model_type': 'toyvit'}))
  return folder


def test_every_record_names_what_exists():
  types = [t for s in sources.SOURCES.values() for t in s.model_types]
  assert len(types) == len(set(types))
  for s in sources.SOURCES.values():
    assert callable(sources._function(s.reader)), s.name
    assert (REPO / s.base_config).is_file(), s.name
    assert s.normalization in (None, *choices.NORMALIZATIONS), s.name
    assert s.hf_folder == s.name.startswith('hf_'), s.name
    for t in s.exports:
      module = importlib.import_module(t.module)
      assert t.hf_class.endswith(('ClipModel', 'PeVideoModel') if t.text else 'ForVideoClassification') and callable(
          module.to_hf), s.name
  assert hf_export.TARGETS == sources.targets() and len(sources.targets()) == 8
  assert set(hf_export.NO_CLASS) == {'space'}


def test_a_source_is_one_module_and_one_entry(toy, tmp_path, capsys):
  folder = _toy_folder(tmp_path / 'toy')
  assert f'  {TOY:<15} configs/synthetic.py\n  {"":<15}   a toy source of the tests' in convert_cli.base_configs_help()
  with pytest.raises(SystemExit):
    vvt_main(['convert', '--help'])
  assert TOY in capsys.readouterr().out
  converted = video.convert(TOY, str(folder))
  assert converted.model_fields['num_classes'] == 3 and converted.model_fields['num_frames'] == 4
  assert finetune.kind_of(str(folder)) == TOY
  assert finetune._hf_normalization(str(folder), TOY) == 'zero_centre'
  pickled = tmp_path / 'pickled'
  pickled.mkdir()
  (pickled / 'config.json').write_text((folder / 'config.json').read_text())
  (pickled / 'pytorch_model.bin').write_bytes(b'not read')
  with pytest.raises(weight_files.WeightFileError, match=f'pytorch_model.bin: {TOY} reads safetensors only'):
    video.convert(TOY, str(pickled))


def test_a_folder_of_each_model_type_is_its_sources_for_init_and_the_probe_backbone(tmp_path):
  """Every model_type of the records (transformers' VideoPrismVisionModel, and `vvt export --format hf` of a
  VideoPrism model, write 'videoprism_vision_model', which hf_videoprism reads) is taken by `--init` and
  task.probe.backbone as its source's folder; another is refused naming those."""
  for s in sources.SOURCES.values():
    for model_type in s.model_types:
      folder = tmp_path / model_type
      folder.mkdir()
      (folder / 'config.json').write_text(json.dumps({'model_type': model_type}))
      assert finetune.kind_of(str(folder)) == s.name
      assert init_options.source_kind(str(folder), 'task.probe.backbone') == s.name
  (tmp_path / 'bert').mkdir()
  (tmp_path / 'bert' / 'config.json').write_text(json.dumps({'model_type': 'bert'}))
  with pytest.raises(ValueError, match="model_type='bert'; vvt converts timesformer, vivit, videomae, vjepa2, "
                                       'videoprism_vision_model, videoprism'):
    init_options.source_kind(str(tmp_path / 'bert'))
