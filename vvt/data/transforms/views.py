"""Video files and frame folders -> the evaluation views of a config, in numpy (for `vvt predict`, `vvt attention`).

    load_views(path, kind, spec)   -> uint8 (V, T, S, S, 3), V = num_test_clips x num_spatial_crops
                                      (num_test_clips='all': the clips that tile the video, `views_per_video` None)

The same views as evaluation (`vvt.data.transforms.clips.eval_views`), from the same functions: clip frame
indices from `sampling.eval_indices`, crop windows from `crops.eval_crop_windows`, the resize of
`augment.resize_frames` (OpenCV); view = clip * num_spatial_crops + crop. Only the sampled frames are decoded
(`vvt.data.reading.video_files`). The difference to evaluation on TFRecords is the JPEG round trip of the
records' frames. A file that cannot be read raises `video_files.UnreadableVideo` naming it.
"""
from typing import Callable

import numpy as np

from vvt.data import spec as data_spec
from vvt.data.reading import video_files
from vvt.data.transforms import augment
from vvt.data.transforms import clips as clips_lib
from vvt.data.transforms import crops
from vvt.data.transforms import sampling
from vvt.models import frame_size


def views_per_video(spec):
  """num_test_clips x num_spatial_crops, or None when it varies per video (num_test_clips='all')."""
  return None if clips_lib.tiles_video(spec) else int(spec.num_test_clips) * int(spec.num_spatial_crops)


def frame_indices(num_frames_in_video: int, spec) -> np.ndarray:
  """int (clips, T) frame indices of the evaluation clips (`sampling.eval_indices`, or `sampling.tile_indices`
  with num_test_clips='all')."""
  if clips_lib.tiles_video(spec):
    idx = sampling.tile_indices(int(num_frames_in_video), int(spec.num_frames), int(spec.stride),
                                spec.short_video_policy)
  else:
    idx = sampling.eval_indices(int(num_frames_in_video), int(spec.num_frames), int(spec.stride),
                                int(spec.num_test_clips), spec.short_video_policy, spec.sampling)
  return np.asarray(idx).astype(np.int64)


def views_from_clips(video: np.ndarray, spec) -> np.ndarray:
  """uint8 (clips*T, h, w, 3) frames of the clips -> uint8 (clips*crops, T, H, W, 3) views, (H, W) =
  spec.image_size."""
  t, size = int(spec.num_frames), frame_size.parse(spec.image_size)
  clips, num_crops = len(video) // t, int(spec.num_spatial_crops)
  h, w = video.shape[1:3]
  windows = np.asarray(crops.eval_crop_windows(h, w, size, int(spec.eval_resize), num_crops))
  per_crop = np.stack([augment.resize_frames(np.ascontiguousarray(video[:, y:y + ch, x:x + cw]), size)
                       for y, x, ch, cw in windows.tolist()])  # (crops, clips*T, H, W, 3)
  v = per_crop.reshape(num_crops, clips, t, *size, 3).transpose(1, 0, 2, 3, 4, 5)
  return np.ascontiguousarray(v.reshape(clips * num_crops, t, *size, 3))


def _gather(indices: np.ndarray, frames: Callable, where: str) -> np.ndarray:
  """uint8 (len(indices), h, w, 3) of `frames(set of indices) -> {index: frame}`; one frame size."""
  got = frames(set(indices.tolist()))
  shapes = {f.shape for f in got.values()}
  if len(shapes) > 1:
    raise video_files.UnreadableVideo(f'{where}: frames of different sizes {sorted(shapes)}')
  return np.stack([got[int(i)] for i in indices])


def load_views(path: str, kind: str, spec) -> np.ndarray:
  """uint8 (V, T, S, S, 3) evaluation views of a video file or frame folder (`spec`: the run's DataSpec)."""
  data_spec.require(spec, 'load_views')
  if kind == 'missing':
    raise video_files.UnreadableVideo(f'{path}: no such file, or a folder without videos or frames')
  if kind == 'frames':
    files = video_files.image_files(path)
    video_files.check_jpeg_ends(files)
    idx = frame_indices(len(files), spec)
    video = _gather(idx.reshape(-1), lambda want: {i: video_files.read_image(files[i]) for i in want}, path)
  else:
    times = video_files.frame_times(path)
    if not len(times):
      raise video_files.UnreadableVideo(f'{path}: no frames')
    idx = frame_indices(len(times), spec)
    video = _gather(idx.reshape(-1), lambda want: video_files.read_frames(path, want, times), path)
  return views_from_clips(video, spec)
