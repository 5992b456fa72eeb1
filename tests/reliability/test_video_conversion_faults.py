"""Fault class 4: `vvt data convert` never stores a cut-short video as ok, never loses a row, never keeps
shards made with other options.

Real mp4 files (PyAV), a real CSV, the real command (in process through its CLI entry point); the shards are
read back record by record.
"""
import json

import av
import numpy as np
import pytest
import tensorflow as tf

from vvt.cli import main as vvt_main
from vvt.data.writing import video_shards

CLASSES = ['a', 'b']


def make_mp4(path, num_frames=40, size=(40, 56), fps=10):
  """An mp4 whose index (moov) comes first, as streaming tools write it: cut short, it still declares all
  its frames."""
  with av.open(str(path), 'w', options={'movflags': 'faststart'}) as container:
    stream = container.add_stream('mpeg4', rate=fps)
    stream.height, stream.width = size
    stream.pix_fmt = 'yuv420p'
    for t in range(num_frames):
      frame = np.random.default_rng(t).integers(0, 255, size + (3,), dtype=np.uint8)
      for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
        container.mux(packet)
    for packet in stream.encode():
      container.mux(packet)
  return str(path)


def cut(path, fraction=0.5):
  data = open(path, 'rb').read()
  with open(path, 'wb') as f:
    f.write(data[:int(len(data) * fraction)])


def run(tmp_path, csv_name='videos.csv', shards=2, extra=()):
  code = vvt_main(['data', 'convert', '--input', str(tmp_path / csv_name), '--classes',
                   str(tmp_path / 'classes.txt'), '--output', str(tmp_path / 'out' / 'train'),
                   '--shards', str(shards), '--short-side', '32', '--workers', '1', '--no-progress', *extra])
  manifest = tmp_path / 'out' / 'train.manifest.json'
  return code, json.loads(manifest.read_text()) if manifest.exists() else None


def shard_contents(tmp_path, shards):
  """{video_id: (shard, number of frames, frame height)} of every record of every shard."""
  out = {}
  for s in range(shards):
    path = video_shards.shard_path(str(tmp_path / 'out' / 'train'), s, shards)
    for raw in tf.data.TFRecordDataset(path):
      ex = tf.train.SequenceExample.FromString(raw.numpy())
      vid = ex.context.feature['video_id'].bytes_list.value[0].decode()
      frames = ex.feature_lists.feature_list['image/encoded'].feature
      height = int(tf.io.extract_jpeg_shape(frames[0].bytes_list.value[0])[0])
      assert vid not in out, f'{vid} is in two shards'
      out[vid] = (s, len(frames), height)
  return out


def write_list(tmp_path, names, csv_name='videos.csv'):
  (tmp_path / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')
  (tmp_path / csv_name).write_text('path,label\n' + ''.join(f'{n},{CLASSES[i % 2]}\n' for i, n in enumerate(names)))


def test_an_mp4_cut_at_half_is_partial_never_ok(tmp_path, capsys):
  for i in range(3):
    make_mp4(tmp_path / f'v{i}.mp4')
  cut(str(tmp_path / 'v1.mp4'))
  write_list(tmp_path, ['v0.mp4', 'v1.mp4', 'v2.mp4'])
  code, manifest = run(tmp_path)
  err = capsys.readouterr().err.strip().splitlines()
  assert code == 1 and len(err) == 1 and 'v1.mp4' in err[0] and 'partial' in err[0]
  by_path = {v['path']: v for v in manifest['videos']}
  assert by_path['v1.mp4']['status'] == 'partial'
  assert 'decoded 14 of the 40 frames' in by_path['v1.mp4']['reason']
  assert [f['path'] for f in manifest['failures']] == ['v1.mp4']
  contents = shard_contents(tmp_path, 2)
  assert sorted(contents) == ['v0.mp4', 'v2.mp4']  # the cut video is in no shard
  assert all(n == 40 for _, n, _ in contents.values())


def test_rows_added_between_runs_each_land_in_exactly_one_shard(tmp_path):
  names = [f'v{i}.mp4' for i in range(7)]
  for n in names:
    make_mp4(tmp_path / n, num_frames=6)
  write_list(tmp_path, names[:4])
  code, first = run(tmp_path, shards=2)
  assert code == 0 and first['totals']['ok'] == 4
  write_list(tmp_path, names)  # three rows appended
  code, second = run(tmp_path, shards=2)
  assert code == 0
  contents = shard_contents(tmp_path, 2)
  assert sorted(contents) == names, 'every row of the list in exactly one shard'
  assert second['totals'] == dict(second['totals'], videos=7, ok=7, failed=0)
  assert sum(s['videos'] for s in second['shards']) == 7


@pytest.mark.parametrize('flag,old,new', [('--fps', '0', '5'), ('--short-side', '32', '24'),
                                          ('--jpeg-quality', '90', '50')])
def test_changed_options_are_refused_naming_the_option_then_rebuilt(tmp_path, capsys, flag, old, new):
  names = [f'v{i}.mp4' for i in range(3)]
  for n in names:
    make_mp4(tmp_path / n, num_frames=10)
  write_list(tmp_path, names)

  def with_option(value, *extra):
    args = [flag, value] if flag != '--short-side' else []
    code = vvt_main(['data', 'convert', '--input', str(tmp_path / 'videos.csv'), '--classes',
                     str(tmp_path / 'classes.txt'), '--output', str(tmp_path / 'out' / 'train'), '--shards', '1',
                     '--short-side', value if flag == '--short-side' else '32', '--workers', '1',
                     '--no-progress', *args, *extra])
    return code

  assert with_option(old) == 0
  before = (tmp_path / 'out' / 'train.tfrecord-00000-of-00001').read_bytes()
  capsys.readouterr()
  assert with_option(new) != 0
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and flag in err[0] and '--overwrite' in err[0], err
  assert (tmp_path / 'out' / 'train.tfrecord-00000-of-00001').read_bytes() == before  # nothing touched
  assert with_option(new, '--overwrite') == 0
  assert (tmp_path / 'out' / 'train.tfrecord-00000-of-00001').read_bytes() != before
  manifest = json.loads((tmp_path / 'out' / 'train.manifest.json').read_text())
  key = flag[2:].replace('-', '_')
  assert str(manifest['options'][key]) in (new, f'{float(new)}')
