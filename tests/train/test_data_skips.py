"""Bad records skipped under dataset.on_error='skip' are counted in the training metrics."""
import json
import shutil

import numpy as np
import tensorflow as tf
import train_helpers as common


def test_skipped_records_are_reported_in_train_metrics(tiny_data, tmp_path):
  from vvt.data.writing import dmvr_records
  from vvt.data.writing import synthetic
  data = tmp_path / 'data'
  shutil.copytree(tiny_data, data)
  frames = synthetic.render_clip(0, np.random.default_rng(0), 16, 64)
  jpegs = [tf.io.encode_jpeg(f).numpy() for f in frames]
  bad = [dmvr_records.encode_sequence_example(jpegs, 99, video_id=f'bad_{i}') for i in range(40)]
  dmvr_records.write_records(str(data / 'train-00002-of-00002.tfrecord'), bad)  # label 99 of 2 classes
  wd = tmp_path / 'run'
  common.vvt_main('train', '--config', f'{common.TINY}:{data}', '--workdir', str(wd),  # in-process: its files are read
                  '--config.dataset.on_error=skip', '--config.num_train_steps=4', '--config.eval.batch_size=32')
  train = [json.loads(l) for l in open(wd / 'metrics.jsonl')]
  train = [r for r in train if r['kind'] == 'train']
  assert train and train[-1]['data_skipped_bad_label'] >= 1
  assert train[-1]['data_skipped_corrupt'] == 0


def test_a_run_names_only_its_own_skips():
  """A second run in one process (a command called through `main(argv)`) does not name the records an earlier run
  skipped: the trainer starts each run's account (`vvt.data.start_skip_account`)."""
  from vvt.data import start_skip_account
  from vvt.data.reading import errors
  from vvt.data.reading import skips
  errors._note_skip(b'/earlier/run.tfrecord', 3, 1, b'an earlier run\'s bad record')
  assert '/earlier/run.tfrecord: record 3' in skips.new_skips_line()
  errors._note_skip(b'/earlier/run.tfrecord', 4, 1, b'another')
  start_skip_account()
  assert skips.new_skips_line() is None and errors.skipped_records() == {}
  errors._note_skip(b'/this/run.tfrecord', 0, 1, b'this run\'s')
  line = skips.new_skips_line()
  assert '/this/run.tfrecord: record 0' in line and '/earlier/' not in line
