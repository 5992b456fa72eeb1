"""`vvt train --init`: docs/weights.md's "Fine-tune a released checkpoint on your videos", run as written on
3-class data made here, from a random-init Hugging Face VideoMAE (5 classes, saved with save_pretrained) and
then from the vvt run it gave; evaluation and prediction with no further overrides;
evaluation at another clip length."""
import json
import os
import re
import shlex

import pytest

from tests.cli.test_predict import clip
from tests.cli.test_predict import write_video
from tests.conftest import REPO
from vvt.cli import main as vvt_main
from vvt.config import loader

SECTION = '## Fine-tune a released checkpoint on your videos'
PAGE = REPO / 'docs' / 'weights.md'
TINY = ['--config.num_train_steps=4', '--config.batch_size=4', '--config.eval.batch_size=8']


def readme_commands():
  """The `vvt` commands of the docs section's bash block, continuation lines joined."""
  text = PAGE.read_text()
  section = text[text.index(SECTION):]
  block = re.search(r'```bash\n(.*?)```', section, re.S).group(1)
  return [shlex.split(c) for c in block.replace('\\\n', ' ').splitlines() if c.strip()]


@pytest.fixture(scope='module')
def sources(tmp_path_factory):
  """data/mine (3 classes, file names as `vvt data convert` writes them), a random-init HF VideoMAE of 5 classes,
  a clip to predict."""
  torch = pytest.importorskip('torch')
  transformers = pytest.importorskip('transformers')
  from vvt.data.writing import synthetic
  root = tmp_path_factory.mktemp('finetune')
  data = root / 'data' / 'mine'
  synthetic.write_synthetic(str(data), num_classes=3, train_clips=12, test_clips=6, num_frames=16, frame_size=64,
                            seed=1, train_shards=2, test_shards=1)
  for name in os.listdir(data):
    split = re.match(r'(train|test)-(\d+-of-\d+)\.tfrecord$', name)
    if split:
      os.rename(data / name, data / f'{split[1]}.tfrecord-{split[2]}')
  cfg = transformers.VideoMAEConfig(image_size=16, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=5)
  torch.manual_seed(0)
  transformers.VideoMAEForVideoClassification(cfg).eval().save_pretrained(root / 'videomae')
  write_video(root / 'clip.mp4', clip(0, n=20))
  return root


def _args(command, root):
  out = []
  for a in command[1:]:
    a = a.replace('path/to/videomae_folder', str(root / 'videomae')).replace('clip.mp4', str(root / 'clip.mp4'))
    a = re.sub(r'(^|=)(data/mine|runs)/', lambda m: m[1] + str(root / m[2]) + '/', a)
    out.append(a)
  return out + (TINY if command[1] == 'train' else [])


