"""Helpers of the data tests: tiny records and configs."""
import os

import numpy as np
from vvt.config import dataset as data_config
from vvt.data import synthetic
from vvt.data import tfrecord


def jpeg(frame):
  return synthetic._encode_jpeg(np.asarray(frame, np.uint8))  # pylint: disable=protected-access


def solid_video(value, num_frames, size=(24, 32)):
  """Frames of constant grey `value` (+ frame index), so a batch reveals its source."""
  return [jpeg(np.full(size + (3,), value + t, np.uint8)) for t in range(num_frames)]


def write_labelled_files(directory, videos_per_file=(3, 4, 2), num_frames=6,
                         num_classes=5, prefix='data'):
  """Files whose video k (global order) has label k % num_classes and grey 20*label.

  Returns the list of files.
  """
  files, k = [], 0
  n = len(videos_per_file)
  for i, count in enumerate(videos_per_file):
    records = []
    for _ in range(count):
      label = k % num_classes
      records.append(tfrecord.encode_sequence_example(
          solid_video(20 * label + 10, num_frames), label, video_id=f'v{k}'))
      k += 1
    path = os.path.join(directory, f'{prefix}.tfrecord-{i:05d}-of-{n:05d}')
    tfrecord.write_records(path, records)
    files.append(path)
  return files


def small_config(train_files='', eval_files='', num_classes=5, **overrides):
  cfg = data_config.get_config()
  cfg.update(dict(train_files=train_files, eval_files=eval_files,
                  num_classes=num_classes, num_frames=4, stride=1, image_size=16,
                  train_min_resize=16, train_max_resize=20, eval_resize=16,
                  shuffle_buffer=8, horizontal_flip=False, prefetch=1))
  cfg.update(overrides)
  return cfg
