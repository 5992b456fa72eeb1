"""`vvt features`: per-video embeddings of a split by a converted checkpoint, multi-view averaged, in shards."""
import glob
import json
import pathlib

import numpy as np
import pytest

from vvt.cli import main as vvt_main
from vvt.convert import weight_files
from vvt.data.writing import synthetic
from vvt.inspection import features
from vvt.train import checkpoints

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('fmt', features.FORMATS)
def test_shard_writer_streams_and_leaves_out_skipped_videos(tmp_path, fmt):
  """Complete videos leave in shards as they complete (at most shard_size waiting); views are averaged; a video
  with a masked (bad-record) view is left out; the ids and labels follow the videos."""
  writer = features.ShardWriter(str(tmp_path), fmt, shard_size=2, views=2, video_ids=['a', 'b', 'c', 'd', 'e'],
                                tokens_view=0)
  rng = np.random.default_rng(0)
  emb = rng.standard_normal((10, 3)).astype(np.float32)
  index = np.repeat(np.arange(5), 2)
  mask = np.ones(10, np.float32)
  mask[6] = 0  # video 3's first view: a bad record
  for lo in range(0, 10, 3):
    sl = slice(lo, lo + 3)
    writer.add({'embedding': emb[sl]}, {'video_index': index[sl], 'view_index': np.tile([0, 1], 5)[sl],
                                        'mask': mask[sl], 'label': index[sl] % 2})
    assert len(writer.done) < 2 and len(writer.open) <= 2
  assert writer.shards == [f'features-0000{i}.{fmt}' for i in range(2)]  # written before close: streamed
  writer.close()
  with open(tmp_path / features.INDEX, 'w') as f:
    json.dump(dict(shards=writer.shards, format=fmt, dim=3), f)
  got, ids, rest = features.read(str(tmp_path))
  assert ids == ['a', 'b', 'c', 'e'] and rest['video_index'].tolist() == [0, 1, 2, 4]
  np.testing.assert_allclose(got, emb.reshape(5, 2, 3).mean(axis=1)[[0, 1, 2, 4]], rtol=1e-6)
  assert rest['label'].tolist() == [0, 1, 0, 0]


def _hf_folder(path):
  torch = pytest.importorskip('torch')
  transformers = pytest.importorskip('transformers')
  cfg = transformers.TimesformerConfig(image_size=32, num_frames=8, patch_size=16, hidden_size=32,
                                       num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                       num_labels=4)
  torch.manual_seed(0)
  model = transformers.TimesformerForVideoClassification(cfg).eval()
  model.save_pretrained(str(path))
  return path


def test_features_of_a_converted_checkpoint(tmp_path, capsys):
  """Embeddings through the linear classifier give the per-video logits `vvt eval` writes (the views averaged
  either way); --tokens gives a view's (n_t, N, D) tokens; a view a video does not have is one line, exit 1."""
  data = tmp_path / 'data'
  synthetic.write_synthetic(str(data), num_classes=4, train_clips=4, test_clips=5, num_frames=16, frame_size=32,
                            seed=1, train_shards=1, test_shards=1)
  out = tmp_path / 'run'
  config = f'{REPO / "tests" / "train" / "tiny_config.py"}:{data},divided'
  assert vvt_main(['convert', '--source', 'hf_timesformer', '--checkpoint', str(_hf_folder(tmp_path / 'hf')),
                   '--config', config, '--output', str(out)]) == 0
  views = ['--config.dataset.num_test_clips=2', '--config.dataset.num_spatial_crops=1', '--config.eval.batch_size=4']
  assert vvt_main(['eval', '--workdir', str(out), *views]) == 0
  capsys.readouterr()
  feats = tmp_path / 'feats'
  assert vvt_main(['features', '--workdir', str(out), '--output', str(feats), '--shard_size', '2', '--tokens',
                   *views]) == 0
  assert '[features] test 2x1: 5 videos x 32 in 3 shard(s)' in capsys.readouterr().out
  emb, ids, rest = features.read(str(feats))
  assert emb.shape == (5, 32) and rest['tokens'].shape == (5, 8, 4, 32)
  assert sorted(glob.glob(str(feats / 'features-*.npz'))) == [str(feats / f'features-0000{i}.npz') for i in range(3)]

  scores = np.load(glob.glob(str(out / 'checkpoints' / 'eval_0_test_2x1.npz'))[0])
  assert ids == scores['video_ids'].tolist() and rest['label'].tolist() == scores['video_labels'].tolist()
  head = weight_files.flatten(checkpoints.load_params(str(out))[0])
  logits = emb @ np.asarray(head['head/output_projection/kernel']) + np.asarray(head['head/output_projection/bias'])
  np.testing.assert_allclose(logits, scores['video_scores'], atol=1e-4)
  index = json.loads((feats / 'features.json').read_text())
  assert (index['num_videos'], index['protocol'], index['tokens_view'], index['step']) == (5, '2x1', 0, 0)

  st = tmp_path / 'other'
  assert vvt_main(['features', '--workdir', str(out), '--output', str(st), '--tokens', '--tokens_view', '2',
                   *views]) == 1
  assert 'tokens_view=2 is not a view of the 2 per video' in capsys.readouterr().err
