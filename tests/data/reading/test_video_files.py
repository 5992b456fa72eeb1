"""The one PyAV decoder: frames listed from packets, and a clip's frames decoded from the keyframe before it."""
import av
from data_helpers import write_footage
import numpy as np
import pytest

from vvt.data.reading import video_files


@pytest.fixture(scope='module')
def video(tmp_path_factory):
  d = tmp_path_factory.mktemp('video')
  write_footage(str(d), labels=(1,), frames=(37,), gop=5)  # keyframes at 0, 5, 10, ...
  return str(d / 'clips' / 'v0.mp4')


def _every_frame(path):
  with av.open(path) as container:
    return [f.to_ndarray(format='rgb24') for f in container.decode(container.streams.video[0])]


def test_frames_are_listed_from_packets_and_decoded_from_a_seek(video):
  frames = _every_frame(video)
  times = video_files.frame_times(video)
  assert len(times) == len(frames) == 37 and np.all(np.diff(times) > 0)
  for wanted in ([0], [36], [17, 3, 30], [12, 12, 13, 20], list(range(37))):
    got = video_files.read_frames(video, wanted, times)
    assert sorted(got) == sorted(set(wanted))
    for i in wanted:
      np.testing.assert_array_equal(got[i], frames[i])
  np.testing.assert_array_equal(video_files.read_frames(video, [25])[25], frames[25])  # times listed anew


def test_a_frame_past_the_end_or_a_broken_file_is_named(video, tmp_path):
  with pytest.raises(video_files.UnreadableVideo, match=r'v0.mp4: frame 40 asked of a video of 37 frames'):
    video_files.read_frames(video, [40])
  bad = tmp_path / 'bad.mp4'
  bad.write_bytes(b'\x00\x00\x00\x18ftypmp42' + b'\x01' * 200)
  with pytest.raises(video_files.UnreadableVideo, match=f'{bad}: cannot open'):
    video_files.frame_times(str(bad))
