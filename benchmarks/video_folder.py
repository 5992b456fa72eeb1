"""Clips/s of the video-folder source (videos decoded with PyAV at read time) against the TFRecord path on the same
videos, side by side in one run, as a ratio.

    PYTHONPATH=. .venv/bin/python benchmarks/video_folder.py [--videos 24 --frames 150 --gop 0 --rounds 3]

Writes once into --data-dir: N H.264 videos (libx264; `--gop` frames between keyframes, 0: the encoder's default,
250), 340x256 at 25 fps, a textured picture panning with noise, listed in a CSV; then `vvt data convert` of that
list (JPEG quality 90, no resize), so both paths read the same frames. Each round measures the folder source, then
the TFRecords (alternating rounds: load on the machine hits both alike), one iterator alive at a time, in one
process:

  * train: make_train_iterator, 8 frames at stride 2, scale jitter 256-320 + random crop 224 + flip, batches of 8;
  * eval:  make_eval_iterator, 1 clip x 3 crops of 8 frames, views/s after the first batch.

Prints the medians over rounds of the wall-clock rate and of the CPU milliseconds per item (all threads of the
process, FFmpeg's included: the figure that holds when other jobs share the machine; 2000 / it is the rate on two
free cores), and folder / TFRecords.
"""
import argparse
import os
import statistics
import sys

import cpu_timing  # benchmarks/cpu_timing.py, beside this script
import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_videos(directory, num_videos, num_frames, gop, size=(256, 340)):
  """DIR/videos/v<i>.mp4 and DIR/train.csv (10 classes); returns the CSV's path."""
  import av
  import cv2
  csv = os.path.join(directory, 'train.csv')
  if os.path.exists(csv):
    return csv
  os.makedirs(os.path.join(directory, 'videos'), exist_ok=True)
  rng = np.random.default_rng(0)
  lines = []
  for v in range(num_videos):
    base = cv2.resize(rng.uniform(0, 255, (6, 8, 3)).astype(np.float32), (size[1] * 2, size[0]),
                      interpolation=cv2.INTER_CUBIC)
    path = os.path.join(directory, 'videos', f'v{v}.mp4')
    with av.open(path, 'w') as container:
      stream = container.add_stream('libx264', rate=25)
      stream.height, stream.width, stream.pix_fmt = size[0], size[1], 'yuv420p'
      if gop:
        stream.codec_context.gop_size = gop
      for t in range(num_frames):
        x = (2 * t) % size[1]
        frame = np.clip(base[:, x:x + size[1]] + rng.normal(0, 6, size + (3,)), 0, 255).astype(np.uint8)
        for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
          container.mux(packet)
      for packet in stream.encode():
        container.mux(packet)
    lines.append(f'videos/v{v}.mp4,{v % 10}')
  with open(os.path.join(directory, 'classes.txt'), 'w') as f:
    f.write('\n'.join(f'class{k}' for k in range(10)) + '\n')
  with open(csv, 'w') as f:
    f.write('\n'.join(lines) + '\n')
  return csv


def convert(directory, csv):
  """The TFRecords of the same list (`vvt data convert`, no resize); returns their pattern."""
  from vvt.data.writing import video_shards
  out = os.path.join(directory, 'records', 'train')
  if not os.path.exists(f'{out}.manifest.json'):
    video_shards.convert(csv, out, os.path.join(directory, 'classes.txt'), num_shards=4, short_side=0,
                         jpeg_quality=90, progress=False)
  return f'{out}.tfrecord@4'


def measure(cfg, steps):
  """{'train': ..., 'eval': ...} of one source's config."""
  from vvt.data import pipeline
  from vvt.data.spec import DataSpec
  it = pipeline.make_train_iterator(DataSpec.of(cfg), 8, process_index=0, process_count=1)
  for _ in range(3):
    next(it)  # start-up (tracing, the first files) left out
  out = {'train': cpu_timing.timed(8 * steps, lambda: [next(it) for _ in range(steps)])}
  it.close()
  it = pipeline.make_eval_iterator(DataSpec.of(cfg), 'test', 8, process_index=0, process_count=1)
  next(it)
  out['eval'] = cpu_timing.timed(len(it) * 8 - 8, lambda: list(it))
  return out


def configs(csv, pattern):
  """{'folder': ..., 'tfrecord': ...}: dataset configs of the same videos."""
  from vvt.config import dataset as data_config
  out = {}
  for name, files in (('folder', csv), ('tfrecord', pattern)):
    cfg = data_config.get_config()
    cfg.update(train_files=files, eval_files=files, num_classes=10, num_frames=8, stride=2, image_size=224,
               train_min_resize=256, train_max_resize=320, eval_resize=256, num_spatial_crops=3,
               shuffle_buffer=16, prefetch=2, name='video_folder' if name == 'folder' else 'dmvr')
    out[name] = cfg
  return out


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--data-dir', default='/tmp/vvt_bench_video_folder')
  p.add_argument('--videos', type=int, default=24)
  p.add_argument('--frames', type=int, default=150)
  p.add_argument('--gop', type=int, default=0, help='frames between keyframes (0: the encoder default, 250)')
  p.add_argument('--steps', type=int, default=12, help='training batches measured per round')
  p.add_argument('--rounds', type=int, default=3)
  args = p.parse_args()
  sys.path.insert(0, HERE)
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  directory = os.path.join(args.data_dir, f'{args.videos}x{args.frames}_gop{args.gop}')
  csv = write_videos(directory, args.videos, args.frames, args.gop)
  cfgs = configs(csv, convert(directory, csv))
  results = {name: [] for name in cfgs}
  for r in range(args.rounds):
    for name, cfg in cfgs.items():
      results[name].append(measure(cfg, args.steps))
    print(f'round {r + 1}/{args.rounds} done', file=sys.stderr)
  print(f'{args.videos} videos x {args.frames} frames (340x256 H.264, keyframe every {args.gop or 250} frames; '
        f'TFRecords: JPEG 90), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; median of '
        f'{args.rounds} rounds')
  for what, unit in (('train', 'clips/s'), ('eval', 'views/s')):
    med = {name: {k: statistics.median(x[what][k] for x in results[name]) for k in ('rate', 'cpu_ms')}
           for name in cfgs}
    cells = '   |   '.join(f'{name}: {m["rate"]:7.1f} {unit} {m["cpu_ms"]:7.2f} ms CPU each '
                           f'({2000 / m["cpu_ms"]:6.1f} on 2 free cores)' for name, m in med.items())
    ratio = med['folder']['rate'] / med['tfrecord']['rate']
    cpu = med['folder']['cpu_ms'] / med['tfrecord']['cpu_ms']
    print(f'{what:5s}  {cells}   |   folder / tfrecord: {ratio:.2f}x the rate, {cpu:.2f}x the CPU')


if __name__ == '__main__':
  main()
