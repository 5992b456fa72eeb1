"""`dataset.fps`: the convert manifest records each video's stored rate; when it differs from the rate the
config's stride counts at, the sampler maps the clips onto the stored frames nearest in time, and says so once."""
import dataclasses
import json
import pathlib

from data_helpers import jpeg
from data_helpers import make_video
from data_helpers import small_config
import numpy as np
import pytest

from vvt.config import loader
from vvt.config.errors import ConfigError
from vvt.data import pipeline
from vvt.data.transforms import sampling
from vvt.data.writing import dmvr_records
from vvt.data.writing import video_shards

VIVIT = str(pathlib.Path(__file__).parents[3] / 'configs/kinetics400/vivit_b_fe.py')


@pytest.fixture
def mixed_rates(tmp_path):
  """Three videos converted at their own rates: two at 25 fps, one at 15 fps."""
  lines = []
  for i, fps in enumerate((25, 15, 25)):
    make_video(str(tmp_path / f'v{i}.mp4'), (200, 40, 40), num_frames=6, fps=fps)
    lines.append(f'v{i}.mp4,a')
  (tmp_path / 'videos.csv').write_text('\n'.join(lines) + '\n')
  (tmp_path / 'classes.txt').write_text('a\nb\n')
  out = str(tmp_path / 'out' / 'train')
  manifest = video_shards.convert(str(tmp_path / 'videos.csv'), out, str(tmp_path / 'classes.txt'), num_shards=1,
                             short_side=0, workers=1, progress=False)
  return manifest


def test_manifest_records_each_videos_stored_rate(mixed_rates, tmp_path):
  assert [v['fps'] for v in mixed_rates['videos']] == [25.0, 15.0, 25.0]
  resampled = video_shards.convert(str(tmp_path / 'videos.csv'), str(tmp_path / 'out' / 'resampled'),
                              str(tmp_path / 'classes.txt'), num_shards=1, short_side=0, workers=2,
                              progress=False, fps=30.0)  # worker processes: the rate comes back with the frames
  assert [v['fps'] for v in resampled['videos']] == [30.0] * 3


def test_a_video_at_another_rate_is_noted_once_with_its_count(mixed_rates, capsys):
  cfg = small_config(mixed_rates['pattern'], mixed_rates['pattern'], num_classes=2, fps=25)
  next(pipeline.make_train_iterator(cfg, 2, process_index=0, process_count=1))
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith('note: dataset.fps=25: 1 of 3 videos in ') and '(1 at 15 fps)' in err[0]
  assert mixed_rates['path'] in err[0] and 'nearest to the times of dataset.stride at 25 fps' in err[0]
  for _ in pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1):
    pass
  assert capsys.readouterr().err == ''  # once per process: not again at every evaluation
  cfg = dataclasses.replace(cfg, fps=15)  # the two 25 fps videos differ from a config at 15 fps
  pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1)
  assert '2 of 3 videos' in capsys.readouterr().err
  cfg = dataclasses.replace(cfg, fps=None)  # unstated: no check
  pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1)
  assert capsys.readouterr().err == ''


def test_matching_rate_or_no_manifest_says_nothing(mixed_rates, capsys, tmp_path):
  manifest_path = pathlib.Path(mixed_rates['path'])
  data = json.loads(manifest_path.read_text())
  for v in data['videos']:
    v['fps'] = 29.97
  manifest_path.write_text(json.dumps(data))
  cfg = small_config(mixed_rates['pattern'], mixed_rates['pattern'], num_classes=2, fps=30)
  pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1)
  manifest_path.unlink()
  cfg = dataclasses.replace(cfg, fps=24)
  pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1)
  assert capsys.readouterr().err == ''


@pytest.mark.parametrize('value', ['0', '-25.0'])
def test_non_positive_fps_is_one_line_naming_the_field(value, mixed_rates):
  with pytest.raises(ConfigError) as e:
    loader.load(VIVIT, [('dataset.fps', value)], files=(), init=False)
  assert str(e.value) == f'dataset.fps must be a positive number of frames per second, or None, got {value}'
  cfg = small_config(mixed_rates['pattern'], num_classes=2, fps=0)
  with pytest.raises(ValueError, match=r'^dataset.fps must be a positive number of frames per second, or None'):
    pipeline.make_train_iterator(cfg, 2, process_index=0, process_count=1)


