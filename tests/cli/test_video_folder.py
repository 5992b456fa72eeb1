"""`vvt train` (with its final evaluation) on a plain folder of video files and a CSV
(dataset.name='video_folder'), with no conversion step: tiny synthetic motion clips written as mp4 files."""
import json
import os

import av
import numpy as np

from tests.cli.test_commands import vvt
from vvt.data.writing import synthetic
from vvt.train import checkpoints

CONFIG = 'configs/synthetic.py:divided'  # the README's recipe: its classes come from the data
CLASSES = ('down', 'up')


def _write_clips(directory, split, labels, seed):
  """DIR/clips/<split>_<i>.mp4: synthetic clips (16 frames of 64x64), and DIR/<split>.csv listing them."""
  os.makedirs(os.path.join(directory, 'clips'), exist_ok=True)
  lines = ['path,label']
  for i, label in enumerate(labels):
    clip = synthetic.render_clip(label, np.random.default_rng([seed, i]), 16, 64)
    name = f'clips/{split}_{i}.mp4'
    with av.open(os.path.join(directory, name), 'w') as container:
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


def test_train_and_evaluate_on_a_folder_of_videos(tmp_path):
  data = tmp_path / 'footage'
  _write_clips(str(data), 'train', [0, 1] * 6, seed=0)
  _write_clips(str(data), 'test', [0, 1, 1, 0], seed=1)
  (data / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')
  wd = tmp_path / 'run'
  source = ['--config.dataset.name=video_folder', f'--config.dataset.train_files={data}/train.csv',
            f'--config.dataset.eval_files={data}/test.csv']
  res = vvt('train', '--config', CONFIG, '--workdir', str(wd), '--config.num_train_steps=4',
            *source)
  assert res.returncode == 0, res.stderr[-3000:]
  assert '[done] step 4: video_top1 =' in res.stdout
  config = json.load(open(wd / 'config.json'))
  assert config['dataset']['name'] == 'video_folder'
  assert config['num_classes'] == 2 and config['class_names'] == list(CLASSES)  # from classes.txt beside the CSV
  final = json.load(open(checkpoints.eval_results_path(str(wd), 4, 'test')))
  assert final['num_videos'] == 4 and final['num_views'] == 4 * 3  # 1 clip x 3 crops of every test video
