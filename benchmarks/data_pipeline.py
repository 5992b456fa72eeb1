"""Clips/s of the vvt input pipelines on this machine.

    .venv/bin/python benchmarks/data_pipeline.py [--videos 48 --frames 48 --batch 8 --steps 30]
        [--warmup 15 --only plain,train,eval]

Writes (once, into --data-dir, default /tmp/vvt_bench_data) DMVR TFRecords of
videos with 256x340 JPEG frames (textured content with sensor-like noise,
quality 90, ~36 KB per frame), then
measures, after a warm-up:
  * plain:  TFRecord read + parse + gather 16 frames + JPEG decode (the
            baseline a bare tf.data reader reaches);
  * train:  make_train_iterator, 16 frames at stride 2, 224 crop with scale
            jitter 256..320, flip, colour jitter, RandAugment 2/9, random
            erasing, uint8 numpy batches (normalisation is done on the device
            by the train step, not here); then the same without colour
            jitter, RandAugment and erasing (the Kinetics recipe);
  * eval:   make_eval_iterator, 1 clip x 3 crops (views/s and videos/s);
  * augment (not in the default --only): the training pipeline with
            RandAugment 2/9 against AutoAugment's ImageNet policy (nothing
            else on but crop and flip), measured in alternating rounds in one
            run; prints both and the ratio of their CPU time per clip, and
            the CPU time of the augmentation alone on one 16x224x224 clip.

Besides wall-clock clips/s it prints the CPU time the process spent per clip,
which stays meaningful when other jobs share the machine: cores / (CPU s per
clip) is the rate the pipeline reaches when it has the cores to itself.
"""
import argparse
import os
import platform
import time

import cpu_timing  # benchmarks/cpu_timing.py, beside this script
import numpy as np


def write_data(directory, num_videos, num_frames, shards=4):
  import tensorflow as tf

  from vvt.data.reading import patterns
  from vvt.data.writing import dmvr_records
  pattern = os.path.join(directory, f'bench.tfrecord@{shards}')
  names = patterns.shard_names(os.path.join(directory, 'bench.tfrecord'), shards)
  if all(os.path.exists(n) for n in names):
    return pattern
  os.makedirs(directory, exist_ok=True)
  rng = np.random.default_rng(0)
  per_shard = np.array_split(np.arange(num_videos), shards)
  for name, ids in zip(names, per_shard, strict=True):
    records = []
    for v in ids:
      base = rng.uniform(0, 255, (9, 12, 3)).astype(np.float32)
      smooth = tf.image.resize(base[None], [256, 340], 'bicubic')[0].numpy()
      frames = []
      for t in range(num_frames):
        shifted = np.roll(smooth, 3 * t, axis=1)
        noise = rng.normal(0, 12, shifted.shape)
        img = np.clip(shifted + noise, 0, 255).astype(np.uint8)
        frames.append(tf.io.encode_jpeg(img, quality=90).numpy())
      records.append(dmvr_records.encode_sequence_example(frames, int(v) % 400))
    dmvr_records.write_records(name, records)
  return pattern


def _rate(it, batch, steps, warmup):
  """(clips/s wall clock, CPU seconds of this process per clip)."""
  for _ in range(warmup):
    next(it)
  start, cpu = time.perf_counter(), cpu_timing.cpu_seconds()
  for _ in range(steps):
    next(it)
  clips = steps * batch
  return clips / (time.perf_counter() - start), (cpu_timing.cpu_seconds() - cpu) / clips


def _report(name, result):
  rate, cpu = result
  print(f'{name}: {rate:.1f} clips/s wall clock; {1000 * cpu:.1f} ms CPU per '
        f'clip (= {os.cpu_count() / cpu:.0f} clips/s if all {os.cpu_count()} '
        'cores are free)')


def plain_rate(files, batch, steps, warmup):
  import tensorflow as tf

  from vvt.data.reading import dmvr
  from vvt.data.reading import tfrecord_index

  def parse(r):
    x = dmvr.parse_record(r, 'image/encoded', {'label': 'clip/label/index'}, '')
    frames = tf.gather(x['frames'], tf.range(16) * 2)
    video = tf.map_fn(lambda s: tf.io.decode_jpeg(s, channels=3), frames,
                      fn_output_signature=tf.uint8)
    return tf.image.resize(video[:, 16:240, 58:282], [224, 224]), x['labels']['label']
  ds = tf.data.Dataset.from_tensor_slices(tfrecord_index.expand_patterns(files))
  ds = ds.interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.repeat().map(parse, num_parallel_calls=tf.data.AUTOTUNE)
  ds = ds.batch(batch).prefetch(2)
  return _rate(ds.as_numpy_iterator(), batch, steps, warmup)


def _augment_configs(cfg):
  """{'randaugment': RandAugment 2/9, 'autoaugment': the ImageNet policy}: crop and flip besides."""
  configs = {}
  for name in ('randaugment', 'autoaugment'):
    c = cfg.copy_and_resolve_references()
    c.update(color_jitter=0.0, random_erasing=0.0)
    c.randaugment = {'num_layers': 2, 'magnitude': 9} if name == 'randaugment' else None
    c.autoaugment = 'imagenet' if name == 'autoaugment' else None
    configs[name] = c
  return configs


