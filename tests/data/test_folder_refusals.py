"""Bad input that `vvt train` / `vvt eval` refuse before any work (exit 2, one line naming the file, line or field,
nothing written): video lists that cannot be read or list missing files, clips longer than every video, clips
too large for the host's memory. The commands run in-process (the refusal comes before JAX or TensorFlow)."""
import os
import shutil
import time

from data_helpers import small_config
from data_helpers import write_footage
import pytest

from vvt.cli import main as vvt_main
from vvt.data import preflight
from vvt.data.reading import video_lengths

CONFIG = 'configs/synthetic.py:divided'
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope='module')
def folder(tmp_path_factory):
  """DIR/train.csv: three 16-frame videos at 10 fps (header line 1, videos on lines 2-4), DIR/classes.txt."""
  d = tmp_path_factory.mktemp('folder')
  write_footage(str(d), labels=(0, 1, 0), frames=(16, 16, 16), classes=('down', 'up'))
  return d


def _train(capsys, tmp_path, csv, *extra):
  """(exit code, stderr lines, whether the workdir was written) of `vvt train` on the list `csv`."""
  workdir = tmp_path / 'run'
  cwd = os.getcwd()
  os.chdir(REPO)  # the config is named relative to the repository
  try:
    code = vvt_main(['train', '--config', CONFIG, '--workdir', str(workdir), '--config.dataset.name=video_folder',
                     f'--config.dataset.train_files={csv}', f'--config.dataset.eval_files={csv}', *extra])
  finally:
    os.chdir(cwd)
  err = capsys.readouterr().err.strip().splitlines()
  return code, err, workdir.exists()


def _copy(folder, tmp_path, text=None):
  d = tmp_path / 'data'
  shutil.copytree(folder, d)
  if text is not None:
    (d / 'train.csv').write_bytes(text if isinstance(text, bytes) else text.encode())
  return d / 'train.csv'


def test_a_missing_listed_video_is_refused_naming_the_list_and_line(folder, tmp_path, capsys):
  csv = _copy(folder, tmp_path, "path,label\nclips/v0.mp4,down\nclips/it's gone.mp4,up\nclips/v2.mp4,down\n")
  code, err, written = _train(capsys, tmp_path, csv, '--config.num_train_steps=1')
  assert code == 2 and not written
  assert err == [f"vvt train: error: dataset.train_files: {csv}: line 3: video file {csv.parent}/clips/it's gone.mp4 "
                 'does not exist',
                 f"vvt train: error: dataset.eval_files: {csv}: line 3: video file {csv.parent}/clips/it's gone.mp4 "
                 'does not exist']  # quotes as they are, not escaped


def test_a_list_that_is_not_utf8_or_has_extra_columns_is_refused_naming_it(folder, tmp_path, capsys):
  csv = _copy(folder, tmp_path, 'path,label\nclips/v0.mp4,down\nclips/v1.mp4,caf\xe9\n'.encode('latin-1'))
  code, err, written = _train(capsys, tmp_path, csv)
  assert code == 2 and not written
  assert err[0] == (f'vvt train: error: dataset.train_files: {csv}: line 3: not UTF-8 text (byte 0xe9); save the '
                    'list as UTF-8')
  csv.write_text('clips/v0.mp4,down\nclips/v1.mp4,down,up\n')  # no header: path,label
  code, err, written = _train(capsys, tmp_path, csv)
  assert code == 2 and not written
  assert err[0].startswith(f'vvt train: error: dataset.train_files: {csv}: line 2: 3 columns in "clips/v1.mp4,down,'
                           'up", but the format is path,label; several labels of one video are separated by ";"')


def test_clips_longer_than_every_video_are_refused_naming_stride_and_frames(folder, capsys, tmp_path):
  # The README's fine-tune recipe on 16-frame clips: 8 frames 32 apart at 30 fps span 225 frames.
  code, err, written = _train(capsys, tmp_path, folder / 'train.csv', '--config.dataset.stride=32',
                              '--config.dataset.fps=30', '--config.dataset.short_video_policy=pad')
  assert code == 2 and not written
  assert len(err) == 2 and err[0] == (
      'vvt train: error: dataset.stride: every one of the 3 videos of dataset.train_files is shorter than a clip: a '
      'clip of dataset.num_frames=8 frames dataset.stride=32 apart spans 225 frames at dataset.fps=30, and the '
      'longest video has 48 frames (its clips would hold 3 distinct frames); lower dataset.stride or '
      'dataset.num_frames (dataset.stride=6 at most here)')  # 16 frames at 10 fps: 48 at 30 fps
  assert 'of dataset.eval_files' in err[1]


