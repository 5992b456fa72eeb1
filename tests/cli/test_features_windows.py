"""`vvt features --window/--stride`: the feature sequence of each long video from a converted checkpoint (a
random-init tiny V-JEPA 2 folder, `vvt convert`), in-process. A window's row is the feature of exactly its frames
(a frame folder holding only those frames gives the same row); windows form a uniform grid with their centres; a
video shorter than a window is skipped, said and listed; bad arguments are refused in one line before any work."""
import json

import av
import numpy as np
from PIL import Image
import pytest

from tests.cli.test_sweep import one_line_error
from tests.cli.test_sweep import vvt_in_process
from tests.conftest import REPO
from tests.convert import hf_encoders as H
from tests.convert.test_hf_encoders_cli import vjepa2_classifier
from vvt.cli import main as vvt_main

FPS = 8
VIEWS = ['--config.dataset.num_test_clips=1', '--config.dataset.num_spatial_crops=1', '--config.eval.batch_size=4']


def _mp4(path, frames):
  with av.open(str(path), 'w') as c:
    s = c.add_stream('mpeg4', rate=FPS)
    s.height = s.width = frames.shape[1]
    s.pix_fmt, s.bit_rate = 'yuv420p', 2_000_000
    for f in frames:
      c.mux(s.encode(av.VideoFrame.from_ndarray(f, format='rgb24')))
    c.mux(s.encode())


def _frame_folder(path, frames):
  path.mkdir()
  for i, f in enumerate(frames):
    Image.fromarray(f).save(path / f'{i:04d}.png')


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  """A converted random-init tiny V-JEPA 2 (1 layer, width 32, 8 frames of 32 px) and long videos: a.mp4 and the
  frame folder b (44 frames: 5.5 s at 8 fps), b_mid (b's frames 8-23), short.mp4 (8 frames: 1 s)."""
  root = tmp_path_factory.mktemp('feature_sequences')
  H.save(vjepa2_classifier(), root / 'hf')
  assert vvt_main(['convert', '--source', 'hf_vjepa2', '--checkpoint', str(root / 'hf'), '--config',
                   f'{REPO / "tests" / "train" / "tiny_config.py"}:{root / "no_data"}', '--output',
                   str(root / 'ck')]) == 0
  videos = root / 'videos'
  videos.mkdir()
  frames = np.random.default_rng(0).integers(0, 256, (44, 32, 32, 3), dtype=np.uint8)
  _mp4(videos / 'a.mp4', frames)
  _mp4(videos / 'short.mp4', frames[:8])
  _frame_folder(videos / 'b', frames)
  _frame_folder(videos / 'b_mid', frames[8:24])
  return root


def test_window_features_of_long_videos(converted, capsys):
  out = converted / 'out'
  (converted / 'ann.json').write_text(json.dumps({'database': {'a': {
      'subset': 'validation', 'duration': 5.5, 'annotations': [{'segment': [1.5, 3.0], 'label': 'event'}]}}}))
  res = vvt_in_process(capsys, 'features', '--workdir', str(converted / 'ck'), '--output', str(out), '--window', '2',
                       '--stride', '1', '--fps', str(FPS), str(converted / 'videos'), '--plot', '--annotations',
                       str(converted / 'ann.json'), *VIEWS)
  assert res.returncode == 1, res.stderr  # one video skipped, the others written
  assert 'skipped' in res.stderr
  assert 'short.mp4: the window of 16 frames (2.00 s) is longer than the video' in res.stderr
  assert '1 of 4 videos skipped' in res.stderr
  index = json.loads((out / 'sequences.json').read_text())
  assert (index['window_seconds'], index['stride_seconds'], index['feature_dim']) == (2.0, 1.0, 32)
  assert index['checkpoint'] == str(converted / 'ck') and index['layers'] == [] and index['views_per_window'] == 1
  assert [s['path'] for s in index['videos_skipped']] == [str(converted / 'videos' / 'short.mp4')]
  a, b = index['videos']['a'], index['videos']['b']
  # windows of 16 frames every 8 from frame 0: frames 0-15, 8-23, 16-31, 24-39 (no extra window for 40-43)
  assert a['centres'] == b['centres'] == [1.0, 2.0, 3.0, 4.0]
  assert (a['duration'], a['fps'], a['window_frames'], a['stride_frames']) == (5.5, 8.0, 16, 8)
  seq = {k: np.load(out / 'sequences' / f'{k}.npy') for k in ('a', 'b', 'b_mid')}
  assert seq['a'].dtype == np.float32 and seq['a'].shape == seq['b'].shape == (4, 32)
  scale = float(np.abs(seq['b']).max())
  # a row is its window's frames alone: b's window 1 is the whole of b_mid (the same PNG frames)
  np.testing.assert_allclose(seq['b_mid'][0], seq['b'][1], atol=1e-5 * scale)
  assert float(np.abs(seq['b'][0] - seq['b'][1]).max()) > 1e-2 * scale  # and the windows differ
  assert not (out / 'sequences' / 'short.npy').exists()
  assert sorted(p.name for p in (out / 'plots').iterdir()) == ['a.png', 'b.png', 'b_mid.png']
  assert (out / 'plots' / 'a.png').stat().st_size > 10_000


def test_bad_window_arguments_refused_in_one_line(converted, tmp_path, capsys):
  base = ['features', '--workdir', str(converted / 'ck'), '--output', str(tmp_path / 'out')]
  video = str(converted / 'videos' / 'a.mp4')
  (tmp_path / 'x').mkdir()
  _mp4(tmp_path / 'x' / 'a.mp4', np.zeros((4, 32, 32, 3), np.uint8))
  (tmp_path / 'bad.json').write_text(json.dumps({'database': {'a': {
      'subset': 'validation', 'duration': 5.5, 'annotations': [{'segment': [3, 1], 'label': 'x'}]}}}))
  (tmp_path / 'list.txt').write_text('path\n../x/a.mp4\n'.replace('../x', str(tmp_path / 'x')))
  cases = [
      (['--window', '2', '--stride', '0', video], "--stride must be positive, got '0'"),
      (['--window', '-1', video], "--window must be positive, got '-1'"),
      (['--window', 'two', video], "--window 'two': give seconds (2.5) or frames (16f)"),
      (['--window', '2', '--window_frames', '16', video], 'give one of --window and --window_frames'),
      (['--stride_frames', '0', video], '--stride_frames must be a positive number of frames, got 0'),
      (['--window', '2', '--tokens', video], '--tokens is for the features of a dataset split'),
      (['--window', '2'], '--window needs videos'),
      (['--window', '2', str(tmp_path / 'nothing.mp4')], f'no video file or frame folder at {tmp_path}/nothing.mp4'),
      (['--window', '2', video, '--list', str(tmp_path / 'list.txt')],
       f'two videos would write one feature sequence a.npy: {video} and {tmp_path}/x/a.mp4'),
      (['--window', '2', video, '--layers', '5'], '--layers'),
      ([video], 'video inputs, --list, --plot and --annotations go with --window'),
      (['--window', '2', video, '--annotations', str(tmp_path / 'list.txt')], '--annotations marks the segments'),
      (['--window', '2', video, '--plot', '--annotations', str(tmp_path / 'bad.json')],
       f'{tmp_path}/bad.json: video a: segment [3, 1] ends before it starts'),
  ]
  for extra, message in cases:
    one_line_error(vvt_in_process(capsys, *base, *extra), 'features', message)
  assert not (tmp_path / 'out').exists()  # nothing written on refusal
