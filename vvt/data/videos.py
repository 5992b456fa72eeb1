"""Video files and frame folders -> the evaluation views of a config (for `vvt predict`).

    find_inputs(paths)            -> [(name, kind 'video' | 'frames', path)]
    load_views(path, kind, cfg)   -> uint8 (V, T, S, S, 3), V = num_test_clips x num_spatial_crops

The same views as evaluation (`vvt.data.clips.eval_views`), from the same functions: clip frame
indices from `sampling.eval_indices`, crop windows from `transforms.eval_crop_windows`, the resize of
`augment.resize_frames` (OpenCV); view = clip * num_spatial_crops + crop. Only the sampled frames
are kept: a video is decoded twice (PyAV), once to count its frames and once to keep those. The
difference to evaluation on TFRecords is the JPEG round trip of the records' frames.
A file that cannot be read raises `UnreadableVideo` naming it.
"""
import os
from typing import Callable, Sequence

import numpy as np

from vvt.data import augment
from vvt.data import sampling
from vvt.data import transforms

VIDEO_EXTENSIONS = ('.mp4', '.webm', '.avi', '.mkv', '.mov', '.m4v', '.mpg', '.mpeg', '.ogv', '.gif')
IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.webp')


class UnreadableVideo(ValueError):
  """A video file or frame folder that cannot be decoded (the message names it)."""


def _has_ext(name: str, exts) -> bool:
  return name.lower().endswith(exts)


def find_inputs(paths: Sequence[str]) -> list:
  """Each path: a video file; a folder of frames (images) = one video; or a folder of videos
  and/or frame folders (one level). -> [(name, kind, path)] in the order given, folders sorted.
  A path that does not exist (or a folder with nothing to read) is kept as kind 'missing'."""
  out = []
  for p in paths:
    if os.path.isfile(p):
      out.append((p, 'video', p))
    elif os.path.isdir(p):
      entries = sorted(os.listdir(p))
      if any(_has_ext(e, IMAGE_EXTENSIONS) for e in entries) and not any(
          _has_ext(e, VIDEO_EXTENSIONS) for e in entries):
        out.append((p, 'frames', p))
        continue
      found = []
      for e in entries:
        q = os.path.join(p, e)
        if os.path.isfile(q) and _has_ext(e, VIDEO_EXTENSIONS):
          found.append((q, 'video', q))
        elif os.path.isdir(q) and any(_has_ext(x, IMAGE_EXTENSIONS) for x in os.listdir(q)):
          found.append((q, 'frames', q))
      out.extend(found or [(p, 'missing', p)])
    else:
      out.append((p, 'missing', p))
  return out


def frame_indices(num_frames_in_video: int, cfg) -> np.ndarray:
  """int (num_test_clips, T) frame indices of the evaluation clips (`sampling.eval_indices`)."""
  idx = sampling.eval_indices(int(num_frames_in_video), int(cfg.num_frames), int(cfg.stride),
                              int(cfg.num_test_clips), cfg.short_video_policy, cfg.sampling)
  return np.asarray(idx).astype(np.int64)


def views_from_clips(video: np.ndarray, cfg) -> np.ndarray:
  """uint8 (clips*T, h, w, 3) frames of the clips -> uint8 (clips*crops, T, S, S, 3) views."""
  t, size = int(cfg.num_frames), int(cfg.image_size)
  clips, crops = int(cfg.num_test_clips), int(cfg.num_spatial_crops)
  h, w = video.shape[1:3]
  windows = np.asarray(transforms.eval_crop_windows(h, w, size, int(cfg.eval_resize), crops))
  per_crop = np.stack([augment.resize_frames(np.ascontiguousarray(video[:, y:y + ch, x:x + cw]), size)
                       for y, x, ch, cw in windows.tolist()])  # (crops, clips*T, S, S, 3)
  v = per_crop.reshape(crops, clips, t, size, size, 3).transpose(1, 0, 2, 3, 4, 5)
  return np.ascontiguousarray(v.reshape(clips * crops, t, size, size, 3))


