"""Fault class 1 end to end: under dataset.on_error='skip' a bad record in the evaluation set is left out of the
results and counted (`videos_skipped`); the metrics are over the other videos, and a skip-mode training run
ends with its evaluation instead of failing at it. Before: every such run ended at its evaluation with "N
evaluation videos got no view".

The data side gives a bad video's rows mask 0 and its index (`pipeline.skipped_videos`,
tests/reliability/test_silent_data_faults.py); the evaluator (vvt/train/evaluate.py) leaves those videos out.

A real tiny synthetic set gets an extra evaluation shard holding one corrupt record (not a SequenceExample), one
video whose first JPEG frame is cut and followed by garbage (a good video after it), and one record with an
out-of-range label; the real commands run on it through the CLI's `main(argv)` in the test process (`vvt train`,
then `vvt eval` with other view protocols).
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
  cut = dmvr_records.encode_sequence_example([jpegs[0][:30] + b'\x00garbage' * 20, *jpegs[1:]], 1, video_id='cut')
  # records follow the existing shard in file order: indices TEST_CLIPS .. TEST_CLIPS + 3
  dmvr_records.write_records(str(data_dir / 'test-00001-of-00001.tfrecord'),
                             [b'\x00 not a SequenceExample \xff' * 4, cut, good, bad_label])


def test_eval_leaves_out_and_counts_bad_records(tmp_path, capsys):
  data = tmp_path / 'data'
  helpers.write_tiny_dataset(data)
  _bad_eval_shard(data)
  n, bad = helpers.TEST_CLIPS + 4, 3
  wd = tmp_path / 'run'
  capsys.readouterr()
  helpers.vvt_main('train', '--config', f'{helpers.TINY}:{data}', '--workdir', str(wd),
                   '--config.dataset.on_error=skip', '--config.num_train_steps=2',
                   '--config.schedule.warmup_steps=1', '--config.checkpoint.every_steps=2',
                   '--config.eval.batch_size=8')
  out = capsys.readouterr().out
  assert f'{bad} skipped as bad records' in out, out[-2000:]
  res = json.load(open(wd / 'checkpoints' / 'eval_2_test.json'))
  assert res['videos_skipped'] == bad and res['num_videos'] == n - bad
  assert res['skipped_video_indices'] == [helpers.TEST_CLIPS + i for i in (0, 1, 3)]
  assert res['num_views'] == 3 * (n - bad)  # 1 clip x 3 crops of every good video
  rows = list(csv.DictReader(open(wd / 'checkpoints' / 'eval_2_test_1x3_videos.csv')))
  ids = [r['video_id'] for r in rows]
  assert 'good_extra' in ids and not {'bad_label', 'cut'} & set(ids) and len(ids) == n - bad
  correct = np.mean([int(r['correct']) for r in rows])
  assert res['video_top1'] == correct  # the metrics are over the good videos only

  # vvt eval (the run's own config.json) with another view protocol: results beside the run's
  assert cli_train.eval_main(['--workdir', str(wd), '--config.dataset.num_test_clips=2',
                              '--config.dataset.num_spatial_crops=1']) == 0
  other = json.load(open(wd / 'checkpoints' / 'eval_2_test_2x1.json'))
  assert other['videos_skipped'] == bad and other['num_views'] == 2 * (n - bad)
  assert other['protocol'] == '2x1' and other['views_per_video_min'] == 2
  assert json.load(open(wd / 'checkpoints' / 'eval_2_test.json'))['protocol'] == '1x3'  # not overwritten

  # whole-video views: every 16-frame video tiled with 16 / (8 frames x stride 1) = 2 clips, bad ones still left out
  assert cli_train.eval_main(['--workdir', str(wd), '--config.dataset.num_test_clips=all',
                              '--config.dataset.num_spatial_crops=1', '--config.dataset.stride=1']) == 0
  tiled = json.load(open(wd / 'checkpoints' / 'eval_2_test_allx1.json'))
  assert tiled['protocol'] == 'allx1' and tiled['num_test_clips'] == 'all' and tiled['videos_skipped'] == bad
  assert tiled['num_views'] == 2 * (n - bad) and tiled['views_per_video_min'] == tiled['views_per_video_max'] == 2
  rows = list(csv.DictReader(open(wd / 'checkpoints' / 'eval_2_test_allx1_videos.csv')))
  assert len(rows) == n - bad and {r['views'] for r in rows} == {'2'}
