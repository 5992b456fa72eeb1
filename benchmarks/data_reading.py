"""Throughput of the input pipelines on intact data, this checkout against another, side by side.

    .venv/bin/python benchmarks/data_reading.py [--before DIR] [--rounds 3] [--videos 64 --frames 32]

DIR is another checkout of vvt (e.g. `git archive BASE | tar -x -C /tmp/vvt_before`). Each round runs, in
fresh processes taking turns (before, after, before, ...: load on the machine hits both alike), three
measurements on the same DMVR TFRecords (4 shards of videos of 128x170 JPEG frames, written once into
--data-dir):

  * read:  the sources' record stream (files read one by one, with the handling of damaged files), records/s;
  * train: make_train_iterator, 8 frames at stride 2, 112 crop, flip, uint8 batches of 8, clips/s;
  * eval:  make_eval_iterator, 1 clip x 3 crops of 8 frames, views/s (after the first batch).

Prints the median over rounds of the wall-clock rate and of the CPU milliseconds per item (the rate that
stays meaningful when other jobs share the machine).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import cpu_timing  # benchmarks/cpu_timing.py, beside this script

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_data(directory, num_videos, num_frames, shards=4):
  """DMVR shards of textured videos; returns the pattern."""
  import numpy as np
  import tensorflow as tf

  from vvt.data.writing import dmvr_records
  names = [os.path.join(directory, f'bench-{i:05d}-of-{shards:05d}.tfrecord') for i in range(shards)]
  pattern = os.path.join(directory, 'bench-*-of-*.tfrecord')
  if all(os.path.exists(n) for n in names):
    return pattern
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(0)
  for name, ids in zip(names, np.array_split(np.arange(num_videos), shards), strict=True):
    recs = []
    for v in ids:
      base = tf.image.resize(rng.uniform(0, 255, (1, 6, 8, 3)).astype(np.float32), [128, 170], 'bicubic')[0]
      frames = [tf.io.encode_jpeg(np.clip(np.roll(base.numpy(), 3 * t, 1) + rng.normal(0, 10, base.shape),
                                          0, 255).astype(np.uint8), quality=90).numpy()
                for t in range(num_frames)]
      recs.append(dmvr_records.encode_sequence_example(frames, int(v) % 10, video_id=f'v{v}'))
    dmvr_records.write_records(name, recs)
  return pattern


def measure(pattern, epochs):
  """One process's measurements (this checkout's vvt on sys.path)."""
  from vvt.config import dataset as data_config
  from vvt.data import pipeline
  from vvt.data.reading import registry
  from vvt.data.spec import DataSpec
  cfg = data_config.get_config()
  cfg.update(train_files=pattern, eval_files=pattern, num_classes=10, num_frames=8, stride=2, image_size=112,
             train_min_resize=128, train_max_resize=144, eval_resize=112, shuffle_buffer=16, prefetch=2)
  source = registry.make_source(cfg, 'train')
  n = source.num_records
  out = {}
  records = source.records(0, n).repeat(epochs)
  out['read'] = cpu_timing.timed(n * epochs, lambda: sum(1 for _ in records.as_numpy_iterator()))
  it = pipeline.make_train_iterator(DataSpec.of(cfg), 8, process_index=0, process_count=1)
  for _ in range(3):
    next(it)
  steps = max(1, n * epochs // 8)
  out['train'] = cpu_timing.timed(8 * steps, lambda: [next(it) for _ in range(steps)])
  it.close()
  cfg.num_spatial_crops = 3
  it = pipeline.make_eval_iterator(DataSpec.of(cfg), 'test', 8, process_index=0, process_count=1)
  next(it)  # start-up (tracing, the first files opened) left out, as in the train measurement
  out['eval'] = cpu_timing.timed(len(it) * 8 - 8, lambda: list(it))
  return out


def _run_in(tree, pattern, epochs):
  env = dict(os.environ, PYTHONPATH=tree, TF_CPP_MIN_LOG_LEVEL='3', JAX_PLATFORMS='cpu')
  proc = subprocess.run([sys.executable, os.path.abspath(__file__), '--measure', pattern,
                         '--epochs', str(epochs)], cwd=tree, env=env, capture_output=True, text=True, check=False)
  if proc.returncode:
    raise RuntimeError(f'{tree}: {proc.stderr[-2000:]}')
  return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--before', default=None, help='another vvt checkout to compare with')
  p.add_argument('--data-dir', default='/tmp/vvt_bench_reading')
  p.add_argument('--videos', type=int, default=64)
  p.add_argument('--frames', type=int, default=32)
  p.add_argument('--epochs', type=int, default=3, help='passes of the read and train measurements')
  p.add_argument('--rounds', type=int, default=3)
  p.add_argument('--measure', default=None, help=argparse.SUPPRESS)
  args = p.parse_args()
  if args.measure:
    print(json.dumps(measure(args.measure, args.epochs)))
    return
  sys.path.insert(0, HERE)
  pattern = write_data(args.data_dir, args.videos, args.frames)
  trees = ([('before', os.path.abspath(args.before))] if args.before else []) + [('this', HERE)]
  results = {name: [] for name, _ in trees}
  for r in range(args.rounds):
    for name, tree in trees:
      results[name].append(_run_in(tree, pattern, args.epochs))
    print(f'round {r + 1}/{args.rounds} done', file=sys.stderr)
  print(f'{args.videos} videos x {args.frames} frames (128x170 JPEG), {os.cpu_count()} CPUs, load average '
        f'{os.getloadavg()[0]:.1f}; median of {args.rounds} rounds')
  units = {'read': 'records/s', 'train': 'clips/s', 'eval': 'views/s'}
  for what, unit in units.items():
    cells = []
    for name, _ in trees:
      rate = statistics.median(x[what]['rate'] for x in results[name])
      cpu = statistics.median(x[what]['cpu_ms'] for x in results[name])
      cells.append(f'{name}: {rate:8.1f} {unit} {cpu:7.2f} ms CPU each')
    print(f'{what:5s}  ' + '   |   '.join(cells))


if __name__ == '__main__':
  main()
