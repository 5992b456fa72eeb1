"""Fault class 1 end to end: a skip-mode training run whose evaluation split holds bad records finishes, leaves
the bad videos out of the metrics and counts them (`videos_skipped`).

The data side gives a bad video's rows mask 0 and its index (`pipeline.skipped_videos`,
tests/reliability/test_silent_data_faults.py); the evaluator (vvt/train/evaluate.py) leaves those videos out.
Before: every such run ended at its evaluation with "N evaluation videos got no view".
"""
import json
import os
import shutil
import sys

import numpy as np
import tensorflow as tf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'tests', 'train'))
import train_helpers  # noqa: E402


def test_skip_mode_run_evaluates_the_good_videos_and_counts_the_skipped(tmp_path):
  from vvt.data.writing import dmvr_records
  from vvt.data.writing import synthetic
  data = tmp_path / 'data'
  shutil.copytree(train_helpers.write_tiny_dataset(tmp_path / 'base'), data)
  test_file = str(data / 'test-00000-of-00001.tfrecord')
  good = [r.numpy() for r in tf.data.TFRecordDataset(test_file)]
  frames = [tf.io.encode_jpeg(f).numpy() for f in synthetic.render_clip(0, np.random.default_rng(0), 16, 64)]
  frames[0] = frames[0][:30] + b'\x00garbage' * 20
  bad = dmvr_records.encode_sequence_example(frames, 1, video_id='bad')
  dmvr_records.write_records(test_file, good[:3] + [bad] + good[3:])  # video 3 of 11 is bad
  wd = tmp_path / 'run'
  train_helpers.vvt_main('train', '--config', f'{train_helpers.TINY}:{data}', '--workdir', str(wd),  # in-process
                         '--config.dataset.on_error=skip', '--config.num_train_steps=4')
  results = json.loads((wd / 'checkpoints' / 'eval_4_test.json').read_text())
  assert results['videos_skipped'] == 1
  assert results['num_videos'] == len(good)  # the metrics are over the 10 good videos
  assert 0.0 <= results['video_top1'] <= 1.0