def test_the_documented_fine_tune_section(sources, capsys):
  commands = readme_commands()
  assert [c[:2] for c in commands] == [['vvt', 'train'], ['vvt', 'eval'], ['vvt', 'predict'], ['vvt', 'train']]
  assert '--init' in commands[0] and '--init' in commands[3]
  classes = (sources / 'data' / 'mine' / 'classes.txt').read_text().split()
  mine, again = sources / 'runs' / 'mine', sources / 'runs' / 'mine_again'

  # 1. from the Hugging Face folder: its model, frames, size and normalisation; the data's classes; a new head
  assert vvt_main(_args(commands[0], sources)) == 0
  out = capsys.readouterr().out
  assert "[init] new classifier for the data's 3 classes (the checkpoint has 5 classes)" in out
  assert f'[train] 3 classes ({", ".join(classes)}) from ' in out
  config = json.loads((mine / 'config.json').read_text())
  assert (config['num_classes'], config['class_names']) == (3, classes)
  assert (config['num_frames'], config['image_size']) == (4, 16)
  model = config['model']
  assert (model['family'], model['attention'], model['classifier'], model['positional_embedding']) == (
      'vivit', 'spatiotemporal', 'gap', 'sinusoidal')
  assert (model['hidden_size'], model['num_layers'], model['tubelet']) == (32, 2, [2, 8, 8])
  d = config['dataset']
  # the recipe's 224-px views (resize 224, jitter [256, 320]) scaled to VideoMAE's 16-px frames; its normalisation
  assert (d['normalization'], d['eval_resize'], d['train_min_resize'], d['train_max_resize']) == (
      'imagenet', 16, 18, 23)
  assert config['init_from']['checkpoint'] == str(mine / 'init' / 'weights.safetensors')
  report = (mine / 'init_from_report.txt').read_text()
  assert 'freshly initialised: 2' in report and 'new classifier (reinit_head)' in report
  assert 'init_from report:\n' not in out and f'every parameter: {mine}/init_from_report.txt' in out

  # 2. evaluation and prediction read the run's config.json: no overrides
  assert vvt_main(_args(commands[1], sources)) == 0
  assert '[done] step 4: video_top1 = ' in capsys.readouterr().out
  assert vvt_main(_args(commands[2], sources) + ['--json']) == 0
  (prediction,) = json.loads(capsys.readouterr().out)['predictions']
  assert [t['name'] for t in prediction['top']][:1] == [n for n in classes if n == prediction['top'][0]['name']]

  # 3. from the vvt run: the same classes, so its classifier is kept; every parameter loaded
  assert vvt_main(_args(commands[3], sources)) == 0
  out = capsys.readouterr().out
  assert "[init] classifier kept: the data's 3 classes are the checkpoint's" in out
  report = (again / 'init_from_report.txt').read_text()
  assert 'freshly initialised: 0' in report and 'transformed: 0' in report
  assert json.loads((again / 'config.json').read_text())['init_from']['reinit_head'] is False

  # 4. evaluation at another clip length: a warning, and the results named by it (the run's own kept)
  own = (mine / 'checkpoints' / 'eval_4_test.json').read_text()
  assert vvt_main(['eval', '--workdir', str(mine), '--config.model.num_frames=8']) == 0
  err = capsys.readouterr().err
  assert 'warning: evaluating clips of 8 frames at 16 px; the run trained on 4 frames at 16 px' in err
  other = json.loads((mine / 'checkpoints' / 'eval_4_test_1x3_8f_16px.json').read_text())
  assert (other['num_frames'], other['image_size'], other['protocol'], other['split']) == (8, 16, '1x3', 'test')
  assert (mine / 'checkpoints' / 'eval_4_test.json').read_text() == own


def test_a_second_init_of_the_same_source_reuses_its_weights(sources, capsys):
  """The weights file of a Hugging Face source is written once per workdir (a resumed command reuses it)."""
  from vvt.cli import finetune
  base = loader.load('configs/kinetics400/timesformer_b.py', [], validate=False, files=(), init=False)
  wd = sources / 'reuse'
  first = finetune.prepare(str(sources / 'videomae'), base, str(wd), log=print)
  assert 'hf_videomae converted' in capsys.readouterr().out
  again = finetune.prepare(str(sources / 'videomae'), base, str(wd), log=print)
  assert 'written before' in capsys.readouterr().out
  assert first == again and (first.num_classes, first.class_names) == (5, None)  # placeholder labels: no names


@pytest.mark.parametrize('source,message', [
    ('missing_dir', 'no such file or folder'),
    ('notes.txt', 'expected a vvt run folder, a .safetensors file'),
    ('plain_dir', 'the folder has no config.json'),
    ('bert', "config.json has model_type='bert'; vvt converts"),
])
def test_init_sources_refused_in_one_line(source, message, tmp_path):
  (tmp_path / 'notes.txt').write_text('x')
  (tmp_path / 'plain_dir').mkdir()
  (tmp_path / 'bert').mkdir()
  (tmp_path / 'bert' / 'config.json').write_text('{"model_type": "bert"}')
  from vvt.cli import finetune
  with pytest.raises((ValueError, FileNotFoundError), match=re.escape(message)):
    finetune.kind_of(str(tmp_path / source))


def test_init_from_path_is_an_alias_when_the_config_has_no_init_from():
  config = loader.load('configs/synthetic.py:divided', [('init_from.path', 'vit.npz'), ('init_from.tubelet_init',
                                                                                          'inflate')],
                       validate=False, files=(), init=False)
  assert (config.init_from.checkpoint, config.init_from.tubelet) == ('vit.npz', 'inflate')
  assert 'path' not in config.init_from
