"""The synthetic motion dataset: files, and classes decidable only from order."""
import json
import os

from data_helpers import small_config
import numpy as np
import pytest

from tests.cli.test_sweep import one_line_error
from tests.cli.test_sweep import vvt_in_process
from vvt.cli import main as vvt_main
from vvt.data import pipeline
from vvt.data.writing import synthetic


def test_classes_show_the_same_frames_in_different_orders():
  for t in (8, 15, 16):
    for label in range(synthetic.MAX_CLASSES):
      order = synthetic.class_order(label, t)
      assert sorted(order.tolist()) == list(range(t))
    orders = {tuple(synthetic.class_order(c, t)) for c in range(synthetic.MAX_CLASSES)}
    assert len(orders) == synthetic.MAX_CLASSES
  # Same nuisance draw, different labels: the same set of frames.
  clips = [synthetic.render_clip(c, np.random.default_rng(7), 16, 32, noise=0)
           for c in range(synthetic.MAX_CLASSES)]
  key = lambda clip: sorted(f.tobytes() for f in clip)
  assert all(key(c) == key(clips[0]) for c in clips[1:])
  assert not np.array_equal(clips[0], clips[1])


def _nearest_centroid_accuracy(features, labels):
  """Train on even clips, test on odd ones; features standardised."""
  f = (features - features.mean(0)) / (features.std(0) + 1e-6)
  train, test = np.arange(len(f)) % 2 == 0, np.arange(len(f)) % 2 == 1
  classes = np.unique(labels)
  centroids = np.stack([f[train & (labels == c)].mean(0) for c in classes])
  d = ((f[test][:, None, :] - centroids[None]) ** 2).sum(-1)
  return (classes[d.argmin(1)] == labels[test]).mean()


def _object_rows(clip):
  """Per frame, the row holding most foreground (object) pixels."""
  grey = clip.astype(np.float32).mean(-1)
  background = np.median(grey, axis=0)  # the object is elsewhere most of the time
  fg = np.abs(grey - background) > 40
  return fg.sum(-1).argmax(-1)


