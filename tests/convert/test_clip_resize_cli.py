"""`vvt convert --num-frames/--image-size` on a Hugging Face TimeSformer folder, and `vvt eval` of the converted
checkpoint at another clip length than it was written for (its tables resized at load)."""
import json
import pathlib

import jax
import numpy as np
import pytest

from vvt.cli import main as vvt_main
from vvt.convert import video
from vvt.convert import weight_files
from vvt.data.writing import synthetic
import vvt.models
from vvt.models import spec as model_spec
from vvt.train import checkpoints
from vvt.train import clip_resize

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

REPO = pathlib.Path(__file__).resolve().parents[2]


def _hf_folder(path):
  cfg = transformers.TimesformerConfig(image_size=32, num_frames=4, patch_size=16, hidden_size=32,
                                       num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                       num_labels=4)
  torch.manual_seed(0)
  model = transformers.TimesformerForVideoClassification(cfg).eval()
  with torch.no_grad():
    model.timesformer.embeddings.time_embeddings.normal_()
  model.save_pretrained(str(path))
  return path


def test_convert_at_another_clip_then_eval_at_a_third(tmp_path, capsys):
  data = tmp_path / 'data'
  synthetic.write_synthetic(str(data), num_classes=4, train_clips=8, test_clips=4, num_frames=8, frame_size=32,
                            seed=1, train_shards=1, test_shards=1)
  folder = _hf_folder(tmp_path / 'hf')
  out = tmp_path / 'run'
  config = f'{REPO / "tests" / "train" / "tiny_config.py"}:{data},divided'
  assert vvt_main(['convert', '--source', 'hf_timesformer', '--checkpoint', str(folder), '--config', config,
                   '--output', str(out), '--num-frames', '8', '--image-size', '64']) == 0
  assert '[convert] 8 frames of 64px' in capsys.readouterr().out
  report = (out / 'convert_report.txt').read_text()
  assert 'note: clip 4 frames of 32px -> 8 frames of 64px: 2 position table(s) resized' in report
  assert 'time table 4 -> 8 rows, torch nearest' in report
  run = json.loads((out / 'config.json').read_text())
  assert (run['model']['num_frames'], run['model']['image_size'], run['num_frames']) == (8, 64, 8)
  params, _ = checkpoints.load_params(str(out))
  time = np.asarray(weight_files.flatten(params)['encoder/posembed/time_embedding'])
  np.testing.assert_array_equal(time[0, ::2], time[0, 1::2])  # 4 -> 8 rows by nearest: each row twice

  # Back at 4 frames and 32px at load: nearest undoes the doublings, so the params are those converted at 4.
  direct = video.convert('hf_timesformer', str(folder))
  at4 = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=jax.sharding.SingleDeviceSharding(
      jax.devices()[0])), jax.tree.map(np.asarray, direct.params))
  loaded, weights = clip_resize.load_eval_params(str(out), 0, at4, model_spec.spec_of(vvt.models.resolve(
      direct.model_config())), log=lambda s: None)
  assert weights == 'params'
  for name, value in weight_files.flatten(direct.params).items():
    np.testing.assert_array_equal(np.asarray(weight_files.flatten(loaded)[name]), value, err_msg=name)

  assert vvt_main(['eval', '--workdir', str(out), '--config.num_frames=4', '--config.image_size=32',
                   '--config.eval.batch_size=4']) == 0
  log = capsys.readouterr().out
  assert 'checkpoint written for 8 frames of 64px, run at 4 frames of 32px' in log and 'video_top1' in log
