"""`vvt train` (with its final evaluation) on a plain folder of video files and a CSV
(dataset.name='video_folder'), with no conversion step: tiny synthetic motion clips written as mp4 files. The runs
go through the CLI's `main(argv)` in the test process: what they assert is the run's files and printed lines."""
import json
import os

import av
import numpy as np

from tests.cli.test_sweep import vvt_in_process
from vvt.data.writing import synthetic
from vvt.train import checkpoints

CONFIG = 'configs/synthetic.py:divided'  # the README's recipe: its classes come from the data
CLASSES = ('down', 'up')


def _write_clips(directory, split, labels, seed, frames=None):
  """DIR/clips/<split>_<i>.mp4: synthetic clips (`frames[i]` frames, default 16, of 64x64 at 25 fps), and
  DIR/<split>.csv listing them."""
  os.makedirs(os.path.join(directory, 'clips'), exist_ok=True)
  lines = ['path,label']
  for i, label in enumerate(labels):
    clip = synthetic.render_clip(label, np.random.default_rng([seed, i]), frames[i] if frames else 16, 64)
    name = f'clips/{split}_{i}.mp4'
    with av.open(os.path.join(directory, name), 'w', options={'movflags': 'faststart'}) as container:
      stream = container.add_stream('mpeg4', rate=25)
      stream.height, stream.width, stream.pix_fmt, stream.bit_rate = 64, 64, 'yuv420p', 2_000_000
      for frame in clip:
        for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
          container.mux(packet)
      for packet in stream.encode():
        container.mux(packet)
    lines.append(f'{name},{CLASSES[label]}')
  with open(os.path.join(directory, f'{split}.csv'), 'w') as f:
    f.write('\n'.join(lines) + '\n')


def test_train_and_evaluate_on_a_folder_of_videos(tmp_path, capsys):
  data = tmp_path / 'footage'
  _write_clips(str(data), 'train', [0, 1] * 6, seed=0)
  _write_clips(str(data), 'test', [0, 1, 1, 0], seed=1)
  (data / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')
  wd = tmp_path / 'run'
  source = ['--config.dataset.name=video_folder', f'--config.dataset.train_files={data}/train.csv',
            f'--config.dataset.eval_files={data}/test.csv']
  res = vvt_in_process(capsys, 'train', '--config', CONFIG, '--workdir', str(wd), '--config.num_train_steps=4',
                       *source)
  assert res.returncode == 0, res.stderr[-3000:]
  assert '[done] step 4: video_top1 =' in res.stdout
  config = json.load(open(wd / 'config.json'))
  assert config['dataset']['name'] == 'video_folder'
  assert config['num_classes'] == 2 and config['class_names'] == list(CLASSES)  # from classes.txt beside the CSV
  final = json.load(open(checkpoints.eval_results_path(str(wd), 4, 'test')))
  assert final['num_videos'] == 4 and final['num_views'] == 4 * 3  # 1 clip x 3 crops of every test video


def test_short_clips_and_partial_videos_are_said_and_fps_is_mapped(tmp_path, capsys):
  """One run: the start-up line on videos shorter than a clip, the note on the folder's frame rate, and a video
  that lies about its length skipped, counted and said in training and in evaluation."""
  data = tmp_path / 'footage'
  _write_clips(str(data), 'train', [0, 1, 0, 1], seed=0, frames=[16, 16, 16, 40])
  _write_clips(str(data), 'test', [0, 1, 0], seed=1, frames=[40, 40, 16])
  (data / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')
  cut = data / 'clips' / 'test_1.mp4'  # declares 40 frames; cut to a tenth of its bytes, a few can be read
  cut.write_bytes(cut.read_bytes()[:cut.stat().st_size // 10])
  res = vvt_in_process(capsys, 'train', '--config', CONFIG, '--workdir', str(tmp_path / 'run'),
                       '--config.num_train_steps=2', '--config.dataset.name=video_folder',
                       f'--config.dataset.train_files={data}/train.csv', f'--config.dataset.eval_files={data}/test.csv',
                       '--config.dataset.fps=50', '--config.dataset.stride=6',
                       '--config.dataset.short_video_policy=pad', '--config.dataset.on_error=skip')
  assert res.returncode == 0, res.stderr[-3000:]
  out = res.stdout + res.stderr
  # 8 frames 6 apart at 50 fps span 43 frames; stored at 25 fps, a 16-frame video is 32 frames long at 50 fps
  assert ('[data] dataset.train_files: 3 of 4 videos are shorter than a clip: a clip of dataset.num_frames=8 '
          'frames dataset.stride=6 apart spans 43 frames at dataset.fps=50; dataset.short_video_policy=\'pad\' '
          'repeats its last frame past a video\'s end, so a clip of the shortest (32 frames) holds 7 distinct '
          'frames') in out
  assert '[data] dataset.eval_files: 1 of 3 videos are shorter than a clip' in out  # the cut one declares 40
  assert f'note: dataset.fps=50: 4 of 4 videos in {data}/train.csv are stored at another rate (4 at 25 fps)' in out
  assert f'{data}/test.csv: record 1 (partial_video 1: ' in out  # the evaluation's skip line
  assert 'skipped 1 of 3 videos' in out