def augment_policies(cfg, batch, steps, warmup, rounds=3):
  """{name: (clips/s, CPU s per clip)} of the training pipeline with
  RandAugment 2/9 and with AutoAugment 'imagenet', measured in alternating
  rounds (the machine's drift hits both alike), one iterator alive at a time
  (closed after its round: no background prefetch in the other's figures);
  the medians."""
  from vvt.data import pipeline
  from vvt.data.spec import DataSpec
  from vvt.data.transforms import random_draws
  configs = _augment_configs(cfg)
  for name, c in configs.items():  # the imported vvt runs the policy (not a copy that ignores the field)
    assert name in random_draws.train_op_names(c), (name, random_draws.__file__)
  results = {name: [] for name in configs}
  for r in range(rounds):
    for name, c in configs.items():
      it = pipeline.make_train_iterator(DataSpec.of(c), batch, seed=r, process_index=0, process_count=1)
      results[name].append(_rate(it, batch, steps, warmup))
      it.close()
  return {name: tuple(np.median(np.array(v), axis=0)) for name, v in results.items()}


def augment_ops_only(cfg, clips=200, frames=16, size=224):
  """{name: CPU ms per clip} of the augmentation alone (`augment.augment` on
  one uint8 (16, 224, 224, 3) clip, the draws of `clips` seeds; one thread)."""
  import tensorflow as tf

  from vvt.data.transforms import augment
  from vvt.data.transforms import random_draws
  video = np.random.default_rng(0).integers(0, 256, (frames, size, size, 3), dtype=np.uint8)
  out = {}
  for name, c in _augment_configs(cfg).items():
    ra = random_draws.randaugment_args(c)
    level = random_draws.randaugment_level(ra[1]) if ra else 0.0
    policy = random_draws.autoaugment_args(c)
    draws = [{k: v.numpy() for k, v in random_draws.train_draws(c, tf.constant([0, k], tf.int64), size, size).items()}
             for k in range(clips)]
    start = cpu_timing.cpu_seconds()
    for d in draws:
      augment.augment(video, d, level, policy)
    out[name] = 1000 * (cpu_timing.cpu_seconds() - start) / clips
  return out


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawTextHelpFormatter)
  parser.add_argument('--data-dir', default='/tmp/vvt_bench_data')
  parser.add_argument('--videos', type=int, default=48)
  parser.add_argument('--frames', type=int, default=48)
  parser.add_argument('--batch', type=int, default=8)
  parser.add_argument('--steps', type=int, default=30)
  parser.add_argument('--warmup', type=int, default=15)
  parser.add_argument('--only', default='plain,train,eval')
  args = parser.parse_args()
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  from vvt.config import dataset as data_config
  from vvt.data import pipeline
  from vvt.data.spec import DataSpec

  t0 = time.perf_counter()
  files = write_data(args.data_dir, args.videos, args.frames)
  print(f'data: {files} ({args.videos} videos x {args.frames} frames of '
        f'256x340 JPEG; ready in {time.perf_counter() - t0:.1f}s)')
  print(f'machine: {platform.processor() or platform.machine()}, '
        f'{os.cpu_count()} CPUs, python {platform.python_version()}, '
        f'load average {os.getloadavg()[0]:.1f}')
  cfg = data_config.get_config()
  cfg.update(train_files=files, eval_files=files, num_classes=400,
             num_frames=16, stride=2, image_size=224, train_min_resize=256,
             train_max_resize=320, eval_resize=224, horizontal_flip=True,
             color_jitter=0.4, randaugment={'num_layers': 2, 'magnitude': 9},
             random_erasing=0.25, normalization='imagenet', shuffle_buffer=32)
  only = args.only.split(',')
  if 'plain' in only:
    _report('plain tf.data reader (read+parse+decode+resize 16 frames)',
            plain_rate(files, args.batch, args.steps, args.warmup))
  if 'train' in only:
    it = pipeline.make_train_iterator(DataSpec.of(cfg), args.batch, process_index=0,
                                      process_count=1)
    _report('train pipeline (16x224, full augmentation)',
            _rate(it, args.batch, args.steps, args.warmup))
    plain_cfg = cfg.copy_and_resolve_references()
    plain_cfg.update(color_jitter=0.0, random_erasing=0.0)
    plain_cfg.randaugment = None
    it = pipeline.make_train_iterator(DataSpec.of(plain_cfg), args.batch, process_index=0,
                                      process_count=1)
    _report('train pipeline (16x224, crop+flip only)',
            _rate(it, args.batch, args.steps, args.warmup))
  if 'augment' in only:
    res = augment_policies(cfg, args.batch, args.steps, args.warmup)
    _report('train pipeline (16x224, crop+flip + RandAugment 2/9)', res['randaugment'])
    _report('train pipeline (16x224, crop+flip + AutoAugment imagenet)', res['autoaugment'])
    ra, aa = res['randaugment'], res['autoaugment']
    print(f'AutoAugment / RandAugment: {aa[1] / ra[1]:.2f}x the CPU time per clip, '
          f'{aa[0] / ra[0]:.2f}x the clips/s (medians of 3 alternating rounds)')
    ops = augment_ops_only(cfg)
    print(f"augmentation alone, CPU ms per 16x224x224 clip: RandAugment 2/9 {ops['randaugment']:.2f}, "
          f"AutoAugment imagenet {ops['autoaugment']:.2f} (ratio {ops['autoaugment'] / ops['randaugment']:.2f})")
  if 'eval' in only:
    cfg.num_spatial_crops = 3
    n = pipeline.num_videos(DataSpec.of(cfg), 'test')
    start, cpu = time.perf_counter(), cpu_timing.cpu_seconds()
    batches = 0
    for _ in pipeline.make_eval_iterator(DataSpec.of(cfg), 'test', args.batch,
                                         process_index=0, process_count=1):
      batches += 1
    dt, cpu = time.perf_counter() - start, cpu_timing.cpu_seconds() - cpu
    print(f'eval pipeline (1 clip x 3 crops, 16x224): {n * 3 / dt:.1f} views/s = '
          f'{n / dt:.1f} videos/s wall clock; {1000 * cpu / (3 * n):.1f} ms CPU '
          f'per view ({n} videos, {batches} batches, incl. start-up)')


if __name__ == '__main__':
  main()