SCALE = 60  # grey level of a frame = its time in 1/60 s


def _conversion(directory, fps, seconds=3.0, manifest=True):
  """One video of `seconds` stored at `fps`, frame j grey SCALE * j / fps (its time), with a manifest saying so."""
  prefix = directory / f'at{fps:g}'
  frames = [jpeg(np.full((16, 16, 3), round(SCALE * j / fps), np.uint8)) for j in range(round(seconds * fps))]
  dmvr_records.write_records(f'{prefix}.tfrecord-00000-of-00001',
                             [dmvr_records.encode_sequence_example(frames, 0, video_id='clip')])
  if manifest:
    pathlib.Path(f'{prefix}.manifest.json').write_text(json.dumps(
        {'videos': [{'id': 'clip', 'status': 'ok', 'fps': float(fps)}]}))
  return f'{prefix}.tfrecord@1'


def _times(inputs):
  """Seconds of each frame of uint8 (..., T, S, S, 3) clips from their grey level."""
  return inputs.mean(axis=(-3, -2, -1)) / SCALE


@pytest.mark.parametrize('clips', [3, 'all'])
def test_a_30_fps_conversion_read_by_a_25_fps_config_samples_the_same_moments(tmp_path, clips):
  """Stride 5 at 25 fps: a 30-fps conversion gives the frames nearest the times of the 25-fps frames, within one
  frame of a 25-fps conversion read as stored (and of the ideal times), in evaluation and training."""
  cfgs = {fps: small_config(_conversion(tmp_path, fps, manifest=fps == 30),
                            _conversion(tmp_path, fps, manifest=fps == 30), num_classes=2, fps=25, stride=5,
                            num_test_clips=clips, num_spatial_crops=1)
          for fps in (30, 25)}
  views = {fps: next(iter(pipeline.make_eval_iterator(c, 'test', 8, process_index=0, process_count=1)))
           for fps, c in cfgs.items()}
  real = views[25]['mask'] == 1
  assert real.sum() == (3 if clips == 3 else 4)  # 'all': 75 frames at 25 fps in clips of 4 x 5 frames
  np.testing.assert_array_equal(views[30]['mask'], views[25]['mask'])
  times = {fps: _times(v['inputs'][real]) for fps, v in views.items()}
  ideal = (sampling.eval_indices(75, 4, 5, 3) if clips == 3 else sampling.tile_indices(75, 4, 5)).numpy() / 25
  frame = 1 / 25
  assert np.abs(times[30] - times[25]).max() <= frame and np.abs(times[30] - ideal).max() <= frame
  assert np.abs(times[25] - ideal).max() < 0.5 / SCALE + 0.02  # the encoding's own precision
  np.testing.assert_allclose(np.diff(times[30][:3], axis=1), 5 / 25, atol=frame)  # 0.2 s apart, not 5 / 30
  if clips == 'all':
    return  # (the last tile wraps around to the start: 'loop')
  train = {fps: next(pipeline.make_train_iterator(c, 2, seed=4, process_index=0, process_count=1))['inputs']
           for fps, c in cfgs.items()}
  assert np.abs(_times(train[30]) - _times(train[25])).max() <= frame


def test_videos_at_several_rates_are_mapped_each_by_its_own(mixed_rates):
  import tensorflow as tf

  from vvt.data.reading import frame_rate
  ids = [v['id'] for v in mixed_rates['videos']]
  assert frame_rate.ratios(25.0, [mixed_rates['path']]) == {ids[0]: 1.0, ids[1]: 15 / 25, ids[2]: 1.0}
  assert frame_rate.ratios(15.0, [mixed_rates['path']]) == {ids[0]: 25 / 15, ids[1]: 1.0, ids[2]: 25 / 15}
  assert frame_rate.ratios(15.2, [mixed_rates['path']]) is not None  # 15 is more than 1% away from 15.2
  cfg = small_config(mixed_rates['pattern'], num_classes=2, fps=25)
  source = pipeline._source(cfg, 'train')
  ratio_of = frame_rate.ratio_fn(cfg, source)
  got = [float(ratio_of({'video_id': tf.constant(k)})) for k in ids + ['unlisted']]
  assert got == [1.0, 0.6, 1.0, 1.0]
  cfg = dataclasses.replace(cfg, fps=None)
  assert frame_rate.ratio_fn(cfg, source) is None
