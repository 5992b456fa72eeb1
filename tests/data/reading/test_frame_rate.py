"""`dataset.fps`: the convert manifest records each video's stored rate; training and evaluation warn once, with
the count, when the data's rate differs from the one the config's stride assumes."""
import json
import pathlib

import pytest

from vvt.config import loader
from vvt.config.errors import ConfigError
from vvt.data.writing import video_shards
from vvt.data import pipeline

from data_helpers import small_config
from data_helpers import make_video

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


def test_a_video_at_another_rate_warns_once_with_its_count(mixed_rates, capsys):
  cfg = small_config(mixed_rates['pattern'], mixed_rates['pattern'], num_classes=2, fps=25)
  next(pipeline.make_train_iterator(cfg, 2, process_index=0, process_count=1))
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith('warning: dataset.fps=25 (the rate dataset.stride assumes) but 1 of 3 '
                                             'videos in ') and '(1 at 15 fps)' in err[0]
  assert mixed_rates['path'] in err[0] and 'vvt data convert --fps 25' in err[0]
  for _ in pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1):
    pass
  assert capsys.readouterr().err == ''  # once per process: not again at every evaluation
  cfg.fps = 15  # the two 25 fps videos differ from a config at 15 fps
  pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0, process_count=1)
  assert '2 of 3 videos' in capsys.readouterr().err
  cfg.fps = None  # unstated: no check
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
  cfg.fps = 24
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
