"""Helpers of the data tests: tiny records and configs."""
import os

import av
import numpy as np
from vvt.config import dataset as data_config
from vvt.data.writing import dmvr_records
from vvt.data.writing import synthetic

VIDEO_CLASSES = ['red', 'green', 'blue']  # the classes of the `video_dir` fixture's list


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
      records.append(dmvr_records.encode_sequence_example(
          solid_video(20 * label + 10, num_frames), label, video_id=f'v{k}'))
      k += 1
    path = os.path.join(directory, f'{prefix}.tfrecord-{i:05d}-of-{n:05d}')
    dmvr_records.write_records(path, records)
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


def make_video(path, colour, num_frames=10, fps=10, size=(40, 56)):
  """An mp4 of constant `colour` (RGB), height x width = size."""
  with av.open(path, 'w') as container:
    stream = container.add_stream('mpeg4', rate=fps)
    stream.height, stream.width = size
    stream.pix_fmt = 'yuv420p'
    for t in range(num_frames):
      frame = np.zeros(size + (3,), np.uint8)
      frame[...] = colour
      frame[:2, :2] = t  # frames differ a little
      for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
        container.mux(packet)
    for packet in stream.encode():
      container.mux(packet)
