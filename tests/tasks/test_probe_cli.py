"""`vvt train` of a probe run through the command line: docs/tasks.md's probe of a Hugging Face folder run as written
(a random-init V-JEPA 2 saved with save_pretrained, 3-class data made here): the model and preprocessing follow the
checkpoint, the backbone stays frozen, the last line names the winner and the table; `--init` of a probe run sets
its backbone; refusals before any work (exit 2, nothing written); a backbone folder of damaged steps in one line."""
import json
import re
import shlex

import numpy as np
import pytest

from tests.conftest import REPO
from vvt.cli import main as vvt_main

PAGE = REPO / 'docs' / 'tasks.md'
SECTION = '### A probe of a released checkpoint'
TINY = ['--config.num_train_steps=2', '--config.batch_size=4', '--config.eval.batch_size=4',
        '--config.schedule.warmup_steps=0', '--config.checkpoint.every_steps=2', '--config.task.probe.num_heads=2']


def documented_command():
  """The `vvt train` command of the docs section, its continuation lines joined."""
  text = PAGE.read_text()
  block = re.search(r'```bash\n(.*?)```', text[text.index(SECTION):], re.S).group(1)
  (command,) = [shlex.split(c) for c in block.replace('\\\n', ' ').splitlines() if c.strip() and c[0] != '#']
  return command


@pytest.fixture(scope='module')
def sources(tmp_path_factory):
  """data/mine (3 classes, 8 frames of 32 px) and a random-init V-JEPA 2 encoder (no classifier) of 4 frames of
  32 px, width 32, one layer, saved with save_pretrained."""
  transformers = pytest.importorskip('transformers')
  from tests.convert import hf_encoders as H
  from vvt.data.writing import synthetic
  root = tmp_path_factory.mktemp('probe_cli')
  synthetic.write_synthetic(str(root / 'data' / 'mine'), num_classes=3, train_clips=8, test_clips=4, num_frames=8,
                            frame_size=32, seed=1, train_shards=1, test_shards=1)
  cfg = transformers.VJEPA2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=16,
                                  crop_size=32, frames_per_clip=4, tubelet_size=2, num_pooler_layers=1,
                                  pred_hidden_size=16, pred_num_hidden_layers=1, pred_num_attention_heads=2)
  H.save(H.randomise(transformers.VJEPA2Model(cfg), 3), root / 'vjepa2')
  return root


def _args(command, root):
  out = []
  for a in command[2:]:
    a = a.replace('path/to/vjepa2_folder', str(root / 'vjepa2'))
    a = re.sub(r'(^|=)(data/mine|runs)/', lambda m: m[1] + str(root / m[2]) + '/', a)
    out.append(a)
  return ['train', *out, *TINY]


def _per_layer(params) -> dict:
  from vvt.convert import weight_files
  return {k: np.asarray(v) for k, v in weight_files.flatten(params).items()}


def test_the_documented_probe_of_a_hugging_face_folder(sources, capsys):
  command = documented_command()
  assert command[:2] == ['vvt', 'train'] and '--config.task.probe.backbone=path/to/vjepa2_folder' in command
  assert vvt_main(_args(command, sources)) == 0
  out = capsys.readouterr().out
  run = sources / 'runs' / 'probe_vjepa2'
  weights = run / 'init' / 'weights.safetensors'
  assert f'[init] frozen backbone: {sources / "vjepa2"} (hf_vjepa2), weights {weights}' in out
  config = json.loads((run / 'config.json').read_text())
  model = config['model']
  assert (model['hidden_size'], model['num_layers'], config['num_frames'], config['image_size']) == (32, 1, 4, 32)
  assert (config['dataset']['normalization'], config['num_classes']) == ('imagenet', 3)
  assert (config['task']['probe']['backbone'], config['init_from']) == (str(weights), None)
  # the last line: the winner of the saved results, its lr, weight decay and metric, the table's path
  results = json.loads((run / 'checkpoints' / 'eval_2_test_1x3.json').read_text())
  best = next(r for r in results['probes'] if r['probe'] == results['best_probe'])
  line = out.strip().splitlines()[-1]
  table = run / 'checkpoints' / 'eval_2_test_1x3_probes.csv'
  assert line.startswith(f'[probe] best {best["probe"]}: lr {best["lr"]:g}, weight decay {best["weight_decay"]:g}, '
                         f'video_top1 = {best["video_top1"]:.4f}')
  assert line.endswith(f'; every probe: {table}') and len(table.read_text().splitlines()) == 5
  tied = results['tied_probes']
  assert (' (tied with ' in line) == bool(tied)
  # the frozen backbone: the converted weights, unchanged by the probes' steps (its classifier is not read)
  from vvt.convert import export
  from vvt.models import layout
  from vvt.train import checkpoints
  before = _per_layer(export.from_safetensors(str(weights))[0])
  after = _per_layer(layout.to_per_layer(checkpoints.load_params(str(run))[0]))
  backbone = [k for k in before if not k.startswith('head/')]
  assert backbone and all(before[k].tobytes() == after[k].tobytes() for k in backbone)
  assert any(k.startswith('probes/') for k in after)


