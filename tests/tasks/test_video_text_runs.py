"""The video-text tasks run end to end, in this process: a tiny random-init video-text model fine-tuned
contrastively on captioned videos (a caption list read by the video-folder source, tokenised by a tokenizer.json
made here) and evaluated for retrieval; the same run evaluated zero-shot on the videos' classes."""
import json
import os

import numpy as np
import pytest

from tests.cli.test_sweep import vvt_in_process
from tests.conftest import REPO
from tests.data.data_helpers import write_footage

CAPTIONS = {'a': ['a dark clip', 'dark frames'], 'b': ['a middle clip'], 'c': ['a bright clip', 'bright frames']}


def write_tokenizer(path, words):
  """A word-level tokenizer.json over `words` (lower-cased, split at spaces): id 0 padding ('<pad>'), 1 unknown."""
  from tokenizers import Tokenizer
  from tokenizers import models
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  vocab = {'<pad>': 0, '<unk>': 1, **{w: i + 2 for i, w in enumerate(sorted(set(words)))}}
  tok = Tokenizer(models.WordLevel(vocab, unk_token='<unk>'))
  tok.normalizer = normalizers.Lowercase()
  tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  tok.save(str(path))


@pytest.fixture(scope='module')
def captioned_run(tmp_path_factory):
  """A retrieval run of 6 steps on DIR/captions.csv (6 videos of 3 classes, 1-2 captions each)."""
  d = tmp_path_factory.mktemp('video_text')
  write_footage(str(d), labels=(0, 1, 2, 0, 1, 2), frames=(8, 9, 10, 8, 9, 10))
  rows = [f'clips/v{i}.mp4,{c},{caption}' for i, c in enumerate('abcabc') for caption in CAPTIONS[c]]
  (d / 'captions.csv').write_text('\n'.join(['path,label,caption'] + rows) + '\n')
  write_tokenizer(d / 'tokenizer.json', ' '.join(sum(CAPTIONS.values(), [])).split() + ['video', 'of'])
  return d


def _overrides(d, task):
  csv = str(d / 'captions.csv')
  return ['--config', 'configs/synthetic_video_text.py', f'--config.task.name={task}',
          '--config.dataset.name=video_folder', f'--config.dataset.train_files={csv}',
          f'--config.dataset.eval_files={csv}', f'--config.dataset.tokenizer={d}',
          '--config.dataset.captions=2', '--config.dataset.num_spatial_crops=1', '--config.dataset.stride=1',
          '--config.model.num_frames=4', '--config.model.num_layers=1', '--config.model.hidden_size=32',
          '--config.model.num_heads=2', '--config.model.mlp_dim=64', '--config.model.text.num_layers=1',
          '--config.batch_size=6', '--config.num_train_steps=2', '--config.eval.batch_size=6',
          '--config.log_every_steps=1']


@pytest.fixture(scope='module')
def trained(captioned_run):
  """(data folder, run folder, vvt train's output) of 2 contrastive steps on the captioned videos."""
  d = captioned_run
  run = str(d / 'run')
  from vvt.cli import main
  cwd = os.getcwd()
  os.chdir(REPO)
  try:
    rc = main(['train', *_overrides(d, 'retrieval'), '--workdir', run, '--no-progress'])
  finally:
    os.chdir(cwd)
  assert rc == 0
  return d, run


def test_contrastive_training_then_retrieval_and_zero_shot_evaluation(trained, capsys):
  """The retrieval and the zero-shot evaluation of one checkpoint keep files of their own, named by the task."""
  d, run = trained
  checkpoint_dir = os.path.join(run, 'checkpoints')
  retrieval = open(os.path.join(checkpoint_dir, 'eval_2_test_retrieval_1x1.json')).read()
  got = json.loads(retrieval)
  assert (got['num_videos'], got['num_captions'], got['num_retrieval_videos']) == (6, 10, 6)
  assert 'best caption' in got['retrieval_protocol'] and 0 <= got['t2v_r1'] <= 1
  assert (got['task'], got['main_metric']) == ('retrieval', 't2v_r1')
  res = vvt_in_process(capsys, 'eval', *_overrides(d, 'zero_shot'), '--workdir', run,
                       '--config.task.zero_shot.templates=("a {} clip","{} frames")')
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  assert 'video_top1' in res.stdout and 'eval_2_test_zero_shot_1x1.json' in res.stdout
  got = json.loads(open(os.path.join(checkpoint_dir, 'eval_2_test_zero_shot_1x1.json')).read())
  assert got['zero_shot']['templates'] == ['a {} clip', '{} frames'] and got['protocol'] == '1x1'
  assert got['class_names'] == ['a', 'b', 'c'] and got['num_videos'] == 6 and got['main_metric'] == 'video_top1'
  for name in ('eval_2_test_retrieval_1x1.json', 'eval_2_test_retrieval.json'):  # the retrieval's, untouched
    assert open(os.path.join(checkpoint_dir, name)).read() == retrieval
  assert not [n for n in os.listdir(checkpoint_dir) if n.startswith('eval_2_test_1x1') or n == 'eval_2_test.json']


