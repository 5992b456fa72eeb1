"""Feature sequences of long videos on disk (`vvt features --window`): one `.npy` per video and an index.

    OUTPUT/sequences/{video_id}.npy    float32 (N_windows, D): one row per window, in time order
    OUTPUT/sequences.json              {"window_seconds", "stride_seconds", "feature_dim", "layers", "combine",
                                        "checkpoint", "videos": {video_id: {"path", "duration", "fps",
                                        "centres": [N_windows seconds]}}, ...}

    writer = SequenceWriter(output, window_seconds=2.0, stride_seconds=1.0, layers=[], combine=None, checkpoint=...)
    writer.add(video_id, path, duration, fps, features (N, D), centres (N,))   # one video at a time
    index = writer.close()                                                     # writes sequences.json
    index = read_index(output); feats, centres = load_sequence(output, video_id)

The video id is the file's stem (a frame folder: its name); `sequence_ids` refuses two inputs with one stem, naming
both. One `.npy` per video shaped (T, C) is the feature format OpenTAD's `LoadFeats` reads
(`{data_path}/{prefix}{video_name}.npy`, opentad/datasets/transforms/loading.py); `centres` states the time each
row stands for, so a reader need not assume a feature stride or offset. `window_seconds` / `stride_seconds` are None
where the windows were given in frames (`window_frames` / `stride_frames` instead); each video's entry also holds its
`window_frames` and `stride_frames`. A video's `.npy` is written whole or not at all (atomic), and sequences.json
last, so a folder with a sequences.json is complete; `videos_skipped` lists the inputs left out and why.
"""
from __future__ import annotations

import io
import json
import os
from typing import Optional

import numpy as np

from vvt import fileio

SEQUENCES = 'sequences'   # the folder of the per-video .npy files
INDEX = 'sequences.json'


def sequence_ids(paths) -> dict:
  """{video_id: path} of `paths` in their order; ValueError naming both paths of two videos with one stem."""
  from vvt.data.transforms import windows  # (its pixels' imports: only where videos are read)
  out = {}
  for p in paths:
    vid = windows.stem(p)
    if vid in out:
      raise ValueError(f'two videos would write one feature sequence {vid}.npy: {out[vid]} and {p} (a video\'s id '
                       'is its file name without extension; rename one)')
    out[vid] = p
  return out


def sequence_path(output: str, vid: str) -> str:
  return os.path.join(output, SEQUENCES, f'{vid}.npy')


class SequenceWriter:
  """Writes each video's (N, D) sequence as it is finished, then the index (`close`)."""

  def __init__(self, output: str, **header):
    self.output, self.header = output, dict(header)
    self.videos: dict = {}
    self.skipped: list = []
    self.dim: Optional[int] = None
    os.makedirs(os.path.join(output, SEQUENCES), exist_ok=True)

  def add(self, vid: str, path: str, duration: float, fps: float, features: np.ndarray, centres, **extra) -> None:
    """One video: features (N, D) float32, centres (N,) seconds; `extra` goes into its index entry."""
    features = np.asarray(features, np.float32)
    if features.ndim != 2 or len(features) != len(centres):
      raise ValueError(f'{vid}: features {features.shape} and {len(centres)} centres do not match (N, D) and (N,)')
    if self.dim is not None and features.shape[1] != self.dim:
      raise ValueError(f'{vid}: features of {features.shape[1]} dims, the others\' {self.dim}')
    self.dim = int(features.shape[1])
    buffer = io.BytesIO()
    np.save(buffer, features, allow_pickle=False)
    fileio.atomic_write(sequence_path(self.output, vid), lambda f: f.write(buffer.getvalue()), mode='wb')
    self.videos[vid] = {'path': path, 'duration': float(duration), 'fps': float(fps),
                        'centres': [round(float(c), 6) for c in centres], **extra}

  def skip(self, path: str, why: str) -> None:
    self.skipped.append({'path': path, 'error': why})

  def close(self) -> dict:
    """Writes sequences.json; returns it."""
    index = {**self.header, 'feature_dim': self.dim, 'num_videos': len(self.videos), 'videos': self.videos,
             'videos_skipped': self.skipped}
    fileio.atomic_write_text(os.path.join(self.output, INDEX), json.dumps(index, indent=1) + '\n')
    return index


def read_index(output: str) -> dict:
  """The sequences.json of a `vvt features --window` folder."""
  with open(os.path.join(output, INDEX), encoding='utf-8') as f:
    return json.load(f)


def load_sequence(output: str, vid: str, index: Optional[dict] = None) -> tuple:
  """(features float32 (N, D), centres float64 (N,) seconds) of one video of the folder (`index`: its
  sequences.json, read once by the caller, else here)."""
  index = index or read_index(output)
  if vid not in index['videos']:
    raise KeyError(f'{output}: no feature sequence of video {vid!r} ({index["num_videos"]} videos)')
  features = fileio.load_arrays(sequence_path(output, vid))  # damaged, or needing pickle: ValueError naming it
  return features, np.asarray(index['videos'][vid]['centres'], np.float64)
