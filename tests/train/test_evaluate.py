"""Multi-view aggregation: per-video averaging with padding, every video counted once; skipped videos;
the report (per-class accuracy, confusion matrix, per-video CSV, files named by protocol)."""
import csv
import json

import numpy as np
import pytest

from vvt.tasks import eval_report
from vvt.tasks.multiview import MultiViewAggregator
from vvt.train import evaluate as evaluate_lib


def _views(num_videos=7, views=6, classes=7, seed=0):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, classes, size=num_videos)
  logits = rng.normal(size=(num_videos, views, classes)).astype(np.float32) * 3
  rows = [(v, k) for v in range(num_videos) for k in range(views)]
  rng.shuffle(rows)  # views of many videos mixed across batches
  return labels, logits, rows


def _feed(agg, labels, logits, rows, batch=8, transform=lambda s: s):
  pad = (-len(rows)) % batch
  rows = rows + [(-1, 0)] * pad
  for i in range(0, len(rows), batch):
    chunk = rows[i:i + batch]
    vi = np.array([v for v, _ in chunk])
    mask = (vi >= 0).astype(np.float32)
    # padded rows carry garbage that would change every metric if counted
    s = np.stack([logits[v, k] if v >= 0 else np.full(logits.shape[-1], 1e6, np.float32)
                  for v, k in chunk])
    lab = np.array([labels[v] if v >= 0 else 0 for v, _ in chunk])
    agg.add({'': transform(s)}, vi, mask, {'': lab})


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize('batch', [1, 5, 8, 42])
def test_video_average_of_logits_matches_reference(batch):
  labels, logits, rows = _views()
  agg = MultiViewAggregator({'': 7}, num_videos=7)
  _feed(agg, labels, logits, rows, batch=batch)
  res = agg.result()
  ref_video = (logits.mean(1).argmax(-1) == labels).mean()
  ref_clip = (logits.argmax(-1) == labels[:, None]).mean()
  top5 = np.argsort(-logits.mean(1), -1)[:, :5]
  assert res['num_videos'] == 7 and res['num_views'] == 42
  assert res['views_per_video_min'] == res['views_per_video_max'] == 6
  assert res['video_top1'] == pytest.approx(ref_video)
  assert res['clip_top1'] == pytest.approx(ref_clip)
  assert res['video_top5'] == pytest.approx((top5 == labels[:, None]).any(-1).mean())
  np.testing.assert_allclose(agg.video_scores()[''], logits.mean(1), rtol=1e-5)


def test_softmax_averaging_differs_from_logit_averaging():
  # a view with huge logits dominates a logit average but not a softmax average
  labels = np.array([0])
  logits = np.array([[[0.0, 50.0], [3.0, 0.0], [3.0, 0.0]]], np.float32)
  rows = [(0, 0), (0, 1), (0, 2)]
  a = MultiViewAggregator({'': 2}, 1)
  _feed(a, labels, logits, rows)
  b = MultiViewAggregator({'': 2}, 1)
  _feed(b, labels, logits, rows, transform=_softmax)
  assert a.result()['video_top1'] == 0.0
  assert b.result()['video_top1'] == 1.0


def test_missing_video_and_label_clash_are_errors():
  labels, logits, rows = _views(num_videos=3, views=2)
  agg = MultiViewAggregator({'': 7}, num_videos=4)  # video 3 never arrives
  _feed(agg, labels, logits, rows)
  with pytest.raises(ValueError, match='1 of 4 evaluation videos got no view'):
    agg.result()
  agg = MultiViewAggregator({'': 5}, num_videos=1)
  agg.add({'': np.zeros((2, 5))}, np.array([0, 0]), np.ones(2), {'': np.array([1, 2])})
  with pytest.raises(ValueError, match='different labels'):
    agg.add({'': np.zeros((1, 5))}, np.array([0]), np.ones(1), {'': np.array([3])})


def test_out_of_range_video_index_on_a_valid_row_is_an_error():
  agg = MultiViewAggregator({'': 5}, num_videos=2)
  with pytest.raises(ValueError, match='video_index'):
    agg.add({'': np.zeros((1, 5))}, np.array([2]), np.ones(1), {'': np.array([0])})