def test_order_free_statistics_are_at_chance_while_motion_decides():
  num_classes, per_class, t, size = 4, 40, 16, 32
  rng = np.random.default_rng(0)
  labels = np.repeat(np.arange(num_classes), per_class)
  rng.shuffle(labels)
  clips = np.stack([synthetic.render_clip(int(c), rng, t, size) for c in labels])
  x = clips.astype(np.float32)
  # Order-free: the frame average (any pooled statistic of the set of frames).
  mean_frames = x.mean(1).reshape(len(x), -1)
  acc_mean = _nearest_centroid_accuracy(mean_frames, labels)
  # Single frames at a fixed time: the same distribution for every class.
  acc_first = _nearest_centroid_accuracy(x[:, 0].reshape(len(x), -1), labels)
  # Motion: signed row displacement between consecutive frames (on the torus).
  rows = np.stack([_object_rows(c) for c in clips])
  step = (np.diff(rows, axis=1) + size // 2) % size - size // 2
  acc_motion = _nearest_centroid_accuracy(np.sign(step).astype(np.float32),
                                          labels)
  chance = 1 / num_classes
  assert acc_mean < chance + 0.17, acc_mean
  assert acc_first < chance + 0.17, acc_first
  assert acc_motion > 0.9, acc_motion


def test_write_synthetic_files_manifest_and_pipeline(synthetic_dir, tmp_path):
  info = synthetic_dir
  d = os.path.dirname(info['train_files'])
  names = sorted(os.listdir(d))
  assert 'classes.txt' in names and 'manifest.json' in names
  assert [n for n in names if n.startswith('train-')] == [
      f'train-0000{i}-of-00003.tfrecord' for i in range(3)]
  with open(os.path.join(d, 'classes.txt')) as f:
    assert f.read().split() == list(synthetic.CLASS_NAMES[:4])
  with open(info['manifest']) as f:
    manifest = json.load(f)
  assert sum(s['videos'] for s in manifest['shards']['train']) == 40
  assert manifest['videos_per_class']['train'] == [10, 10, 10, 10]
  cfg = small_config(info['train_files'], info['eval_files'], num_classes=4,
                     num_frames=8, stride=2, image_size=32,
                     train_min_resize=32, train_max_resize=36, eval_resize=32)
  assert pipeline.num_videos(cfg, 'train') == 40
  assert pipeline.num_videos(cfg, 'test') == 10
  b = next(pipeline.make_train_iterator(cfg, 8, process_index=0, process_count=1))
  assert b['inputs'].shape == (8, 8, 32, 32, 3)


def test_cli_writes_the_same_dataset_for_the_same_seed(tmp_path):
  args = ['data', 'synthetic', '--classes', '3', '--train-clips', '6',
          '--test-clips', '3', '--frames', '8', '--frame-size', '16',
          '--train-shards', '2', '--test-shards', '1']
  assert vvt_main(args + ['--output', str(tmp_path / 'a')]) == 0
  assert vvt_main(args + ['--output', str(tmp_path / 'b')]) == 0
  for name in ('train-00000-of-00002.tfrecord', 'test-00000-of-00001.tfrecord'):
    with open(tmp_path / 'a' / name, 'rb') as fa, open(tmp_path / 'b' / name, 'rb') as fb:
      assert fa.read() == fb.read()
  with pytest.raises(ValueError, match='num_classes'):
    synthetic.write_synthetic(str(tmp_path / 'c'), num_classes=9)


def test_class_subset_relabels_in_the_given_order(tmp_path):
  info = synthetic.write_synthetic(str(tmp_path / 's'), classes=('up_and_back', 'down_and_back'),
                                   train_clips=4, test_clips=2, num_frames=8, frame_size=16)
  assert info['num_classes'] == 2 and info['class_names'] == ['up_and_back', 'down_and_back']
  assert (tmp_path / 's' / 'classes.txt').read_text().split() == ['up_and_back', 'down_and_back']
  with pytest.raises(ValueError, match='classes must be distinct names'):
    synthetic.write_synthetic(str(tmp_path / 'x'), classes=('up', 'sideways'))


def test_object_scale_grows_the_object_and_keeps_every_other_draw():
  """`object_scale` multiplies the object's side (its area by the square); everything else of the clip, drawn from
  the same generator, stays: over a black background the object's pixels only, at the same places' centres."""
  black = np.zeros((32, 32, 3), np.float32)
  def render(scale):
    return synthetic.render_clip(0, np.random.default_rng(3), 8, 32, noise=0, background=black, object_scale=scale)
  default = synthetic.render_clip(0, np.random.default_rng(3), 8, 32, noise=0, background=black)
  one, double = render(1.0), render(2.0)
  assert np.array_equal(default, one)
  area = lambda clip: (clip[0].max(-1) > 0).sum()
  assert 3.0 < area(double) / area(one) < 5.0, (area(one), area(double))
  assert set(map(tuple, double[0].reshape(-1, 3))) == set(map(tuple, one[0].reshape(-1, 3)))  # same colour


def test_object_scale_reaches_the_manifest_and_a_bad_one_is_refused_before_writing(tmp_path, capsys):
  args = ['--classes', '2', '--train-clips', '2', '--test-clips', '1', '--frames', '4', '--frame-size', '16',
          '--train-shards', '1', '--test-shards', '1']
  res = vvt_in_process(capsys, 'data', 'synthetic', '--output', str(tmp_path / 'big'), '--object-scale', '2', *args)
  assert res.returncode == 0, res.stderr
  assert json.loads((tmp_path / 'big' / 'manifest.json').read_text())['object_scale'] == 2.0
  bad = tmp_path / 'bad'
  res = vvt_in_process(capsys, 'data', 'synthetic', '--output', str(bad), *args, '--object-scale', '5', '--frames', '2')
  one_line_error(res, 'data', 'num_frames must be >= 4, got 2; object_scale must be in (0, 4], got 5')
  assert not bad.exists()
