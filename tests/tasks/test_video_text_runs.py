"""The video-text tasks run end to end, in this process: a tiny random-init video-text model fine-tuned
contrastively on captioned videos (a caption list read by the video-folder source, tokenised by a tokenizer.json
made here) and evaluated for retrieval; the same run evaluated zero-shot on the videos' classes."""
import json
import os
import sys

import pytest

from tests.cli.test_sweep import vvt_in_process

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'data'))
from data_helpers import write_footage  # noqa: E402

CAPTIONS = {'a': ['a dark clip', 'dark frames'], 'b': ['a middle clip'], 'c': ['a bright clip', 'bright frames']}


def write_tokenizer(path, words):
  """A word-level tokenizer.json over `words` (lower-cased, split at spaces): id 0 padding, 1 unknown."""
  from tokenizers import Tokenizer
  from tokenizers import models
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  vocab = {'[PAD]': 0, '[UNK]': 1, **{w: i + 2 for i, w in enumerate(sorted(set(words)))}}
  tok = Tokenizer(models.WordLevel(vocab, unk_token='[UNK]'))
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
          f'--config.dataset.eval_files={csv}', f'--config.dataset.tokenizer={d / "tokenizer.json"}',
          '--config.dataset.captions=2', '--config.dataset.num_spatial_crops=1', '--config.dataset.stride=1',
          '--config.model.num_frames=4', '--config.model.num_layers=1', '--config.model.hidden_size=32',
          '--config.model.num_heads=2', '--config.model.mlp_dim=64', '--config.model.text.num_layers=1',
          '--config.batch_size=6', '--config.num_train_steps=2', '--config.eval.batch_size=6',
          '--config.log_every_steps=1']


def test_contrastive_training_then_retrieval_and_zero_shot_evaluation(captioned_run, capsys):
  d = captioned_run
  run = str(d / 'run')
  res = vvt_in_process(capsys, 'train', *_overrides(d, 'retrieval'), '--workdir', run, '--no-progress')
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  assert 't2v_r1' in res.stdout
  got = json.loads(open(os.path.join(run, 'checkpoints', 'eval_2_test_1x1.json')).read())
  assert (got['num_videos'], got['num_captions'], got['num_retrieval_videos']) == (6, 10, 6)
  assert 'best caption' in got['retrieval_protocol'] and 0 <= got['t2v_r1'] <= 1
  res = vvt_in_process(capsys, 'eval', *_overrides(d, 'zero_shot'), '--workdir', run,
                       '--config.task.zero_shot.templates=("a {} clip","{} frames")')
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  assert 'video_top1' in res.stdout
  got = json.loads(open(os.path.join(run, 'checkpoints', 'eval_2_test_1x1.json')).read())
  assert got['zero_shot']['templates'] == ['a {} clip', '{} frames'] and got['protocol'] == '1x1'
  assert got['class_names'] == ['a', 'b', 'c'] and got['num_videos'] == 6