def test_epic_verb_noun_action_accuracy():
  # 3 videos x 2 views; action is right only when both heads are right (per video).
  verb = np.array([[[5, 0, 0], [5, 0, 0]],      # video 0: verb 0
                   [[0, 5, 0], [0, 5, 0]],      # video 1: verb 1
                   [[0, 0, 5], [0, 0, 5]]], np.float32)  # video 2: verb 2
  noun = np.array([[[0, 5], [0, 5]], [[5, 0], [5, 0]], [[0, 5], [0, 5]]], np.float32)
  yv, yn = np.array([0, 1, 0]), np.array([1, 1, 1])
  agg = MultiViewAggregator({'verb': 3, 'noun': 2}, 3)
  vi = np.repeat(np.arange(3), 2)
  agg.add({'verb': verb.reshape(6, 3), 'noun': noun.reshape(6, 2)}, vi, np.ones(6),
          {'verb': yv[vi], 'noun': yn[vi]})
  r = agg.result()
  assert r['video_top1_verb'] == pytest.approx(2 / 3)   # videos 0, 1
  assert r['video_top1_noun'] == pytest.approx(2 / 3)   # videos 0, 2
  assert r['video_top1_action'] == pytest.approx(1 / 3)  # video 0 only
  assert r['clip_top1_action'] == pytest.approx(1 / 3)


def test_top5_is_reported_only_with_more_than_five_classes():
  for classes, has_top5 in ((4, False), (5, False), (6, True)):
    labels, logits, rows = _views(num_videos=4, views=2, classes=classes)
    agg = MultiViewAggregator({'': classes}, num_videos=4)
    _feed(agg, labels, logits, rows)
    res = agg.result()
    assert ('video_top5' in res) == has_top5 and ('clip_top5' in res) == has_top5
    assert 'video_top1' in res


def test_skipped_videos_are_left_out_and_counted():
  labels, logits, rows = _views(num_videos=6, views=3, classes=7)
  agg = MultiViewAggregator({'': 7}, num_videos=6)
  bad = {2, 4}
  # a skipped video's rows come with mask 0 and its index (vvt.data.pipeline.skipped_videos)
  good_rows = [r for r in rows if r[0] not in bad]
  _feed(agg, labels, logits, good_rows)
  agg.skip(np.array([2, 4, 4]))
  res = agg.result()
  keep = np.array([0, 1, 3, 5])
  assert res['videos_skipped'] == 2 and res['skipped_video_indices'] == [2, 4]
  assert res['num_videos'] == 4
  assert res['video_top1'] == pytest.approx((logits[keep].mean(1).argmax(-1) == labels[keep]).mean())
  agg.skip(np.arange(6))
  with pytest.raises(ValueError, match='all 6 evaluation videos were skipped'):
    agg.result()


def test_per_class_accuracy_and_confusion_matrix():
  labels = np.array([0, 0, 1, 1, 1, 2])
  pred = np.array([0, 1, 1, 1, 0, 2])
  conf = eval_report.confusion_matrix(pred, labels, 4)
  np.testing.assert_array_equal(conf[:3, :3], [[1, 1, 0], [1, 2, 0], [0, 0, 1]])
  acc = eval_report.per_class_accuracy(conf)
  np.testing.assert_allclose(acc[:3], [0.5, 2 / 3, 1.0])
  assert np.isnan(acc[3])  # no video of class 3: not part of the mean
  assert eval_report.mean_class_accuracy(acc) == pytest.approx((0.5 + 2 / 3 + 1) / 3)


def _written(tmp_path, protocol='1x3', run_protocol='1x3', step=5):
  (tmp_path / 'config.json').write_text(json.dumps(
      {'dataset': dict(zip(('num_test_clips', 'num_spatial_crops'), map(int, run_protocol.split('x')), strict=True))}))
  scores = np.array([[[3., 0, 0, 0]], [[0, 3., 0, 0]], [[0, 3., 0, 0]], [[0, 0, 0, 3.]]], np.float32)
  labels = np.array([0, 1, 2, 3])
  agg = MultiViewAggregator({'': 4}, num_videos=5)
  agg.class_names = {'': ('down', 'up', 'down_and_back', 'up_and_back')}
  agg.video_ids = ['a', 'b', 'c', 'd', 'bad']
  agg.add({'': scores[:, 0]}, np.arange(4), np.ones(4), {'': labels})
  agg.skip([4])
  res = dict(agg.result(), protocol=protocol)
  return evaluate_lib.write_results(str(tmp_path), step, 'test', res, agg), res


