"""A Hugging Face folder whose config.json is not JSON, holds a list, or is missing: `vvt convert` and
`vvt train --init` (one reader, `vvt.convert.hf_folder`) refuse it in one line naming config.json and what is
wrong, exit 2, and write nothing."""
import json
import shutil

import pytest

from tests.conftest import REPO
from vvt.cli import main as vvt_main

transformers = pytest.importorskip('transformers')

CONFIG = str(REPO / 'configs/kinetics400/timesformer_b.py')
BROKEN = {  # case -> (what config.json holds (None: no file), what the line says after the file's name)
    'not_json': ('', ': not JSON (Expecting value: line 1 column 1 (char 0))'),
    'a_list': ('[["model_type", "videomae"]]', ': a JSON list, not an object of config fields'),
    'missing': (None, ": the folder has no config.json (a Hugging Face model folder holds the model's config.json "
                      'beside its weights)'),
}


@pytest.fixture(scope='module')
def videomae(tmp_path_factory):
  """A tiny random-init VideoMAEForVideoClassification saved with save_pretrained."""
  cfg = transformers.VideoMAEConfig(image_size=16, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                                    num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, num_labels=3)
  folder = tmp_path_factory.mktemp('videomae') / 'hf'
  transformers.VideoMAEForVideoClassification(cfg).save_pretrained(folder)
  return folder


def _broken(videomae, tmp_path, case):
  folder = tmp_path / case
  shutil.copytree(videomae, folder)
  text, _ = BROKEN[case]
  if text is None:
    (folder / 'config.json').unlink()
  else:
    (folder / 'config.json').write_text(text)
  return folder


@pytest.mark.parametrize('case', sorted(BROKEN))
def test_convert_refuses_a_broken_config_naming_it(videomae, tmp_path, capsys, case):
  folder = _broken(videomae, tmp_path, case)
  out = tmp_path / 'out'
  code = vvt_main(['convert', '--source', 'hf_videomae', '--checkpoint', str(folder), '--config', CONFIG,
                   '--output', str(out)])
  err = capsys.readouterr().err.strip()
  named = str(folder) if case == 'missing' else str(folder / 'config.json')
  assert code == 2, err
  assert err == f'vvt convert: error: {named}{BROKEN[case][1]}', err
  assert not out.exists()


def test_convert_of_the_intact_folder_works(videomae, tmp_path):
  """The control: the same folder, its config.json intact, converts."""
  assert vvt_main(['convert', '--source', 'hf_videomae', '--checkpoint', str(videomae), '--config', CONFIG,
                   '--output', str(tmp_path / 'out')]) == 0


def test_init_reads_the_config_through_the_same_reader(videomae, tmp_path, capsys):
  folder = _broken(videomae, tmp_path, 'a_list')
  wd = tmp_path / 'run'
  code = vvt_main(['train', '--config', CONFIG, '--init', str(folder), '--workdir', str(wd)])
  err = capsys.readouterr().err.strip()
  assert code == 2, err
  # among the config's other problems (its data files are not here), in the same one-run list
  assert f'vvt train: error: --init {folder / "config.json"}{BROKEN["a_list"][1]}' in err.splitlines(), err
  assert not wd.exists()


def test_init_takes_the_normalisation_of_a_video_preprocessor_config(videomae, tmp_path):
  """transformers 5's video processors write video_preprocessor_config.json (no preprocessor_config.json): its
  mean and std ([-1, 1] inputs here) decide over the family's (ImageNet for VideoMAE)."""
  from vvt.cli import finetune
  from vvt.config import loader
  folder = tmp_path / 'video_processor'
  shutil.copytree(videomae, folder)
  (folder / 'video_preprocessor_config.json').write_text(json.dumps(
      {'video_processor_type': 'VideoMAEVideoProcessor', 'image_mean': [0.5] * 3, 'image_std': [0.5] * 3}))
  base = loader.load(CONFIG, [], validate=False, files=(), init=False)
  start = finetune.prepare(str(folder), base, str(tmp_path / 'run'), log=lambda *a: None)
  assert start.preprocessing['normalization'] == 'zero_centre'
