"""Test-only stand-in for `vvt.data.pipeline` (contract API, numpy only).

Used by unit tests that must not depend on TFRecord decoding, and to check the
evaluator against hand-made view layouts. Videos: a bright square moving in one
of `num_classes` directions, so only motion decides the class.
"""
import math

import numpy as np


def _video(cfg, idx, split):
  rng = np.random.default_rng(hash((split, idx)) % (2**32))
  label = idx % cfg.num_classes
  t, s = cfg.num_frames, cfg.image_size
  angle = 2 * math.pi * label / cfg.num_classes
  x0, y0 = rng.uniform(s * 0.3, s * 0.7, size=2)
  v = np.zeros((t, s, s, 3), np.float32)
  for f in range(t):
    x = int(x0 + math.cos(angle) * f * 1.5) % s
    y = int(y0 + math.sin(angle) * f * 1.5) % s
    v[f, max(y - 2, 0):y + 2, max(x - 2, 0):x + 2] = 1.0
  return v, label


def num_videos(cfg, split):
  return int(cfg.get('fake_train_videos', 64) if split == 'train'
             else cfg.get('fake_test_videos', 16))


def make_train_iterator(cfg, global_batch_size, seed=0, start_step=0,
                        process_index=None, process_count=None):
  pi, pc = process_index or 0, process_count or 1
  b = global_batch_size // pc
  n = num_videos(cfg, 'train')
  step = start_step
  while True:
    rng = np.random.default_rng((seed, step))
    idx = rng.integers(0, n, size=global_batch_size)[pi * b:(pi + 1) * b]
    vids, labels = zip(*[_video(cfg, int(i), 'train') for i in idx])
    yield {'inputs': np.stack(vids), 'label': np.asarray(labels, np.int32),
           'mask': np.ones((b,), np.float32)}
    step += 1


def make_eval_iterator(cfg, split='test', global_batch_size=8, process_index=None,
                       process_count=None):
  pi, pc = process_index or 0, process_count or 1
  views = cfg.num_test_clips * cfg.num_spatial_crops
  rows = [(v, k) for v in range(num_videos(cfg, split)) for k in range(views)]
  nb = -(-len(rows) // global_batch_size)
  rows += [(-1, 0)] * (nb * global_batch_size - len(rows))
  b = global_batch_size // pc
  for i in range(nb):
    chunk = rows[i * global_batch_size:(i + 1) * global_batch_size][pi * b:(pi + 1) * b]
    vids, labels = [], []
    for v, k in chunk:
      x, y = _video(cfg, max(v, 0), split)
      vids.append(np.roll(x, k, axis=2))
      labels.append(y)
    yield {'inputs': np.stack(vids), 'label': np.asarray(labels, np.int32),
           'mask': np.asarray([v >= 0 for v, _ in chunk], np.float32),
           'video_index': np.asarray([v for v, _ in chunk], np.int32),
           'view_index': np.asarray([k for _, k in chunk], np.int32)}
