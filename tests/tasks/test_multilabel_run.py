"""A multi-label run end to end (the trainer, a few steps): sigmoid loss, train metric, mAP results equal to
scikit-learn's on the saved per-video arrays, the per-class AP table and PNG. That such a run learns (mAP well
above chance) is a longer run: docs/tasks.md gives its command and figures."""
import json
import math
import sys

import numpy as np
from sklearn import metrics as sklearn_metrics  # the test extra's reference

from tests.conftest import REPO
from vvt.config import run_spec
from vvt.data.writing import synthetic
from vvt.train import checkpoints
from vvt.train import trainer

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import tiny_config  # noqa: E402


def test_a_multilabel_run_trains_and_reports_map(tmp_path):
  data = tmp_path / 'data'
  synthetic.write_synthetic(str(data), num_classes=4, train_clips=16, test_clips=8, num_frames=8, frame_size=32,
                            seed=2, train_shards=1, test_shards=1, multi_label=True)
  c = tiny_config.get_config(f'{data},divided')
  c.task.name, c.dataset.multi_label = 'multilabel', True
  c.num_frames, c.image_size, c.dataset.stride = 8, 32, 1
  c.dataset.train_min_resize, c.dataset.train_max_resize, c.dataset.eval_resize = 34, 36, 34
  c.num_train_steps, c.checkpoint.every_steps, c.log_every_steps = 4, 4, 2
  c.loss.mixup_alpha = 0.5
  res = trainer.train_and_evaluate(run_spec.resolve(c), str(tmp_path / 'run'), log=lambda *a: None)
  wd = tmp_path / 'run'
  train = [json.loads(l) for l in open(wd / 'metrics.jsonl') if '"train"' in l]
  assert [r['step'] for r in train] == [2, 4] and all(0 <= r['top1_positive'] <= 1 for r in train)
  assert all(math.isfinite(r['loss']) and 'accuracy' not in r for r in train)
  saved = json.load(open(checkpoints.eval_results_path(str(wd), 4, 'test')))
  arrays = np.load(str(wd / 'checkpoints' / 'eval_4_test.npz'))
  labels, scores = arrays['video_labels'], arrays['video_scores']
  assert labels.shape == scores.shape == (8, 4) and set(labels.sum(1).tolist()) <= {1, 2}
  assert ((scores > 0) & (scores < 1)).all()  # averaged sigmoid probabilities
  has = labels.sum(0) > 0
  assert saved['video_map'] == res['video_map']
  assert math.isclose(saved['video_map'], sklearn_metrics.average_precision_score(
      labels[:, has], scores[:, has], average='macro'), rel_tol=1e-6)
  assert set(saved['video_per_class_ap']) == set(saved['class_names']) and 0 <= saved['clip_map'] <= 1
  prefix = wd / 'checkpoints' / 'eval_4_test_1x3'
  assert (prefix.parent / (prefix.name + '_classes.csv')).read_text().startswith('class,name,positives,ap\n')
  assert (prefix.parent / (prefix.name + '_ap.png')).read_bytes()[:4] == b'\x89PNG'
