"""Issue 10 item 1: under dataset.on_error='skip' a bad record in the evaluation set is left out of the
results and counted (`videos_skipped`); the metrics are over the other videos, and a skip-mode training run
ends with its evaluation instead of failing at it.

A real tiny synthetic set gets an extra evaluation shard holding one corrupt record (not a SequenceExample)
and one record with an out-of-range label; the real commands run on it through the CLI's `main(argv)` in the test
process (`vvt train`, then `vvt eval` with another view protocol).
"""
import csv
import json
import sys

import numpy as np
import tensorflow as tf

from vvt.cli import train as cli_train
from vvt.data.writing import dmvr_records
from vvt.data.writing import synthetic

sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[1] / 'train'))
import train_helpers as helpers  # noqa: E402


def _bad_eval_shard(data_dir):
  frames = synthetic.render_clip(0, np.random.default_rng(0), 16, 64)
  jpegs = [tf.io.encode_jpeg(f).numpy() for f in frames]
  good = dmvr_records.encode_sequence_example(jpegs, 1, video_id='good_extra')
  bad_label = dmvr_records.encode_sequence_example(jpegs, 99, video_id='bad_label')
  # records follow the existing shard in file order: indices TEST_CLIPS .. TEST_CLIPS + 2
  dmvr_records.write_records(str(data_dir / 'test-00001-of-00001.tfrecord'),
                         [b'\x00 not a SequenceExample \xff' * 4, good, bad_label])


def test_eval_leaves_out_and_counts_bad_records(tmp_path, capsys):
  data = tmp_path / 'data'
  helpers.write_tiny_dataset(data)
  _bad_eval_shard(data)
  n = helpers.TEST_CLIPS + 3
  wd = tmp_path / 'run'
  capsys.readouterr()
  helpers.vvt_main('train', '--config', f'{helpers.TINY}:{data}', '--workdir', str(wd),
                   '--config.dataset.on_error=skip', '--config.num_train_steps=2',
                   '--config.schedule.warmup_steps=1', '--config.checkpoint.every_steps=2',
                   '--config.eval.batch_size=8')
  out = capsys.readouterr().out
  assert '2 skipped as bad records' in out, out[-2000:]
  res = json.load(open(wd / 'checkpoints' / 'eval_2_test.json'))
  assert res['videos_skipped'] == 2 and res['num_videos'] == n - 2
  assert res['skipped_video_indices'] == [helpers.TEST_CLIPS, helpers.TEST_CLIPS + 2]
  assert res['num_views'] == 3 * (n - 2)  # 1 clip x 3 crops of every good video
  rows = list(csv.DictReader(open(wd / 'checkpoints' / 'eval_2_test_1x3_videos.csv')))
  ids = [r['video_id'] for r in rows]
  assert 'good_extra' in ids and 'bad_label' not in ids and len(ids) == n - 2
  correct = np.mean([int(r['correct']) for r in rows])
  assert res['video_top1'] == correct  # the metrics are over the good videos only

  # vvt eval (the run's own config.json) with another view protocol: results beside the run's
  assert cli_train.eval_main(['--workdir', str(wd), '--config.dataset.num_test_clips=2',
                              '--config.dataset.num_spatial_crops=1']) == 0
  other = json.load(open(wd / 'checkpoints' / 'eval_2_test_2x1.json'))
  assert other['videos_skipped'] == 2 and other['num_views'] == 2 * (n - 2)
  assert other['protocol'] == '2x1' and other['views_per_video_min'] == 2
  assert json.load(open(wd / 'checkpoints' / 'eval_2_test.json'))['protocol'] == '1x3'  # not overwritten

  # whole-video views: every 16-frame video tiled with 16 / (8 frames x stride 1) = 2 clips, bad ones still left out
  assert cli_train.eval_main(['--workdir', str(wd), '--config.dataset.num_test_clips=all',
                              '--config.dataset.num_spatial_crops=1', '--config.dataset.stride=1']) == 0
  tiled = json.load(open(wd / 'checkpoints' / 'eval_2_test_allx1.json'))
  assert tiled['protocol'] == 'allx1' and tiled['num_test_clips'] == 'all' and tiled['videos_skipped'] == 2
  assert tiled['num_views'] == 2 * (n - 2) and tiled['views_per_video_min'] == tiled['views_per_video_max'] == 2
  rows = list(csv.DictReader(open(wd / 'checkpoints' / 'eval_2_test_allx1_videos.csv')))
  assert len(rows) == n - 2 and {r['views'] for r in rows} == {'2'}
