"""`vvt predict --window`: a synthetic video of 2.5 minutes whose object changes direction at known times, scored
window by window by a model trained here on converted clips of the same motion (`vvt data convert` with a
classes.txt, `vvt train` with a config that sets no num_classes); the streaming windows' memory; bad input;
class names from the data's manifest."""
import csv
import os
import weakref

import av
import numpy as np
import pytest

from tests.conftest import REPO
from vvt.cli import main as vvt_main
from vvt.data.transforms import windows
from vvt.data.writing import synthetic

NAMES = ('falling', 'rising')  # the data's names: label 0 moves down, 1 up (synthetic classes 0 and 1)
FPS, SIZE = 8, 32
CHANGES_S = (40.0, 75.0, 110.0)  # direction changes of the long video
LENGTH_S = 150.0
WINDOW = 15  # frames: the model's clip span, 8 frames at stride 2


def write_video(path, frames, fps=FPS):
  """mp4 (MPEG-4 part 2, a high bit rate: the small object survives) from an iterable of uint8 frames."""
  with av.open(str(path), 'w') as c:
    s = c.add_stream('mpeg4', rate=fps)
    s.height = s.width = SIZE
    s.pix_fmt, s.bit_rate = 'yuv420p', 2_000_000
    for f in frames:
      c.mux(s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format='rgb24')))
    c.mux(s.encode())


def _clips(d, split, n, seed):
  (d / 'clips').mkdir(exist_ok=True)
  lines = []
  for i in range(n):
    label = i % 2
    write_video(d / 'clips' / f'{split}_{i:03d}.mp4',
                synthetic.render_clip(label, np.random.default_rng([seed, i]), 16, SIZE))
    lines.append(f'clips/{split}_{i:03d}.mp4,{NAMES[label]}')
  (d / f'{split}.csv').write_text('\n'.join(lines) + '\n')


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  """Converted 2-class clips: data/train.tfrecord@1 (160 clips), data/test.tfrecord@1 (32), names from classes.txt."""
  d = tmp_path_factory.mktemp('falling_rising')
  (d / 'classes.txt').write_text('\n'.join(NAMES) + '\n')
  for split, n, seed in (('train', 160, 0), ('test', 32, 1)):
    _clips(d, split, n, seed)
    assert vvt_main(['data', 'convert', '--input', str(d / f'{split}.csv'), '--classes', str(d / 'classes.txt'),
                     '--output', str(d / 'data' / split), '--shards', '1', '--workers', '1', '--short-side', '0',
                     '--no-progress']) == 0
  return d


def config_args(d):
  """configs/synthetic.py (no num_classes, no class_names) pointed at the converted data, a smaller model."""
  return ['--config', f'{REPO / "configs/synthetic.py"}:divided',
          f'--config.dataset.train_files={d / "data/train.tfrecord@1"}',
          f'--config.dataset.eval_files={d / "data/test.tfrecord@1"}',
          '--config.model.hidden_size=32', '--config.model.num_heads=2', '--config.model.mlp_dim=64']


@pytest.fixture(scope='module')
def run_dir(data, tmp_path_factory):
  wd = str(tmp_path_factory.mktemp('run'))
  assert vvt_main(['train', *config_args(data), '--workdir', wd, '--config.num_train_steps=200',
                   '--config.schedule.base_lr=3e-3',
                   '--config.checkpoint.every_steps=200', '--config.log_every_steps=200']) == 0
  return wd


@pytest.fixture(scope='module')
def long_video(tmp_path_factory):
  """2.5 minutes at 8 fps, 32 px: down until 40 s, up until 75 s, down until 110 s, then up."""
  t = np.arange(int(LENGTH_S * FPS)) / FPS
  directions = np.where(np.searchsorted(CHANGES_S, t, side='right') % 2 == 0, 1, -1)
  path = tmp_path_factory.mktemp('long') / 'street.mp4'
  write_video(path, synthetic.motion_frames(directions[:-1], np.random.default_rng(7), SIZE))
  return path


def test_converted_data_names_the_classes_of_a_config_without_them(data, run_dir):
  import json
  manifest = json.loads((data / 'data' / 'train.manifest.json').read_text())
  assert manifest['class_names'] == list(NAMES)
  saved = json.loads(open(os.path.join(run_dir, 'config.json'), encoding='utf-8').read())
  assert saved['num_classes'] == 2 and saved['class_names'] == list(NAMES)
  evals = json.loads(open(os.path.join(run_dir, 'checkpoints', 'eval_200_test.json'), encoding='utf-8').read())
  assert evals['video_top1'] >= 0.9, evals  # the model tells the directions apart


