"""Synthetic feature sequences with events in them: a localisation dataset that needs no video.

    write_synthetic_sequences(root, videos=..., length=..., dim=..., classes=..., seed=0) -> Annotations

writes `root/sequences/{id}.npy` float32 (length, dim) and `root/sequences.json` (the layout of `vvt features
--window`, windows of `stride` seconds centred at (i + 0.5) * stride) and `root/annotations.json` (ActivityNet
style; the first `train_share` of the videos in subset 'training', the rest 'validation'). Each sequence is noise
N(0, 0.5^2) plus, over each event's steps, its class's fixed random pattern (norm ~2 sqrt(dim)); events of 4-24
steps, 3-12 steps apart, of random classes.
"""
import json
import os

import numpy as np

from vvt.data.reading import annotations as annotations_lib


def _events(rng, length: int, classes: int) -> list:
  """[(first step, end step, class)] of one sequence."""
  out, t = [], int(rng.integers(2, 10))
  while t < length - 6:
    end = min(t + int(rng.integers(4, 25)), length - 1)
    out.append((t, end, int(rng.integers(0, classes))))
    t = end + int(rng.integers(3, 13))
  return out


def write_synthetic_sequences(root: str, videos: int = 40, length: int = 128, dim: int = 32, classes: int = 4,
                              seed: int = 0, stride: float = 0.5, train_share: float = 0.75):
  """See the module docstring; returns the `Annotations` written."""
  rng = np.random.default_rng(seed)
  patterns = rng.normal(0, 2.0, (classes, dim))
  os.makedirs(os.path.join(root, 'sequences'), exist_ok=True)
  index, entries = {}, {}
  for v in range(videos):
    vid = f'synthetic_{v:04d}'
    x = rng.normal(0, 0.5, (length, dim)).astype(np.float32)
    events = _events(rng, length, classes)
    for first, end, c in events:
      x[first:end] += patterns[c]
    np.save(os.path.join(root, 'sequences', f'{vid}.npy'), x)
    index[vid] = {'path': f'{vid}.mp4', 'duration': length * stride, 'fps': 1.0 / stride,
                  'centres': [(i + 0.5) * stride for i in range(length)]}
    entries[vid] = annotations_lib.VideoAnnotation(
        duration=length * stride, subset='training' if v < train_share * videos else 'validation',
        segments=tuple(((first + 0.5) * stride, (end + 0.5) * stride, c) for first, end, c in events))
  with open(os.path.join(root, 'sequences.json'), 'w', encoding='utf-8') as f:
    json.dump({'window_seconds': stride, 'stride_seconds': stride, 'feature_dim': dim, 'layers': [],
               'combine': None, 'checkpoint': 'synthetic', 'num_videos': videos, 'videos': index,
               'videos_skipped': []}, f)
  ann = annotations_lib.Annotations(entries, tuple(f'action_{c}' for c in range(classes)))
  annotations_lib.write_activitynet(os.path.join(root, 'annotations.json'), ann)
  return ann
