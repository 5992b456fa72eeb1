"""Helpers of the data tests: tiny records and configs."""
import copy
import os

import av
import numpy as np

from vvt.config import dataset as data_config
from vvt.data.spec import DataSpec
from vvt.data.writing import dmvr_records
from vvt.data.writing import synthetic

VIDEO_CLASSES = ['red', 'green', 'blue']  # the classes of the `video_dir` fixture's list


def jpeg(frame):
  return synthetic._encode_jpeg(np.asarray(frame, np.uint8))


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


def small_config(train_files='', eval_files='', num_classes=5, class_names=None, **overrides):
  """The DataSpec of a tiny dataset section (4 frames of 16px) with `overrides`, as the pipeline takes it."""
  cfg = data_config.get_config()
  cfg.update(dict(train_files=train_files, eval_files=eval_files,
                  num_classes=num_classes, num_frames=4, stride=1, image_size=16,
                  train_min_resize=16, train_max_resize=20, eval_resize=16,
                  shuffle_buffer=8, horizontal_flip=False, prefetch=1))
  return data_spec(cfg, class_names=class_names, **overrides)


def data_spec(section, class_names=None, **overrides):
  """The DataSpec of the dataset section `section` (a ConfigDict) with `overrides` set."""
  section = copy.deepcopy(section)
  section.update(overrides)
  return DataSpec.of(section, class_names=class_names)


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


def write_footage(directory, labels=(0, 1, 2, 0, 1, 2), frames=(10, 12, 14, 9, 16, 11), size=(32, 48), gop=4,
                  classes=('a', 'b', 'c'), name='train'):
  """Videos of a smooth picture whose brightness steps by 20 a frame (so the frame of a clip shows in its pixels):
  DIR/clips/v<i>.mp4 (MPEG-4, a keyframe every `gop` frames), DIR/<name>.csv (`clips/v<i>.mp4,<class name>`) and
  DIR/classes.txt. Returns the CSV's path."""
  os.makedirs(os.path.join(directory, 'clips'), exist_ok=True)
  yy, xx = np.mgrid[0:size[0], 0:size[1]].astype(np.float32)
  lines = []
  for i, (label, n) in enumerate(zip(labels, frames, strict=True)):
    path = os.path.join(directory, 'clips', f'v{i}.mp4')
    with av.open(path, 'w') as container:
      stream = container.add_stream('mpeg4', rate=10)
      stream.height, stream.width = size
      stream.pix_fmt, stream.codec_context.gop_size, stream.bit_rate = 'yuv420p', gop, 2_000_000
      for t in range(n):
        frame = np.stack([40 + 3 * xx, 40 + 60 * label + 2 * yy, np.full(size, 10 + 20 * t)], -1)
        data = av.VideoFrame.from_ndarray(np.clip(frame, 0, 255).astype(np.uint8), format='rgb24')
        for packet in stream.encode(data):
          container.mux(packet)
      for packet in stream.encode():
        container.mux(packet)
    lines.append(f'clips/v{i}.mp4,{classes[label]}')
  with open(os.path.join(directory, f'{name}.csv'), 'w') as f:
    f.write('\n'.join(['path,label'] + lines) + '\n')
  with open(os.path.join(directory, 'classes.txt'), 'w') as f:
    f.write('\n'.join(classes) + '\n')
  return os.path.join(directory, f'{name}.csv')


def same_value(a, b):
  """Whether two numpy rows' values (nests of dicts, bytes, numbers) are equal."""
  if isinstance(a, dict):
    return isinstance(b, dict) and a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
  return bool(np.all(np.asarray(a) == np.asarray(b)))


def check_source_contract(src):
  """The `Source` protocol of a source: its attributes, every record once from the range reader, random access =
  the range reader's row, locate = the row's (source, record). Returns the rows in global order."""
  from vvt.data.reading import source
  assert isinstance(src, source.Source) and isinstance(src.frames, source.FrameReader)
  assert src.num_records > 0 and src.heads and isinstance(src.description, str)
  rows = sorted(src.records(0, src.num_records).as_numpy_iterator(), key=lambda r: int(r[2]))
  assert [int(r[2]) for r in rows] == list(range(src.num_records))  # every record once
  for i, row in enumerate(rows):
    got = src.record(i)
    assert isinstance(got, source.Row)
    assert all(same_value(x, y) for x, y in zip(got, row, strict=True)), (i, got, row)
    where, rec = src.locate(i)
    assert (str(where), int(rec)) == (row[0].decode(), int(row[1]))
  return rows


def real_rows(batch, shape, num_classes=5):
  """The mask (B,) of the real (mask=1) rows of an evaluation batch, checked: inputs of `shape`, padding rows with
  video_index and view_index -1, labels video_index % num_classes (as the tests' videos are labelled)."""
  assert batch['inputs'].shape == shape
  real = batch['mask'] == 1
  assert np.all(batch['video_index'][~real] == -1)
  assert np.all(batch['view_index'][~real] == -1)
  np.testing.assert_array_equal(batch['label'][real], batch['video_index'][real] % num_classes)
  return real