def test_write_results_report_files(tmp_path):
  path, res = _written(tmp_path)
  ck = tmp_path / 'checkpoints'
  assert path == str(ck / 'eval_5_test_1x3.json')
  assert res['video_top1'] == 0.75 and res['videos_skipped'] == 1 and 'video_top5' not in res
  assert res['video_per_class_accuracy'] == {'down': 1.0, 'up': 1.0, 'down_and_back': 0.0, 'up_and_back': 1.0}
  assert res['video_mean_class_accuracy'] == 0.75
  assert json.load(open(ck / 'eval_5_test.json'))['video_top1'] == 0.75  # the run's own protocol
  rows = list(csv.DictReader(open(ck / 'eval_5_test_1x3_videos.csv')))
  assert [r['video_id'] for r in rows] == ['a', 'b', 'c', 'd']  # the skipped video is left out
  assert rows[2]['label_name'] == 'down_and_back' and rows[2]['top1_name'] == 'up'
  assert rows[2]['correct'] == '0' and rows[0]['correct'] == '1'
  assert [k for k in rows[0] if k.startswith('top')][-2:] == ['top4_name', 'top4_score']  # k <= C
  assert float(rows[0]['top1_score']) == pytest.approx(np.exp(3) / (np.exp(3) + 3))
  conf = list(csv.reader(open(ck / 'eval_5_test_1x3_confusion.csv')))
  assert conf[0] == ['true \\ predicted', 'down', 'up', 'down_and_back', 'up_and_back']
  assert conf[3] == ['down_and_back', '0', '1', '0', '0']
  classes = list(csv.DictReader(open(ck / 'eval_5_test_1x3_classes.csv')))
  assert classes[2]['accuracy'] == '0' and classes[1]['videos'] == '1'
  assert (ck / 'eval_5_test_1x3_confusion.png').read_bytes()[:4] == b'\x89PNG'
  z = np.load(ck / 'eval_5_test_1x3.npz')
  assert z['video_ids'].tolist()[-1] == 'bad' and z['skipped'].tolist() == [False] * 4 + [True]
  assert z['class_names'].tolist()[0] == 'down'


def test_another_protocol_never_overwrites_the_runs_results(tmp_path):
  _written(tmp_path, protocol='1x3')
  legacy = tmp_path / 'checkpoints' / 'eval_5_test.json'
  before = legacy.read_text()
  path, _ = _written(tmp_path, protocol='2x1')
  assert path.endswith('eval_5_test_2x1.json') and legacy.read_text() == before
  assert json.load(open(legacy))['protocol'] == '1x3'
  # a step with no results yet gets them under any protocol
  _written(tmp_path, protocol='2x1', step=7)
  assert json.load(open(tmp_path / 'checkpoints' / 'eval_7_test.json'))['protocol'] == '2x1'


def test_two_heads_report_per_head_and_action(tmp_path):
  agg = MultiViewAggregator({'verb': 3, 'noun': 2}, 3)
  vi = np.arange(3)
  verb = np.eye(3, dtype=np.float32)[[0, 1, 2]] * 5
  noun = np.eye(2, dtype=np.float32)[[1, 0, 1]] * 5
  agg.add({'verb': verb, 'noun': noun}, vi, np.ones(3), {'verb': np.array([0, 1, 0]), 'noun': np.array([1, 1, 1])})
  res = dict(agg.result(), protocol='1x1')
  assert res['video_mean_class_accuracy_verb'] == pytest.approx((0.5 + 1.0) / 2)
  assert res['video_mean_class_accuracy_action'] == pytest.approx((0.5 + 0.0) / 2)  # (0,1): 1 of 2, (1,1): 0
  evaluate_lib.write_results(str(tmp_path), 3, 'test', res, agg)
  ck = tmp_path / 'checkpoints'
  for name in ('classes_verb.csv', 'classes_noun.csv', 'classes_action.csv', 'confusion_verb.png',
               'confusion_noun.csv', 'videos.csv'):
    assert (ck / f'eval_3_test_1x1_{name}').exists(), name
  rows = list(csv.DictReader(open(ck / 'eval_3_test_1x1_videos.csv')))
  assert [r['correct_action'] for r in rows] == ['1', '0', '0']
  assert 'top1_name_verb' in rows[0] and 'top1_name_noun' in rows[0]
