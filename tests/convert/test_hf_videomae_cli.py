"""A converted Hugging Face VideoMAE folder is a vvt model like any other: `vvt convert`, then `vvt train` from the
run file the converter writes (its params-only checkpoint initialises the run), `vvt eval`, `vvt predict`,
`vvt export`, `vvt attention` and `vvt summary` on it."""
import json
import pathlib

import numpy as np
from PIL import Image
from safetensors import safe_open

from tests.convert import converted_run
from vvt.cli import main as vvt_main
from vvt.config import loader
from vvt.data.writing import synthetic
import vvt.models
from vvt.models import summary
from vvt.train import checkpoints

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = REPO / 'tests' / 'convert' / 'fixtures' / 'hf_videomae_first_token'


def _frames(folder):
  folder.mkdir()
  for i, f in enumerate(synthetic.render_clip(0, np.random.default_rng(0), 16, 64)):
    Image.fromarray(np.asarray(f, np.uint8)).save(folder / f'{i:04d}.png')
  return folder


def test_convert_train_eval_predict_export_attention_summary(tmp_path, capsys):
  data = tmp_path / 'data'
  synthetic.write_synthetic(str(data), num_classes=7, train_clips=16, test_clips=8, num_frames=16, frame_size=64,
                            seed=1, train_shards=1, test_shards=1)
  out = tmp_path / 'run'
  config = f'{REPO / "tests" / "train" / "tiny_config.py"}:{data},spatiotemporal'
  assert vvt_main(['convert', '--source', 'hf_videomae', '--checkpoint', str(FIXTURE), '--config', config,
                   '--output', str(out)]) == 0
  log = capsys.readouterr().out
  assert "model.pooling: 'mean' -> 'first_token'" in log and 'model.key_bias: True -> False' in log
  converted, _ = checkpoints.load_params(str(out))
  meta = json.loads((FIXTURE.parent / 'hf_videomae_first_token.json').read_text())
  assert summary.count_params(converted) == meta['num_parameters']

  before, after = converted_run.train_two_steps(out, capsys)
  assert 'encoder/posembed/pos_embedding' not in after  # the table stays a constant
  assert not np.allclose(before['encoder/layers/block_0/joint_attention/query/kernel'],
                         after['encoder/layers/block_0/joint_attention/query/kernel'])

  assert vvt_main(['eval', '--workdir', str(out), '--config.eval.batch_size=8']) == 0
  assert 'video_top1' in capsys.readouterr().out

  frames = _frames(tmp_path / 'frames')
  assert vvt_main(['predict', '--workdir', str(out), str(frames), '--top_k', '2']) == 0
  assert capsys.readouterr().out.startswith(f'{frames}: ')

  exported = tmp_path / 'videomae.safetensors'
  assert vvt_main(['export', '--workdir', str(out), '--output', str(exported)]) == 0
  with safe_open(str(exported), framework='numpy') as f:
    names = set(f.keys())
    assert json.loads(f.metadata()['config'])['model']['pooling'] == 'first_token'
  assert names == set(after) and not any(n.endswith('key/bias') for n in names)

  maps = tmp_path / 'maps'
  assert vvt_main(['attention', '--workdir', str(out), str(frames), '--out', str(maps)]) == 0
  z = np.load(maps / 'attention.npz')
  assert z['final'].shape == (4, 4, 4) and abs(float(z['final'].sum()) - 1) < 1e-5
  assert (maps / 'attention_grid.png').stat().st_size > 1000

  capsys.readouterr()
  assert vvt_main(['summary', '--config', str(out)]) == 0
  assert 'GFLOPs/view' in capsys.readouterr().out
  model = loader.load(str(out / 'config.json'), files=(), init=False).model
  counted = summary.summarise(model)
  assert counted['params'] == meta['num_parameters'] and counted['gflops'] > 0
  assert vvt.models.resolve(model).pooling == 'first_token'
