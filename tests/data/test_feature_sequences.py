"""The layout of feature sequences (`vvt features --window`): one float32 (N, D) .npy per video, read as OpenTAD
reads it (np.load of `{video_id}.npy`), and sequences.json with each row's centre time."""
import os

import numpy as np
import pytest

from vvt.data import SequenceWriter
from vvt.data import load_sequence
from vvt.data import read_sequence_index
from vvt.data import sequence_ids


def test_sequences_written_one_npy_per_video_and_the_index_last(tmp_path):
  out = str(tmp_path / 'feats')
  w = SequenceWriter(out, window_seconds=2.0, stride_seconds=1.0, layers=[], combine=None, checkpoint='ck')
  rng = np.random.default_rng(0)
  a, b = rng.normal(size=(5, 8)), rng.normal(size=(2, 8))
  w.add('long_a', '/v/long_a.mp4', 6.0, 25.0, a, [1.0, 2.0, 3.0, 4.0, 5.0], window_frames=50, stride_frames=25)
  assert not os.path.exists(os.path.join(out, 'sequences.json'))  # a folder with the index is complete
  w.add('b', '/v/b.webm', 3.0, 30.0, b, [1.0, 2.0])
  w.skip('/v/short.mp4', 'shorter than a window')
  index = w.close()
  assert read_sequence_index(out) == index
  assert index['feature_dim'] == 8 and index['window_seconds'] == 2.0 and index['checkpoint'] == 'ck'
  assert index['videos']['long_a']['centres'] == [1.0, 2.0, 3.0, 4.0, 5.0]
  assert index['videos']['long_a']['window_frames'] == 50 and index['videos']['b']['fps'] == 30.0
  assert index['videos_skipped'] == [{'path': '/v/short.mp4', 'error': 'shorter than a window'}]
  raw = np.load(os.path.join(out, 'sequences', 'long_a.npy'))  # what OpenTAD's LoadFeats does
  assert raw.dtype == np.float32 and raw.shape == (5, 8)
  feats, centres = load_sequence(out, 'b')
  np.testing.assert_allclose(feats, b, rtol=1e-6)
  assert centres.tolist() == [1.0, 2.0]
  with pytest.raises(KeyError, match="no feature sequence of video 'c'"):
    load_sequence(out, 'c')
  np.save(os.path.join(out, 'sequences', 'b.npy'), np.array([{'a': 1}], dtype=object), allow_pickle=True)
  with pytest.raises(ValueError, match=r'sequences/b\.npy: not a readable numpy file \(Object arrays cannot'):
    load_sequence(out, 'b')  # never unpickled
  with open(os.path.join(out, 'sequences', 'long_a.npy'), 'r+b') as f:
    f.truncate(150)
  with pytest.raises(ValueError, match=r'sequences/long_a\.npy: not a readable numpy file'):
    load_sequence(out, 'long_a')
  with pytest.raises(ValueError, match='features of 4 dims'):
    w.add('c', '/v/c.mp4', 3.0, 30.0, np.zeros((2, 4)), [1.0, 2.0])


def test_two_videos_with_one_stem_refused_naming_both():
  assert sequence_ids(['/x/a.mp4', '/y/b.mp4', '/y/frames_c']) == {'a': '/x/a.mp4', 'b': '/y/b.mp4',
                                                                  'frames_c': '/y/frames_c'}
  with pytest.raises(ValueError, match=r'one feature sequence a\.npy: /x/a\.mp4 and /y/a\.webm'):
    sequence_ids(['/x/a.mp4', '/y/a.webm'])


def test_windows_without_the_tail_stay_a_uniform_grid():
  from vvt.data import WindowStream
  from vvt.data import window_starts
  assert window_starts(11, 4, 3, tail=False) == [0, 3, 6]  # no window ending at the last frame
  stream = WindowStream(((np.zeros(1), i / 2) for i in range(11)), 4, 3, 2.0, tail=False)
  got = [(w.start, w.end, (w.start_s + w.end_s) / 2) for w in stream]
  assert got == [(0, 4, 1.0), (3, 7, 2.5), (6, 10, 4.0)] and stream.count == 11


def test_the_change_between_windows_is_one_minus_their_cosine(tmp_path):
  from vvt.inspection import sequence_plots
  rows = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [0.0, -1.0]])
  np.testing.assert_allclose(sequence_plots.change(rows), [0.0, 1.0, 2.0], atol=1e-12)
  path = tmp_path / 'seq.png'
  sequence_plots.sequence_png(str(path), rows, [1.0, 2.0, 3.0, 4.0], [(1.5, 3.0, 1)], ('a', 'b'), title='v')
  assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
