"""`vvt convert` writes a config whose every field fits the converted model: a tiny random Hugging Face VideoMAE
(`save_pretrained` here) converted with a paper config runs `vvt predict` and `vvt eval` with no overrides, its
resize fields scaled with the frame size at the paper config's ratios; `--help` says which config to pass; a clip
length a source's weights cannot run at is refused with that source's own reason."""
import dataclasses
import json
import os

import numpy as np
from PIL import Image
import pytest

from tests import specs
from tests.conftest import REPO
from vvt.cli import main as vvt_main
from vvt.config import loader
from vvt.convert import sources
from vvt.convert import video

VIVIT_B = str(REPO / 'configs/kinetics400/vivit_b_fe.py')  # 224-px crops of a 256-px shorter side, init_from set


def _save_videomae(folder, num_labels=4):
  """A random VideoMAEForVideoClassification: 4 frames of 64 px, 2x16x16 tubelets, width 32, 2 layers."""
  transformers = pytest.importorskip('transformers')
  import torch
  torch.manual_seed(0)
  config = transformers.VideoMAEConfig(image_size=64, patch_size=16, num_frames=4, tubelet_size=2, hidden_size=32,
                                       num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                       num_labels=num_labels, use_mean_pooling=True)
  transformers.VideoMAEForVideoClassification(config).save_pretrained(str(folder))
  return str(folder)


@pytest.fixture(scope='module')
def videomae(tmp_path_factory):
  return _save_videomae(tmp_path_factory.mktemp('hf_videomae'))


def _frames(folder, n=12, size=(96, 128)):
  folder.mkdir()
  rng = np.random.default_rng(0)
  for i in range(n):
    Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)).save(folder / f'{i:04d}.png')
  return folder


def test_a_converted_paper_config_predicts_as_written(videomae, tmp_path, capsys):
  out = tmp_path / 'k400_videomae'
  assert vvt_main(['convert', '--source', 'hf_videomae', '--checkpoint', videomae, '--config', VIVIT_B,
                   '--output', str(out)]) == 0
  capsys.readouterr()
  saved = json.loads((out / 'config.json').read_text())
  d = saved['dataset']
  assert (saved['image_size'], saved['num_frames'], d['image_size'], d['num_frames']) == (64, 4, 64, 4)
  # 256 / 224 of the crop -> 73 px for 64-px crops; the training range [230, 340] likewise
  assert (d['eval_resize'], d['train_min_resize'], d['train_max_resize']) == (73, 66, 97)
  assert saved['init_from'] is None  # the paper config's ImageNet checkpoint is not this run's
  config = loader.load(str(out / 'config.json'), files=(), init=True)  # every field valid for training too
  assert config.dataset.eval_resize == 73

  frames = _frames(tmp_path / 'frames')
  assert vvt_main(['predict', '--checkpoint', str(out), str(frames), '--top_k', '2', '--json']) == 0
  result = json.loads(capsys.readouterr().out)
  assert result['views_per_video'] == 4 and len(result['predictions'][0]['top']) == 2

  from vvt.data.transforms import views
  data = specs.run_spec(config).data
  got = views.load_views(str(frames), 'frames', data)
  assert got.shape == (4, 4, 64, 64, 3)
  for resize, same in ((73, True), (256, False)):  # 64-px crops of a 73-px shorter side, not of a 256-px one
    other = dataclasses.replace(data, eval_resize=resize)
    assert np.array_equal(views.load_views(str(frames), 'frames', other), got) == same


def test_a_converted_checkpoint_evaluates_with_no_overrides_and_ignores_training_fields(videomae, tiny_data,
                                                                                       tmp_path, capsys):
  """Converted with the tests' tiny config (32-px crops of a 36-px side): 64-px crops of a 72-px side. `vvt eval`
  runs on its config.json as written; a training-only field that training would refuse does not stop it."""
  out = tmp_path / 'tiny_videomae'
  base = f'{REPO / "tests" / "train" / "tiny_config.py"}:{tiny_data}'
  assert vvt_main(['convert', '--source', 'hf_videomae', '--checkpoint', videomae, '--config', base,
                   '--output', str(out)]) == 0
  saved = json.loads((out / 'config.json').read_text())
  assert (saved['image_size'], saved['dataset']['eval_resize'], saved['dataset']['train_min_resize']) == (64, 72, 68)
  capsys.readouterr()
  bad = '--config.dataset.train_min_resize=8'  # smaller than the crop: refused by training only
  assert vvt_main(['train', '--config', str(out), '--workdir', str(tmp_path / 'w'), bad]) == 2
  assert 'dataset.train_min_resize=8 is smaller than the crop image_size=64' in capsys.readouterr().err
  assert vvt_main(['eval', '--workdir', str(out), bad, '--config.optimizer.momentum=3.0']) == 0
  assert 'video_top1' in capsys.readouterr().out


def test_help_says_config_is_required_and_which_to_pass(capsys):
  with pytest.raises(SystemExit):
    vvt_main(['convert', '--help'])
  text = capsys.readouterr().out
  usage = ' '.join(text[:text.index('\n\n')].split())  # as argparse wraps it at the terminal's width
  assert '--config FILE[:ARG]' in usage and '[--config' not in usage
  for source in sources.SOURCES.values():
    config = source.base_config
    assert f'  {source.name:<15} {config}' in text
    assert os.path.exists(REPO / config), config
  assert 'configs/synthetic.py' in text
  assert vvt_main(['convert', '--source', 'hf_videomae', '--checkpoint', 'x', '--output', 'y']) == 2
  assert 'the following arguments are required: --config' in capsys.readouterr().err


def test_clip_lengths_any_source_runs_at_and_the_one_it_refuses(videomae, tmp_path):
  converted = video.convert('hf_videomae', videomae, num_frames=8)  # its sine-cosine table is rebuilt for 8 frames
  assert converted.model_fields['num_frames'] == 8
  with pytest.raises(ValueError, match='num_frames=5 is not a multiple of the tubelet'):
    video.convert('hf_videomae', videomae, num_frames=5)
  transformers = pytest.importorskip('transformers')
  folder = tmp_path / 'hf_timesformer'
  config = transformers.TimesformerConfig(image_size=32, patch_size=16, num_frames=2, hidden_size=32,
                                          num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                          num_labels=3)
  transformers.TimesformerForVideoClassification(config).save_pretrained(str(folder))
  converted = video.convert('hf_timesformer', str(folder), num_frames=4)  # the time table resized (nearest)
  assert converted.model_fields['num_frames'] == 4
  assert converted.report.notes == ['clip 2 frames of 32px -> 4 frames of 32px: 1 position table(s) resized']