def test_a_clip_of_100000_frames_is_refused_at_once(folder, capsys, tmp_path):
  start = time.monotonic()
  code, err, written = _train(capsys, tmp_path, folder / 'train.csv', '--config.num_frames=100000',
                              '--config.batch_size=4000', '--config.eval.batch_size=4000')
  assert code == 2 and not written and time.monotonic() - start < 120  # (a hang guard: it takes a second)
  assert any(line.startswith('vvt train: error: dataset.stride: every one of the 3 videos of dataset.train_files')
             for line in err)
  memory = [line for line in err if 'num_frames=100000:' in line]
  assert memory[0].startswith('vvt train: error: num_frames=100000: a training batch (batch_size) of decoded clips '
                              'is 4000 x 100000 frames x 3072 bytes = 1228.8 GB, more than this host\'s memory')


def test_the_memory_bound_counts_the_batch_the_frames_and_the_pixels():
  spec = small_config(num_frames=16, image_size=224)
  assert preflight.batch_memory_problem(spec, 8, 'a batch', memory=10 ** 9) is None  # 8 x 16 x 150528 = 19 MB
  line = preflight.batch_memory_problem(spec, 8, 'a batch', memory=10 ** 7)
  assert line.startswith('num_frames=16: a batch of decoded clips is 8 x 16 frames x 150528 bytes = 0.0 GB')


def test_short_videos_are_counted_with_what_the_policy_does(folder, tmp_path):
  csv = _copy(folder, tmp_path)
  write_footage(str(tmp_path / 'long'), labels=(0,), frames=(40,), classes=('down', 'up'))
  shutil.copy(tmp_path / 'long' / 'clips' / 'v0.mp4', csv.parent / 'clips' / 'long.mp4')
  with open(csv, 'a') as f:
    f.write('clips/long.mp4,up\n')
  spec = small_config(str(csv), str(csv), name='video_folder', num_frames=8, stride=3, short_video_policy='pad')
  line = video_lengths.short_line(spec, 'train_files')
  assert line.startswith('[data] dataset.train_files: 3 of 4 videos are shorter than a clip: a clip of '
                         'dataset.num_frames=8 frames dataset.stride=3 apart spans 22 frames; '
                         "dataset.short_video_policy='pad' repeats its last frame past a video's end, so a clip of "
                         'the shortest (16 frames) holds 6 distinct frames')
  assert video_lengths.every_video_short(spec, 'train_files') is None  # one video is long enough
  spec = small_config(str(csv), name='video_folder', num_frames=8, stride=2)
  assert video_lengths.short_line(spec, 'train_files') is None  # 15 frames: every video holds a clip


def test_lengths_come_from_the_manifest_or_are_said_to_be_unknown(tmp_path):
  shard = tmp_path / 'train.tfrecord-00000-of-00001'
  shard.write_bytes(b'')
  spec = small_config(str(tmp_path / 'train.tfrecord@1'), num_frames=8, stride=4)
  assert 'lengths are not known without decoding them' in video_lengths.short_line(spec, 'train_files')
  (tmp_path / 'train.manifest.json').write_text(
      '{"options": {"fps": 0}, "videos": [{"status": "ok", "frames": 20, "fps": 25}, '
      '{"status": "ok", "frames": 40, "fps": 25}, {"status": "failed", "frames": 0}]}')
  assert video_lengths.short_line(spec, 'train_files').startswith(
      '[data] dataset.train_files: 1 of 2 videos are shorter than a clip')  # 29 frames: the 20-frame one
  spec = small_config(str(tmp_path / 'train.tfrecord@1'), num_frames=8, stride=4, fps=12.5)
  assert 'every one of the 2 videos' in video_lengths.every_video_short(spec, 'train_files')  # 10 and 20 frames
