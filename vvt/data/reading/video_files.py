"""Video files and frame folders, decoded with PyAV (OpenCV for images): the one decoder of the readers.

    find_inputs(paths)              -> [(name, kind 'video' | 'frames' | 'missing', path)]   (`vvt predict`)
    frame_times(path)               -> int64 (N,): the presentation time of each of a video's N frames
    header(path)                    -> (frames its container declares or 0, frame rate or None): no packet read
    read_frames(path, wanted, times) -> {index: uint8 (h, w, 3)} of the frames `wanted`

A video's frames are its video stream's packets in presentation order: `frame_times` lists them from the
container alone (packets are read, nothing is decoded), so counting costs no decoding. `read_frames` decodes only
from the keyframe before the first wanted frame (a seek) to the last wanted one, and knows each decoded frame's
index by its time; where times are unknown (packets without them), it decodes from the start and counts. The
`video_folder` source and `vvt predict` read videos through these; `vvt data convert` and `vvt predict --window`
stream every frame. A file that cannot be read raises `UnreadableVideo` naming it. A video whose packets fall
short of the frames its container declares (`falls_short`: a file cut short) is what `vvt data convert` calls
partial; the `video_folder` source counts it as a bad record (`errors.PARTIAL_VIDEO`).
"""
import bisect
import os
from typing import Sequence

import numpy as np

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


# A video must hold at least this share of the frames its container declares (and at most 2 frames fewer):
# containers round their counts.
FRAME_TOLERANCE = 0.05


def falls_short(counted: int, declared: int) -> bool:
  """Whether `counted` frames fall short of the `declared` ones by more than the tolerance (max(2,
  FRAME_TOLERANCE * declared) frames); never when the container declares none."""
  allowed = max(2, int(FRAME_TOLERANCE * declared))
  return bool(declared) and counted < declared - allowed


def partial_reason(counted: int, declared: int) -> str:
  """What `vvt data convert` and the `video_folder` source say of a partial video."""
  return (f'partial: decoded {counted} of the {declared} frames its container declares (file cut short or '
          'corrupt)')


def declared_frames(stream, container):
  """Frames a video stream's container declares (0 when it does not say)."""
  if stream.frames:
    return int(stream.frames)
  rate = stream.average_rate or stream.guessed_rate
  if not rate:
    return 0
  if stream.duration and stream.time_base:
    return int(round(float(stream.duration * stream.time_base * rate)))
  if container.duration:
    return int(round(container.duration / 1e6 * float(rate)))
  return 0


def _open(path: str):
  """(container, its first video stream); UnreadableVideo naming `path` when it has none or cannot be opened."""
  import av
  try:
    container = av.open(path)
  except Exception as e:  # (PyAV / FFmpeg errors of every kind)
    raise UnreadableVideo(f'{path}: cannot open ({type(e).__name__}: {e})') from e
  if not container.streams.video:
    container.close()
    raise UnreadableVideo(f'{path}: no video stream')
  return container, container.streams.video[0]


def header(path: str) -> tuple:
  """(frames its container declares, 0 when it does not say; frame rate, None when unknown) of a video, from its
  header alone (no packet read). UnreadableVideo when it cannot be opened."""
  container, stream = _open(path)
  with container:
    rate = stream.average_rate or stream.guessed_rate
    return declared_frames(stream, container), (float(rate) if rate else None)


def frame_times(path: str, with_declared: bool = False):
  """int64 (N,): the presentation time (in the stream's time base) of each frame of a video, in order, from its
  packets alone (empty: no frames); all -1 when its packets carry no times (frames are then counted by decoding,
  in `read_frames`). With `with_declared`: (times, frames its container declares or 0). UnreadableVideo when it
  cannot be opened or read."""
  container, stream = _open(path)
  try:
    with container:
      declared = declared_frames(stream, container)
      times = [p.pts for p in container.demux(stream) if p.size]
  except Exception as e:
    raise UnreadableVideo(f'{path}: cannot read its packets ({type(e).__name__}: {e})') from e
  if any(t is None for t in times):
    times = np.full(len(times), -1, np.int64)
  else:
    times = np.sort(np.asarray(times, np.int64))
  return (times, declared) if with_declared else times