def test_set_names_that_disagree_with_the_data_are_one_line(data, tmp_path, capsys):
  for override, words in (('--config.class_names=("down", "up")', ("('down', 'up')", "('falling', 'rising')")),
                          ('--config.num_classes=4', ('num_classes=4', '2 classes', "('falling', 'rising')"))):
    assert vvt_main(['train', *config_args(data), '--workdir', str(tmp_path / 'x'), override]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and all(w in err for w in words), err
    assert str(data / 'data' / 'train.manifest.json') in err


def test_windows_follow_the_direction_changes(run_dir, long_video, tmp_path, capsys, monkeypatch):
  streams = []

  class Recorded(windows.WindowStream):
    def __init__(self, *a, **k):
      super().__init__(*a, **k)
      streams.append(self)
  monkeypatch.setattr(windows, 'WindowStream', Recorded)
  import vvt.data  # its entry keeps the names it has given out: patched there too, whichever test asked first
  monkeypatch.setattr(vvt.data, 'WindowStream', Recorded, raising=False)
  out = tmp_path / 'out'
  assert vvt_main(['predict', '--workdir', run_dir, '--window', f'{WINDOW}f', '--out', str(out),
                   str(long_video)]) == 0
  text = capsys.readouterr().out
  [stream] = streams
  assert stream.count == LENGTH_S * FPS and stream.peak <= WINDOW  # every frame read, one window held

  with open(out / 'street.windows.csv', encoding='utf-8') as f:
    rows = list(csv.DictReader(f))
  n = int(LENGTH_S * FPS)
  assert [int(r['start_frame']) for r in rows] == windows.window_starts(n, WINDOW, WINDOW)
  assert float(rows[-1]['end_s']) == pytest.approx(LENGTH_S)
  assert (out / 'street.timeline.png').stat().st_size > 10_000
  top = [r['top1'] for r in rows]
  changes = [float(rows[i + 1]['start_s']) for i in range(len(rows) - 1) if top[i] != top[i + 1]]
  assert len(changes) == len(CHANGES_S), (changes, top)
  window_s = WINDOW / FPS
  assert all(abs(got - want) <= window_s for got, want in zip(changes, CHANGES_S, strict=True)), changes
  assert top[0] == 'falling' and top[-1] == 'rising'

  lines = text.strip().splitlines()
  assert lines[0].startswith(f'{long_video}: average over {len(rows)} windows of 1.88 s (15 frames) every 1.88 s: ')
  segments = [l.split() for l in lines[1:-1]]
  assert [s[4] for s in segments] == ['falling', 'rising', 'falling', 'rising']
  assert [float(s[0]) for s in segments[1:]] == pytest.approx(changes, abs=0.01)  # printed to 0.01 s


def test_streaming_holds_one_window_of_frames():
  """A generator of a million frames: the stream takes them one at a time, and at each window no more than
  `window` of them are alive (weak references), whatever has been read before. Alive as reference counting
  leaves them, with no garbage collection run (one per window costs seconds in a process holding JAX and
  TensorFlow): a frame kept by a reference cycle counts as alive."""
  alive = []

  def frames():
    for i in range(1_000_000):
      f = np.full((4, 4, 3), i % 256, np.uint8)
      alive.append(weakref.ref(f))
      yield f, i / 10
  stream = windows.WindowStream(frames(), window=6, stride=4, fps=10)
  for w in stream:
    assert sum(r() is not None for r in alive) <= 6
    assert w.frames.shape == (6, 4, 4, 3) and w.start == 4 * w.index and w.end == w.start + 6
    assert w.frames[0, 0, 0, 0] == w.start % 256 and w.start_s == pytest.approx(w.start / 10)
    if w.index == 50:
      break
  assert stream.count == 206 and stream.peak == 6


def test_window_starts_cover_the_tail_and_short_videos_are_refused():
  assert windows.window_starts(10, 4, 3) == [0, 3, 6]
  assert windows.window_starts(11, 4, 3) == [0, 3, 6, 7]  # one more window ends at the last frame
  assert windows.window_starts(11, 4, 5) == [0, 5, 7]
  got = [(w.start, w.end) for w in windows.WindowStream(((np.zeros(1), i) for i in range(11)), 4, 3, 1.0)]
  assert got == [(0, 4), (3, 7), (6, 10), (7, 11)]
  with pytest.raises(windows.WindowTooLong, match='window of 4 frames .* longer than the video .3 frames'):
    list(windows.WindowStream(((np.zeros(1), i) for i in range(3)), 4, 3, 1.0, 'v.mp4'))


def test_bad_window_and_stride_are_one_line(run_dir, tmp_path, capsys):
  short = tmp_path / 'short.mp4'
  write_video(short, synthetic.render_clip(0, np.random.default_rng(0), 16, SIZE))  # 2 s
  assert vvt_main(['predict', '--workdir', run_dir, '--window', '5', '--out', str(tmp_path), str(short)]) == 1
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and str(short) in err and 'longer than the video (16 frames, 2.00 s)' in err
  for stride in ('0', '-1', 'x'):
    assert vvt_main(['predict', '--workdir', run_dir, '--window', '1', f'--stride={stride}', str(short)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and '--stride' in err, err
