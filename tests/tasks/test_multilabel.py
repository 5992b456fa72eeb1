"""Multi-label: AP / mAP against scikit-learn, the sigmoid loss, the aggregator and its report, the data path
(several `clip/label/index` values -> multi-hot, the converter's `a;b` rows, the synthetic variant)."""
import json

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics as sklearn_metrics  # the test extra's reference

from tests import specs
from vvt.tasks import average_precision as ap_lib
from vvt.tasks import multilabel


def _arrays(n=40, c=6, seed=0, ties=False):
  rng = np.random.default_rng(seed)
  labels = (rng.uniform(size=(n, c)) < 0.3).astype(np.int64)
  labels[:, -1] = 0  # a class without a positive: left out of the mean
  scores = rng.normal(size=(n, c)) + 1.5 * labels
  if ties:
    scores = np.round(scores, 0)
  return scores, labels


@pytest.mark.parametrize('ties', [False, True])
def test_map_equals_scikit_learn(ties):
  scores, labels = _arrays(ties=ties)
  has = labels.sum(0) > 0
  ours = ap_lib.per_class_ap(scores, labels)
  ref = [sklearn_metrics.average_precision_score(labels[:, c], scores[:, c]) for c in np.flatnonzero(has)]
  np.testing.assert_allclose(ours[has], ref, rtol=1e-12)
  assert np.isnan(ours[~has]).all()
  assert ap_lib.mean_average_precision(scores, labels) == pytest.approx(
      sklearn_metrics.average_precision_score(labels[:, has], scores[:, has], average='macro'), rel=1e-12)


def test_the_sigmoid_loss_and_the_train_metric():
  logits = jnp.array([[2.0, -1.0, 0.0], [-3.0, 4.0, 1.0]])
  targets = jnp.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
  p = 1 / (1 + np.exp(-np.asarray(logits)))
  want = -(np.asarray(targets) * np.log(p) + (1 - np.asarray(targets)) * np.log(1 - p)).mean(-1)
  np.testing.assert_allclose(multilabel.sigmoid_cross_entropy(logits, targets), want, rtol=1e-5)
  np.testing.assert_array_equal(multilabel.top1_positive(logits, targets.astype(jnp.int32)), [1.0, 0.0])
  task = multilabel.MultiLabel(num_classes=3)
  np.testing.assert_allclose(task.scores({'': logits})[''], p, rtol=1e-6)
  assert task.label_specs(4) == {'label': ((4, 3), 'int32')}


def test_the_aggregator_averages_probabilities_over_views_and_reports_ap(tmp_path):
  scores, labels = _arrays(n=10, c=4, seed=3)
  probs = 1 / (1 + np.exp(-scores))
  agg = multilabel.MultiLabelAggregator(4, num_videos=5)
  # videos v = 0..4, two views each: view scores whose mean is probs[v]; rows mixed, padding with garbage
  vi = np.array([0, 1, 2, 3, 4, 0, 1, 2, 3, 4, -1])
  offset = np.array([0.1] * 5 + [-0.1] * 5 + [0.0])[:, None]
  view_scores = np.concatenate([probs[:5], probs[:5], np.full((1, 4), 9.0)]) + offset
  view_labels = np.concatenate([labels[:5], labels[:5], np.ones((1, 4), np.int64)])
  agg.add({'': view_scores[:6]}, vi[:6], np.ones(6), {'': view_labels[:6]})
  agg.add({'': view_scores[6:]}, vi[6:], np.r_[np.ones(4), 0.0], {'': view_labels[6:]})
  agg.class_names = {'': ['a', 'b', 'c', 'd']}
  res = agg.result()
  assert res['num_videos'] == 5 and res['num_views'] == 10
  assert res['video_map'] == pytest.approx(ap_lib.mean_average_precision(probs[:5], labels[:5]), rel=1e-9)
  assert set(res['video_per_class_ap']) == {'a', 'b', 'c', 'd'}
  np.testing.assert_allclose(agg.video_scores(), probs[:5], rtol=1e-6)
  files = dict(agg.report_files(str(tmp_path / 'eval_1_test_1x1')))
  table = files[str(tmp_path / 'eval_1_test_1x1_classes.csv')].splitlines()
  assert table[0] == 'class,name,positives,ap' and len(table) == 5
  with open(tmp_path / 'ap.png', 'wb') as f:
    files[str(tmp_path / 'eval_1_test_1x1_ap.png')](f)
  assert (tmp_path / 'ap.png').read_bytes()[:4] == b'\x89PNG'


def test_views_of_one_video_with_different_labels_are_refused():
  agg = multilabel.MultiLabelAggregator(3, num_videos=1)
  agg.add({'': np.zeros((1, 3))}, np.array([0]), np.ones(1), {'': np.array([[1, 0, 0]])})
  with pytest.raises(ValueError, match='video 0 has views with different labels'):
    agg.add({'': np.zeros((1, 3))}, np.array([0]), np.ones(1), {'': np.array([[0, 1, 0]])})


def _dataset_config(files, num_classes):
  return specs.data_spec(train_files=files, eval_files=files, num_classes=num_classes, multi_label=True,
                         num_frames=4, stride=1, image_size=32, train_min_resize=34, train_max_resize=36,
                         eval_resize=34, shuffle_buffer=4, num_test_clips=2)


def test_records_with_several_labels_read_as_multi_hot(tmp_path):
  from vvt.data import pipeline
  from vvt.data.writing import synthetic
  info = synthetic.write_synthetic(str(tmp_path), num_classes=4, train_clips=12, test_clips=6, num_frames=8,
                                   frame_size=32, seed=0, train_shards=1, test_shards=1, multi_label=True)
  manifest = json.load(open(info['manifest']))
  assert manifest['multi_label'] and sum(manifest['videos_per_class']['test']) > 6  # some videos have two
  cfg = _dataset_config(info['eval_files'], 4)
  it = pipeline.make_eval_iterator(cfg, split='test', global_batch_size=5)
  rows = [b for b in it]
  labels = np.concatenate([b['label'] for b in rows])
  mask = np.concatenate([b['mask'] for b in rows])
  assert labels.shape == (len(mask), 4) and labels.dtype == np.int32
  valid = labels[mask > 0]
  assert set(valid.sum(1).tolist()) == {1, 2}  # one or two labels per video, every view
  assert (labels[mask == 0] == 0).all()  # padding: zeros
  train = next(iter(pipeline.make_train_iterator(cfg, global_batch_size=4, seed=0)))
  assert train['label'].shape == (4, 4) and set(train['label'].sum(1).tolist()) <= {1, 2}


def test_the_converter_reads_several_labels_of_a_row():
  from vvt.data.reading import video_lists
  from vvt.data.writing import dmvr_records
  classes = ['run', 'jump', 'swim']
  assert video_lists.label_index('jump;swim', classes) == (1, 2)
  assert video_lists.label_index('2;run', classes) == (2, 0)
  assert video_lists.label_index('jump', classes) == 1
  with pytest.raises(ValueError, match="'fly' is not in the class list"):
    video_lists.label_index('jump;fly', classes)
  import tensorflow as tf
  record = dmvr_records.encode_sequence_example([b'x'], (1, 2), video_id='v')
  ex = tf.train.SequenceExample.FromString(record)
  assert list(ex.context.feature[dmvr_records.LABEL_KEY].int64_list.value) == [1, 2]
