"""Multi-view aggregation: per-video averaging with padding, every video counted once."""
import numpy as np
import pytest

from vvt.train.evaluate import MultiViewAggregator


def _views(num_videos=7, views=6, classes=5, seed=0):
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
  agg = MultiViewAggregator({'': 5}, num_videos=7)
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
  agg = MultiViewAggregator({'': 5}, num_videos=4)  # video 3 never arrives
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