def test_init_of_a_probe_run_sets_its_backbone(sources):
  from vvt.cli import train
  config = f'{REPO}/configs/synthetic.py:divided'
  hf = str(sources / 'vjepa2')
  source, field, overrides = train._start(hf, config, [('task.name', 'probe')], str(sources / 'w'))
  assert (source, field, overrides[-1]) == (hf, 'task.probe.backbone', ('task.probe.backbone', hf))
  assert train._start(hf, config, [], str(sources / 'w'))[:2] == (hf, '')  # a fine-tune: --init as before


def _refused(argv, capsys, workdir):
  assert vvt_main(argv) == 2
  err = capsys.readouterr().err
  assert not workdir.exists()  # nothing written
  return err


def test_probe_and_init_refusals_come_first_all_at_once_and_write_nothing(sources, capsys, tmp_path):
  base = ['train', '--config', f'{REPO}/configs/synthetic.py:divided', '--workdir', str(tmp_path / 'w'),
          f'--config.dataset.train_files={sources}/data/mine/train-*',
          f'--config.dataset.eval_files={sources}/data/mine/test-*']
  missing = tmp_path / 'missing'
  err = _refused(base + ['--config.task.name=probe', f'--config.task.probe.backbone={missing}',
                         '--config.task.probe.lrs=fast', '--config.task.probe.weight_decays=(0.1,-0.1)'],
                 capsys, tmp_path / 'w')
  assert f'vvt train: error: task.probe.backbone {missing}: no such file or folder' in err
  assert "vvt train: error: task.probe.lrs[0] must be a number > 0 (a learning rate), got 'fast'" in err
  assert 'vvt train: error: task.probe.weight_decays[1] must be a number >= 0 (a weight decay), got -0.1' in err
  err = _refused(base + ['--config.task.name=probe'], capsys, tmp_path / 'w')
  assert 'vvt train: error: task.probe.backbone is not set: the probes would read the features of a randomly' in err
  err = _refused(base + ['--init', str(missing)], capsys, tmp_path / 'w')
  assert f'vvt train: error: --init {missing}: no such file or folder' in err
  # a bad field with a good --init: refused before the weights are converted into the workdir
  err = _refused(base + ['--init', str(sources / 'vjepa2'), '--config.optimizer.name=adamm'], capsys, tmp_path / 'w')
  assert 'optimizer.name must be one of' in err
  err = _refused(base + ['--init', str(sources / 'vjepa2'), '--config.task.name=probe',
                         f'--config.task.probe.backbone={sources}'], capsys, tmp_path / 'w')
  assert 'name two backbones of the probe run: give one' in err


@pytest.mark.parametrize('run_folder', [False, True])
def test_a_backbone_folder_of_damaged_steps_is_one_line_naming_it(sources, capsys, tmp_path, run_folder):
  """A params folder (read by the trainer) or a run folder (converted first, as --init converts it): one line
  naming the folder, exit 1; a run folder's weights never written, the workdir not made."""
  folder = tmp_path / 'garbage'
  for name in ('checksums.json', '_CHECKPOINT_METADATA', 'params/_METADATA', 'params/manifest.ocdbt', 'meta/x'):
    (folder / 'checkpoints' / '3' / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / 'checkpoints' / '3' / name).write_bytes(bytes(range(7, 200)))
  if run_folder:
    (folder / 'config.json').write_text('{"model": {}, "dataset": {}}')
  argv = ['train', '--config', f'{REPO}/configs/synthetic.py:divided', '--workdir', str(tmp_path / 'w'),
          f'--config.dataset.train_files={sources}/data/mine/train-*',
          f'--config.dataset.eval_files={sources}/data/mine/test-*', '--config.task.name=probe',
          f'--config.task.probe.backbone={folder}', *TINY[:4]]
  assert vvt_main(argv) == 1
  (line,) = [l for l in capsys.readouterr().err.splitlines() if 'error' in l]
  if run_folder:
    assert line.startswith(f'vvt train: error: damaged checkpoint file {folder}/checkpoints/3/')
    assert not (tmp_path / 'w').exists()
  else:
    assert line.startswith(f'vvt train: error: task.probe.backbone {folder}: no intact checkpoint in {folder}/')
  assert 'Error:' not in line.split('(')[0]  # no exception class: a known error
