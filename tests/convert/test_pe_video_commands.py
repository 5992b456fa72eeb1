"""`vvt convert --source hf_pe_video` and the commands on its folder, in this process: a tiny random-init
PeVideoModel (the one of test_hf_pe_video.py) saved with a word-level tokenizer.json, converted (model family
'pe_video'), exported back to a PeVideoModel folder bit for bit; zero-shot `vvt eval`, `vvt features --text` and
`vvt search` on the converted folder, their scores against `PeVideoText` applied directly."""
from __future__ import annotations

import json
import os

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file
import transformers

from tests.cli.test_sweep import vvt_in_process
from tests.conftest import REPO
from tests.convert.hf_encoders import save
from tests.convert.test_hf_pe_video import _model
from tests.data.data_helpers import write_footage
from tests.tasks.test_video_text_runs import write_tokenizer
from vvt.convert import hf_pe_video
from vvt.convert import video
from vvt.data import load_tokenizer
import vvt.models
from vvt.models import modernbert
from vvt.models import pe_temporal
from vvt.models import pe_video_config
from vvt.models.pe_video_text import PeVideoText

FRAMES = 4
TEMPLATE = 'a {} clip'


def _in_repo(capsys, *args):
  cwd = os.getcwd()
  os.chdir(REPO)
  try:
    res = vvt_in_process(capsys, *args)
  finally:
    os.chdir(cwd)
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  return res


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  """(the PeVideoModel folder, the converted folder, a data folder of 6 clips of 3 classes)."""
  root = tmp_path_factory.mktemp('pe_video_commands')
  folder = save(_model(), root / 'hf')
  write_tokenizer(folder / 'tokenizer.json', 'a b c clip dark bright frames'.split())
  data = root / 'data'
  write_footage(str(data), frames=(8, 9, 10, 8, 9, 10), name='test')
  from vvt.cli import main
  cwd = os.getcwd()
  os.chdir(REPO)
  try:
    rc = main(['convert', '--source', 'hf_pe_video', '--checkpoint', str(folder), '--config',
               'configs/synthetic_video_text.py', '--output', str(root / 'conv'), '--num-frames', str(FRAMES)])
  finally:
    os.chdir(cwd)
  assert rc == 0
  return folder, root / 'conv', data


def _data_flags(data):
  return ['--config.dataset.name=video_folder', f'--config.dataset.eval_files={data / "test.csv"}',
          '--config.dataset.num_spatial_crops=1', '--config.dataset.num_test_clips=1', '--config.dataset.stride=1',
          '--config.eval.batch_size=6']


def _direct_text(folder, conv, texts):
  """PeVideoText's text embeddings (n, E) of `texts`, its params read from the PeVideoModel folder itself."""
  frame, temporal, text, params = hf_pe_video.read_folder(str(folder))
  length = json.loads((conv / 'config.json').read_text())['model']['text']['max_length']
  ids, mask = load_tokenizer(str(conv), length).encode(texts)
  module = PeVideoText(temporal, text, frame)
  return np.asarray(jax.jit(lambda p, i, m: module.apply({'params': p}, i, m, method='encode_text'))(params, ids, mask))


def _unit(x):
  return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_convert_writes_family_pe_video_and_the_export_gives_every_tensor_back(converted, tmp_path, capsys):
  folder, conv, _ = converted
  model = json.loads((conv / 'config.json').read_text())['model']
  assert model['family'] == 'pe_video' and model['text']['family'] == 'pe_video'
  assert model['pe_video']['frame']['image_size'] == [32, 32] and model['num_frames'] == FRAMES
  assert isinstance(vvt.models.build(vvt.models.get_config(**model)), PeVideoText)
  assert (conv / 'tokenizer.json').read_text() == (folder / 'tokenizer.json').read_text()
  res = _in_repo(capsys, 'export', '--workdir', str(conv), '--format', 'hf', '--output', str(tmp_path / 'back'))
  assert 'PeVideoModel' in res.stdout
  a, b = load_file(folder / 'model.safetensors'), load_file(tmp_path / 'back' / 'model.safetensors')
  assert sorted(a) == sorted(b)
  assert all(a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)
  assert isinstance(transformers.AutoModel.from_pretrained(tmp_path / 'back'), transformers.PeVideoModel)
  assert (tmp_path / 'back' / 'tokenizer.json').is_file()


