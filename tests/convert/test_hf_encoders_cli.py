"""Converted V-JEPA 2 and VideoPrism folders are vvt models like any other: `vvt convert`, `vvt eval` of the converted
weights, then a short `vvt train` initialised from them (the run file the converter writes), on the tiny synthetic
data (tests/conftest.py `tiny_data`: 4 classes, 8 frames of 32x32 sampled from 16 of 64x64)."""
import json
import pathlib

import numpy as np
import pytest
import transformers

from tests.convert import converted_run
from tests.convert import hf_encoders as H
from vvt.cli import main as vvt_main
from vvt.train import checkpoints

REPO = pathlib.Path(__file__).resolve().parents[2]


def vjepa2_classifier():
  """A VJEPA2ForVideoClassification of the data's 4 classes: the converted classifier is trained further."""
  cfg = transformers.VJEPA2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=16,
                                  crop_size=32, frames_per_clip=8, tubelet_size=2, num_pooler_layers=1, num_labels=4,
                                  pred_hidden_size=16, pred_num_hidden_layers=1, pred_num_attention_heads=2)
  return H.randomise(transformers.VJEPA2ForVideoClassification(cfg), 51)


def videoprism_backbone():
  """A bare VideoPrismVisionModel: the conversion adds a pooler and a head of the config's (the data's) classes."""
  cfg = transformers.VideoPrismVisionConfig(hidden_size=32, intermediate_size=64, num_attention_heads=2,
                                            num_spatial_layers=1, num_temporal_layers=1, image_size=32,
                                            tubelet_size=[1, 16, 16], num_frames=8)
  return H.randomise(transformers.VideoPrismVisionModel(cfg), 52, norm_offset=0.0)


@pytest.mark.parametrize('source,make,changed', [
    ('hf_vjepa2', vjepa2_classifier, "model.positional_embedding: 'sinusoidal' -> 'rope'"),
    ('hf_videoprism', videoprism_backbone, "model.attention: 'spatiotemporal' -> 'space_then_time'"),
])
def test_convert_eval_and_train_from_the_converted_weights(tmp_path, tiny_data, capsys, source, make, changed):
  folder = H.save(make(), tmp_path / 'hf')
  out = tmp_path / 'run'
  config = f'{REPO / "tests" / "train" / "tiny_config.py"}:{tiny_data},spatiotemporal'
  assert vvt_main(['convert', '--source', source, '--checkpoint', str(folder), '--config', config,
                   '--output', str(out)]) == 0
  log = capsys.readouterr().out
  assert changed in log and "model.classifier: 'gap' -> 'attentive'" in log
  report = (out / 'convert_report.txt').read_text()
  assert f'source: {source}' in report and 'in the file but unused' in report
  converted, step = checkpoints.load_params(str(out))
  assert step == 0 and 'pooler' in converted

  assert vvt_main(['eval', '--workdir', str(out), '--config.eval.batch_size=8']) == 0
  assert 'video_top1' in capsys.readouterr().out

  before, after = converted_run.train_two_steps(out, capsys)
  moved = [k for k in before if not np.array_equal(before[k], after[k])]
  assert any(k.startswith('pooler/') for k in moved) and any('/layers/block_0/' in k and 'pooler' not in k
                                                            for k in moved)
  saved = json.loads((out / 'config.json').read_text())
  assert saved['model']['classifier'] == 'attentive' and saved['model']['num_classes'] == 4