def test_features_with_texts_then_search_by_the_text_tower_alone(trained, capsys):
  d, run = trained
  (d / 'queries.txt').write_text('a dark clip\n\nbright frames\n')
  feats = str(d / 'feats')
  res = vvt_in_process(capsys, 'features', '--workdir', run, '--output', feats, '--text', str(d / 'queries.txt'))
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  index = json.loads((d / 'feats' / 'features.json').read_text())
  assert index['video_text'] is True and index['num_videos'] == 6
  with np.load(d / 'feats' / 'texts.npz') as z:
    assert z['text'].tolist() == ['a dark clip', 'bright frames']
    query = z['embedding'][1]
  with np.load(d / 'feats' / 'features-00000.npz') as z:
    videos, ids = z['embedding'], z['video_id'].tolist()
  cos = videos @ query / np.linalg.norm(videos, axis=1) / np.linalg.norm(query)
  res = vvt_in_process(capsys, 'search', '--features', feats, 'bright frames', '--k', '2')
  assert res.returncode == 0, res.stderr
  lines = res.stdout.splitlines()
  assert lines[0] == 'bright frames' and len(lines) == 3
  order = np.argsort(-cos, kind='stable')[:2]
  for line, row in zip(lines[1:], order, strict=True):
    _, score, video = line.split()
    assert video == ids[row] and abs(float(score) - cos[row]) < 1e-4


def test_search_refusals_name_the_folder_or_file(tmp_path, capsys):
  (tmp_path / 'features.json').write_text(json.dumps({'shards': [], 'format': 'npz', 'dim': 4}))
  (tmp_path / 'empty.txt').write_text('\n  \n')
  cases = [(('--features', str(tmp_path), 'a car'), "its embeddings are not a video-text model's video embeddings"),
           (('--features', str(tmp_path), '--queries', str(tmp_path / 'empty.txt')), 'empty.txt: no query in it'),
           (('--features', str(tmp_path)), 'no query: give one'),
           (('--features', str(tmp_path / 'none'), 'a car'), 'no features.json in it')]
  for args, message in cases:
    res = vvt_in_process(capsys, 'search', *args)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1 and message in lines[0], (args, res.stderr)


class _Unpickled:
  """An object whose unpickling makes the folder `marker`: what a hostile .npz's object array could run."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (os.mkdir, (self.marker,))


def test_a_hostile_shard_is_one_line_naming_it_and_never_unpickled(tmp_path, capsys):
  """A features folder whose .npz shard holds an object array (reading it would unpickle, and so run code) or is
  truncated: `vvt search` exits 2 with one line naming the shard, and nothing in it is unpickled."""
  marker = str(tmp_path / 'unpickled')
  np.savez(tmp_path / 'pickled.npz', embedding=np.array([_Unpickled(marker)], dtype=object),
           video_id=np.array(['a']))
  np.savez(tmp_path / 'whole.npz', embedding=np.ones((2, 4), np.float32), video_id=np.array(['a', 'b']))
  whole = (tmp_path / 'whole.npz').read_bytes()
  (tmp_path / 'truncated.npz').write_bytes(whole[:len(whole) // 2])
  for shard, reason in (('pickled.npz', 'Object arrays cannot be loaded'), ('truncated.npz', 'not a zip file')):
    folder = tmp_path / shard[:-len('.npz')]
    folder.mkdir()
    (folder / shard).write_bytes((tmp_path / shard).read_bytes())
    (folder / 'features.json').write_text(json.dumps({'shards': [shard], 'format': 'npz', 'dim': 4,
                                                      'video_text': True}))
    res = vvt_in_process(capsys, 'search', '--features', str(folder), 'a car')
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert f'{folder / shard}: not a readable numpy file' in lines[0] and reason in lines[0], lines[0]
  assert not os.path.exists(marker)