def test_zero_shot_features_and_search_score_as_pe_video_text_does(converted, capsys):
  folder, conv, data = converted
  res = _in_repo(capsys, 'eval', '--workdir', str(conv), '--config.task.name=zero_shot', *_data_flags(data),
                 f'--config.task.zero_shot.templates=("{TEMPLATE}",)', '--no-progress')
  assert 'video_top1' in res.stdout
  [npz] = [p for p in (conv / 'checkpoints').glob('eval_*_test_zero_shot_1x1.npz')]
  with np.load(npz) as z:
    scores, classes = z['video_scores'], z['class_names'].tolist()
  assert classes == ['a', 'b', 'c'] and scores.shape == (6, 3)
  (data / 'queries.txt').write_text('a dark clip\nbright frames\n')
  feats = conv / 'feats'
  _in_repo(capsys, 'features', '--workdir', str(conv), '--output', str(feats), '--text', str(data / 'queries.txt'),
           '--config.task.name=zero_shot', *_data_flags(data), '--no-progress')
  with np.load(feats / 'features-00000.npz') as z:
    videos, ids = z['embedding'], z['video_id'].tolist()
  with np.load(feats / 'texts.npz') as z:
    queries = z['embedding']
  direct = _direct_text(folder, conv, [TEMPLATE.format(c) for c in classes] + ['a dark clip', 'bright frames'])
  np.testing.assert_allclose(queries, direct[3:], atol=1e-5)
  # each video's zero-shot score: the cosine of its video embedding with the class prompt's text embedding
  np.testing.assert_allclose(scores, _unit(videos) @ _unit(direct[:3]).T, atol=1e-5)
  res = _in_repo(capsys, 'search', '--features', str(feats), 'bright frames', '--k', '2')
  lines = res.stdout.splitlines()
  cos = _unit(videos) @ _unit(direct[4])
  assert lines[0] == 'bright frames' and len(lines) == 3
  for line, row in zip(lines[1:], np.argsort(-cos, kind='stable')[:2], strict=True):
    _, score, video = line.split()
    assert video == ids[row] and abs(float(score) - cos[row]) < 1e-4


def test_a_model_config_the_family_cannot_run_is_refused_in_one_line_naming_the_field(converted, capsys):
  folder, conv, data = converted
  with pytest.raises(ValueError, match=r'model.safetensors: cannot convert its weights: ValueError: image_size=64: '
                     r'the PE frame model takes \[32, 32\] frames'):
    video.convert('hf_pe_video', str(folder), image_size=64)
  model = json.loads((conv / 'config.json').read_text())['model']
  cases = [(dict(image_size=64), 'model.image_size=64: the PE frame model takes [32, 32] frames'),
           (dict(text={**model['text'], 'num_layers': 1}), "model.text.num_layers=1 must be model.pe_video.text's (3)"),
           (dict(family='vivit'), "model.pe_video is Perception Encoder video's section: model.family='vivit'"),
           (dict(pe_video=None), "model.family='pe_video' needs model.pe_video"),
           (dict(pe_video={**model['pe_video'], 'frame': {**model['pe_video']['frame'], 'num_heads': 3}}),
            'model.pe_video.frame.embed_dim=32 must be 4 x num_heads=3'),
           (dict(pe_video={**model['pe_video'], 'text': {**model['pe_video']['text'], 'heads': 2}}),
            'unknown model config field model.pe_video.text.heads')]
  for change, line in cases:
    with pytest.raises(ValueError) as e:
      vvt.models.resolve(vvt.models.get_config(**{**model, **change}))
    assert line in str(e.value), (change, str(e.value))
  res = vvt_in_process(capsys, 'eval', '--workdir', str(conv), '--config.task.name=zero_shot', *_data_flags(data),
                       '--config.model.image_size=64')
  lines = [line for line in res.stderr.splitlines() if line.strip()]
  # every problem of the config in one run, one line each: the frame size the model cannot take among them
  assert res.returncode == 2 and all(line.startswith('vvt eval: error: ') for line in lines), res.stderr
  assert sum('model.image_size=64: the PE frame model takes [32, 32] frames' in line for line in lines) == 1
  assert set(pe_video_config.FRAME_ACTIVATIONS) == set(pe_temporal.ACTIVATIONS)
  assert set(pe_video_config.TEXT_ACTIVATIONS) == set(modernbert.ACTIVATIONS)


def test_contrastive_training_scales_by_the_model_s_own_similarity_scale(converted):
  """The retrieval task's InfoNCE multiplies the cosines by what the model's similarity does: PE video's
  `logit_scale` as stored (its transformers class takes no exp), not exp of it as for VideoPrism's."""
  from vvt.tasks import retrieval
  folder, conv, _ = converted
  frame, temporal, text, params = hf_pe_video.read_folder(str(folder))
  params = dict(params, logit_scale=np.float32(2.5))
  module = PeVideoText(temporal, text, frame)
  length = 6
  inputs = {'video': np.zeros((1, FRAMES) + tuple(frame.image_size) + (3,), np.float32),
            'ids': np.ones((1, 1, length), np.int32), 'mask': np.ones((1, 1, length), np.int32)}
  out = retrieval.Retrieval(captions=1, text_length=length).outputs(module, params, inputs, train=False)
  assert float(out['scale']) == 2.5
  v, t = np.asarray(out['video']), np.asarray(out['text'])[:, 0]
  direct = module.apply({'params': params}, v, t, method='similarity')
  np.testing.assert_allclose(np.asarray(direct) - float(params['logit_bias']), 2.5 * v @ t.T, rtol=1e-4, atol=1e-5)