def _decode(container, stream, times, wanted, seek):
  """{index: uint8 (h, w, 3)} of `wanted` (a sorted list) decoded from the keyframe before wanted[0] (`seek`)
  or from the start, and the index of the last frame decoded; None when a decoded frame's time is not one of
  `times` or the seek landed past wanted[0] (the caller then decodes from the start, counting)."""
  known = seek is not None
  if known and seek > 0:
    container.seek(int(times[seek]), stream=stream, backward=True, any_frame=False)
  kept, index, todo = {}, -1, set(wanted)
  for frame in container.decode(stream):
    if known:
      index = bisect.bisect_left(times, frame.pts) if frame.pts is not None else len(times)
      if index >= len(times) or times[index] != frame.pts or (not kept and index > wanted[0]):
        return None, index
    else:
      index += 1
    if index in todo:
      kept[index] = frame.to_ndarray(format='rgb24')
      if len(kept) == len(wanted):
        break
  return kept, index


def read_frames(path: str, wanted, times=None) -> dict:
  """{index: uint8 (h, w, 3)} of the frames `wanted` (indices into `frame_times(path)`, which `times` are when
  given). UnreadableVideo when it cannot be decoded or ends before a wanted frame."""
  wanted = sorted({int(i) for i in wanted})
  if not wanted:
    return {}
  times = frame_times(path) if times is None else np.asarray(times, np.int64)
  if wanted[-1] >= len(times):
    raise UnreadableVideo(f'{path}: frame {wanted[-1]} asked of a video of {len(times)} frames')
  seek = wanted[0] if times[0] >= 0 else None
  container, stream = _open(path)
  decoded = -1
  try:
    with container:
      stream.thread_type = 'AUTO'
      kept, decoded = _decode(container, stream, times, wanted, seek)
      if kept is None:  # times that do not match the decoded frames: count from the start
        container.seek(0, stream=stream, backward=True, any_frame=False)
        kept, decoded = _decode(container, stream, times, wanted, None)
  except UnreadableVideo:
    raise
  except Exception as e:  # (PyAV / FFmpeg errors of every kind)
    raise UnreadableVideo(f'{path}: decoding stopped near frame {max(decoded, 0)} ({type(e).__name__}: {e})') from e
  if len(kept) < len(wanted):
    missing = [i for i in wanted if i not in kept]
    raise UnreadableVideo(f'{path}: decoding ended at frame {decoded + 1} of the {len(times)} it lists, before '
                          f'frame {missing[0]}')
  return kept


def image_files(folder: str) -> list:
  """The image files of a frame folder, sorted by name (one frame each); UnreadableVideo when there are none."""
  files = sorted(f for f in os.listdir(folder) if _has_ext(f, IMAGE_EXTENSIONS))
  if not files:
    raise UnreadableVideo(f'{folder}: no image files ({", ".join(IMAGE_EXTENSIONS)})')
  return [os.path.join(folder, f) for f in files]


def check_jpeg_ends(files) -> None:
  """Raises naming the first JPEG cut short (no end-of-image marker FF D9 at its end: OpenCV would fill the
  missing rows) among every frame of a folder, sampled or not, as for a record's frames
  (`image_frames.check_frame_ends`); reads the first and last 2 bytes of each."""
  for path in files:
    with open(path, 'rb') as f:
      head = f.read(2)
      size = f.seek(0, os.SEEK_END)
      f.seek(max(size - 2, 0))
      if head == b'\xff\xd8' and f.read(2) != b'\xff\xd9':
        raise UnreadableVideo(f'{path}: JPEG cut short ({size} bytes; it does not end with the '
                              'end-of-image marker FF D9)')


def read_image(path: str) -> np.ndarray:
  """uint8 (h, w, 3) RGB of one image file (OpenCV); UnreadableVideo naming it when it cannot be read."""
  import cv2
  image = cv2.imread(path, cv2.IMREAD_COLOR)
  if image is None:
    raise UnreadableVideo(f'{path}: cannot read the image')
  return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
