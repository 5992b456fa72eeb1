"""A probe run end to end (the trainer, a few steps): the backbone of a finished run or of a converted folder,
frozen (its bytes unchanged in the probe run's checkpoint), a grid of probes trained in one run, the results table
with the best probe; single-label with linear probes, multi-label with attentive probes."""
import json
import sys

import jax
import numpy as np
import pytest

from tests.conftest import REPO
from vvt.config import run_spec
from vvt.data.writing import synthetic
from vvt.train import checkpoints
from vvt.train import trainer

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import tiny_config  # noqa: E402


def _data(path, multi_label):
  synthetic.write_synthetic(str(path), num_classes=4, train_clips=16, test_clips=8, num_frames=8, frame_size=32,
                            seed=2, train_shards=1, test_shards=1, multi_label=multi_label)
  return path


def _config(data):
  c = tiny_config.get_config(f'{data},divided')
  c.num_frames, c.image_size, c.dataset.stride = 8, 32, 1
  c.dataset.train_min_resize, c.dataset.train_max_resize, c.dataset.eval_resize = 34, 36, 34
  c.num_train_steps, c.checkpoint.every_steps, c.log_every_steps = 3, 3, 3
  return c


@pytest.fixture(scope='module')
def backbone_run(tmp_path_factory):
  """A finished classification run (3 steps): the backbone's checkpoint."""
  tmp = tmp_path_factory.mktemp('backbone')
  workdir = str(tmp / 'run')
  trainer.train_and_evaluate(run_spec.resolve(_config(_data(tmp / 'data', False))), workdir, log=lambda *a: None)
  return workdir


@pytest.fixture(scope='module')
def converted_folder(backbone_run, tmp_path_factory):
  """A params-only folder as the converters write them, its classifier another dataset's (7 classes)."""
  params = dict(checkpoints.load_params(backbone_run)[0])
  params['head'] = {'output_projection': {'kernel': np.ones((32, 7), np.float32), 'bias': np.ones(7, np.float32)}}
  folder = str(tmp_path_factory.mktemp('converted') / 'k7')
  checkpoints.save_params(folder, params)
  return folder


def _leaves(params) -> dict:
  return {jax.tree_util.keystr(k): np.asarray(v) for k, v in jax.tree_util.tree_leaves_with_path(params)}


@pytest.mark.parametrize('multi_label,head', [(False, 'linear'), (True, 'attentive')])
def test_a_probe_run_trains_a_grid_on_a_frozen_backbone(tmp_path, backbone_run, converted_folder, multi_label,
                                                          head):
  backbone = converted_folder if multi_label else backbone_run  # a converted folder, a vvt run
  c = _config(_data(tmp_path / 'data', multi_label))
  c.task.name = 'probe'
  c.task.probe.base, c.task.probe.head = ('multilabel' if multi_label else 'classification'), head
  c.task.probe.lrs, c.task.probe.weight_decays = (0.1, 0.01), (0.0, 0.05)
  c.task.probe.num_heads, c.task.probe.backbone = 2, backbone
  c.dataset.multi_label = multi_label
  c.optimizer.name, c.optimizer.weight_decay = 'adamw', 0.1
  wd = tmp_path / 'run'
  res = trainer.train_and_evaluate(run_spec.resolve(c), str(wd), log=lambda *a: None)
  key = 'video_map' if multi_label else 'video_top1'
  table = res['probes']
  assert [(r['probe'], r['lr'], r['weight_decay']) for r in table] == [
      ('probe_0', 0.1, 0.0), ('probe_1', 0.1, 0.05), ('probe_2', 0.01, 0.0), ('probe_3', 0.01, 0.05)]
  best = max(table, key=lambda r: r[key])
  assert res['best_probe'] == best['probe'] and res[key] == best[key]
  saved = json.load(open(checkpoints.eval_results_path(str(wd), 3, 'test')))
  assert saved['best_probe'] == res['best_probe'] and saved['probes'] == table
  if multi_label:  # the data's class names reach the best probe's per-class table
    assert saved['class_names'] == list(synthetic.CLASS_NAMES[:4]) and len(saved['video_per_class_ap']) == 4
  csv = (wd / 'checkpoints' / 'eval_3_test_1x3_probes.csv').read_text().splitlines()
  assert csv[0] == f'probe,lr,weight_decay,{key}' and len(csv) == 5
  # the backbone: the bytes of the backbone run's params, untouched by 3 steps of the probes' optimisers
  before = _leaves(checkpoints.load_params(backbone)[0])
  after = _leaves(checkpoints.load_params(str(wd))[0])
  probes = {k for k in after if k.startswith("['probes']")}
  assert len(probes) > 0 and set(after) - probes == set(before)
  for k, v in before.items():
    if not k.startswith("['head']"):  # the backbone's classifier is not loaded (the probes classify)
      assert v.tobytes() == after[k].tobytes(), k
    else:
      assert after[k].shape[-1] == 4
