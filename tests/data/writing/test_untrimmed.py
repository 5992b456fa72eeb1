"""`vvt data synthetic --untrimmed`: long mp4 videos of background with short motion events where, and only where,
their ActivityNet-style annotations say; the annotations read back with `vvt.data.read_annotations`; sizes that
cannot work refused in one line before anything is written."""
import json

import av
import numpy as np

from tests.cli.test_sweep import one_line_error
from tests.cli.test_sweep import vvt_in_process
from vvt.data import read_annotations

ARGS = ['--train-videos', '2', '--validation-videos', '1', '--video-seconds', '8', '--fps', '8', '--events', '2,2',
        '--event-seconds', '1,2', '--frame-size', '32', '--background', 'static', '--classes', '3', '--seed', '3']


def _frames(path):
  with av.open(str(path)) as c:
    return np.stack([f.to_ndarray(format='rgb24') for f in c.decode(c.streams.video[0])]).astype(np.float32)


def test_events_are_where_the_annotations_say(tmp_path, capsys):
  out = tmp_path / 'untrimmed'
  res = vvt_in_process(capsys, 'data', 'synthetic', '--untrimmed', '--output', str(out), *ARGS)
  assert res.returncode == 0, res.stderr
  assert json.loads(res.stdout)['num_events'] == 6
  ann = read_annotations(str(out / 'annotations.json'), labels=str(out / 'classes.txt'))
  assert ann.labels == ('down', 'up', 'down_and_back')  # classes.txt: label i on line i
  assert sorted(ann.videos) == ['training_0000', 'training_0001', 'validation_0000']
  assert set(ann.select('validation').videos) == {'validation_0000'}
  for vid, v in ann.videos.items():
    frames = _frames(out / 'videos' / f'{vid}.mp4')
    assert len(frames) == 64 and v.duration == 8.0 and len(v.segments) == 2
    inside = np.zeros(64, bool)
    for start, end, _ in v.segments:
      assert 1.0 <= end - start <= 2.0
      inside[int(round(start * 8)):int(round(end * 8))] = True
    # the object is there in every event frame and nowhere else: each frame against the video's still background
    still = np.median(frames[~inside], axis=0)
    away = np.abs(frames - still).max(axis=(1, 2, 3))
    assert away[~inside].max() < 40 < away[inside].min(), (vid, away.round())


def test_sizes_that_cannot_work_refused_before_writing(tmp_path, capsys):
  out = tmp_path / 'x'
  for extra, message in (
      (['--untrimmed', '--video-seconds', '4', '--events', '3,3'],
       '3 events of up to 32 frames (and a frame apart) do not fit in a video of 32 frames'),
      (['--untrimmed', '--event-seconds', '0.25,1'], 'event lengths must be MIN,MAX seconds with MIN >= 4 frames'),
      (['--untrimmed', '--events', '2,1', '--train-videos', '0'],
       'train and validation videos must be >= 1 each, got 0 and 4; events per video must be MIN,MAX'),
      (['--untrimmed', '--events', 'two'], "argument --events: MIN,MAX (e.g. 1,3), got 'two'"),
      (['--video-seconds', '30'], '--video-seconds goes with --untrimmed'),
  ):
    one_line_error(vvt_in_process(capsys, 'data', 'synthetic', '--output', str(out), *extra), 'data', message)
  assert not out.exists()