# ----------------------------------------------------------------------------- readers


def _video_frames(path: str, wanted=None):
  """Frames of a video file with PyAV: the count (wanted None) or {index: uint8 (h, w, 3)}."""
  import av  # pylint: disable=g-import-not-at-top
  kept, n = {}, 0
  try:
    with av.open(path) as container:
      if not container.streams.video:
        raise UnreadableVideo(f'{path}: no video stream')
      stream = container.streams.video[0]
      stream.thread_type = 'AUTO'
      for frame in container.decode(stream):
        if wanted is not None and n in wanted:
          kept[n] = frame.to_ndarray(format='rgb24')
        n += 1
        if wanted is not None and len(kept) == len(wanted):
          break
  except UnreadableVideo:
    raise
  except Exception as e:  # pylint: disable=broad-except  (PyAV / FFmpeg errors of every kind)
    if n == 0 or wanted is None:
      raise UnreadableVideo(f'{path}: cannot decode ({type(e).__name__}: {e})') from e
    raise UnreadableVideo(f'{path}: decoding stopped at frame {n} ({e})') from e
  if n == 0:
    raise UnreadableVideo(f'{path}: no frames')
  return n if wanted is None else kept


def _image_files(folder: str) -> list:
  files = sorted(f for f in os.listdir(folder) if _has_ext(f, IMAGE_EXTENSIONS))
  if not files:
    raise UnreadableVideo(f'{folder}: no image files ({", ".join(IMAGE_EXTENSIONS)})')
  return [os.path.join(folder, f) for f in files]


def _check_jpeg_ends(files) -> None:
  """Raises naming the first JPEG cut short (no end-of-image marker FF D9 at its end: OpenCV would fill the
  missing rows) among every frame of a folder, sampled or not, as for a record's frames
  (`records.check_frame_ends`); reads the first and last 2 bytes of each."""
  for path in files:
    with open(path, 'rb') as f:
      head = f.read(2)
      size = f.seek(0, os.SEEK_END)
      f.seek(max(size - 2, 0))
      if head == b'\xff\xd8' and f.read(2) != b'\xff\xd9':
        raise UnreadableVideo(f'{path}: JPEG cut short ({size} bytes; it does not end with the '
                              'end-of-image marker FF D9)')


def _read_image(path: str) -> np.ndarray:
  import cv2  # pylint: disable=g-import-not-at-top
  image = cv2.imread(path, cv2.IMREAD_COLOR)
  if image is None:
    raise UnreadableVideo(f'{path}: cannot read the image')
  return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def _gather(indices: np.ndarray, frames: Callable, where: str) -> np.ndarray:
  """uint8 (len(indices), h, w, 3) of `frames(set of indices) -> {index: frame}`; one frame size."""
  got = frames(set(indices.tolist()))
  shapes = {f.shape for f in got.values()}
  if len(shapes) > 1:
    raise UnreadableVideo(f'{where}: frames of different sizes {sorted(shapes)}')
  return np.stack([got[int(i)] for i in indices])


def load_views(path: str, kind: str, cfg) -> np.ndarray:
  """uint8 (V, T, S, S, 3) evaluation views of a video file or frame folder (dataset config `cfg`)."""
  if kind == 'missing':
    raise UnreadableVideo(f'{path}: no such file, or a folder without videos or frames')
  if kind == 'frames':
    files = _image_files(path)
    _check_jpeg_ends(files)
    idx = frame_indices(len(files), cfg)
    video = _gather(idx.reshape(-1), lambda want: {i: _read_image(files[i]) for i in want}, path)
  else:
    n = _video_frames(path)
    idx = frame_indices(n, cfg)
    video = _gather(idx.reshape(-1), lambda want: _video_frames(path, want), path)
  return views_from_clips(video, cfg)
