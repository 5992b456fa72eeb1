"""The windows of a video of any length, decoded as they advance (`vvt predict --window`).

    source = open_frames(path, kind, fps=25.0)       -> FrameSource: .fps, .declared (frames or 0), .frames()
    stream = WindowStream(source.frames(), window, stride, fps)
    for w in stream: w.index, w.start, w.end (frames [start, end)), w.start_s, w.end_s, w.frames (W, h, w, 3)
    stream.peak                                      the most frames it ever held (<= window)
    window_views(w.frames, spec)                      -> uint8 (V, T, S, S, 3): the evaluation views of a window

Windows start at frames 0, stride, 2 * stride, ... and hold `window` frames; where the last of those ends before
the video does, one more window ends at the last frame, so every frame is in a window (`tail=False`: not that one,
so the windows stay a uniform grid, as feature sequences need). Frames come from a
streaming decoder (PyAV's frame iterator, or a frame folder's images one by one) into a ring buffer of `window`
frames: memory does not grow with the video's length. A window is scored as evaluation scores a video of
`window` frames (`views.frame_indices`, `views.views_from_clips`). A video shorter than one window raises
`WindowTooLong` naming it.
"""
import collections
import dataclasses
import os
from typing import Iterator

import numpy as np

from vvt.data.reading import video_files
from vvt.data.transforms import views


class WindowTooLong(ValueError):
  """The window is longer than the video (the message names both)."""


@dataclasses.dataclass(frozen=True)
class Window:
  """Frames [start, end) of a video, shown from start_s to end_s seconds; frames uint8 (end - start, h, w, 3)."""
  index: int
  start: int
  end: int
  start_s: float
  end_s: float
  frames: np.ndarray


@dataclasses.dataclass
class FrameSource:
  """A video's frames one at a time: `frames()` yields (uint8 (h, w, 3), time in seconds)."""
  name: str
  fps: float
  declared: int  # frames the container declares (0: unknown)
  frames: object


def _video_source(path: str) -> FrameSource:
  import av
  try:
    with av.open(path) as container:
      if not container.streams.video:
        raise video_files.UnreadableVideo(f'{path}: no video stream')
      stream = container.streams.video[0]
      rate = stream.average_rate or stream.guessed_rate
      fps, declared = float(rate) if rate else 0.0, video_files.declared_frames(stream, container)
  except video_files.UnreadableVideo:
    raise
  except Exception as e:  # (PyAV / FFmpeg errors of every kind)
    raise video_files.UnreadableVideo(f'{path}: cannot decode ({type(e).__name__}: {e})') from e
  if fps <= 0:
    raise video_files.UnreadableVideo(f'{path}: the video stream states no frame rate')

  def frames():
    n = 0
    try:
      with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = 'AUTO'
        for frame in container.decode(stream):
          yield frame.to_ndarray(format='rgb24'), (float(frame.time) if frame.time is not None else n / fps)
          n += 1
    except Exception as e:
      raise video_files.UnreadableVideo(f'{path}: decoding stopped at frame {n} ({type(e).__name__}: {e})') from e
  return FrameSource(path, fps, declared, frames)


def _folder_source(folder: str, fps: float) -> FrameSource:
  files = video_files.image_files(folder)

  def frames():
    for i, f in enumerate(files):
      yield video_files.read_image(f), i / fps
  return FrameSource(folder, fps, len(files), frames)


def open_frames(path: str, kind: str, fps: float = 25.0) -> FrameSource:
  """The frame source of a video file (its own frame rate) or a frame folder (`fps`)."""
  if kind == 'missing':
    raise video_files.UnreadableVideo(f'{path}: no such file, or a folder without videos or frames')
  return _folder_source(path, fps) if kind == 'frames' else _video_source(path)


def window_starts(num_frames: int, window: int, stride: int, tail: bool = True) -> list:
  """First frames of the windows of a video of `num_frames` frames (what `WindowStream` yields)."""
  if num_frames < window:
    return []
  starts = list(range(0, num_frames - window + 1, stride))
  return starts + ([num_frames - window] if tail and starts[-1] + window < num_frames else [])


class WindowStream:
  """Iterates the windows of `frames` ((frame, time) pairs), holding at most `window` frames at a time."""

  def __init__(self, frames, window: int, stride: int, fps: float, name: str = 'the video', tail: bool = True):
    if window < 1 or stride < 1:
      raise ValueError(f'window ({window}) and stride ({stride}) must be at least 1 frame')
    self.frames, self.window, self.stride, self.fps, self.name = frames, window, stride, fps, name
    self.tail = tail  # one more window ending at the last frame, where the grid's last ends before it
    self.peak = 0   # the most frames held at once
    self.count = 0  # frames read so far

  def _make(self, index, buffer, times) -> Window:
    start = self.count - len(buffer)
    return Window(index, start, self.count, times[0], times[-1] + 1.0 / self.fps, np.stack(buffer))

  def __iter__(self) -> Iterator[Window]:
    buffer = collections.deque(maxlen=self.window)
    times = collections.deque(maxlen=self.window)
    index, last_end = 0, 0
    for frame, t in self.frames:
      buffer.append(frame)
      times.append(t)
      self.count += 1
      self.peak = max(self.peak, len(buffer))
      start = self.count - self.window
      if start >= 0 and start % self.stride == 0:
        yield self._make(index, buffer, times)
        index, last_end = index + 1, self.count
    if self.count < self.window:
      raise WindowTooLong(f'{self.name}: the window of {self.window} frames ({self.window / self.fps:.2f} s) is '
                          f'longer than the video ({self.count} frames, {self.count / self.fps:.2f} s)')
    if self.tail and last_end < self.count:  # the tail: one window ending at the last frame
      yield self._make(index, buffer, times)


def window_views(frames: np.ndarray, spec) -> np.ndarray:
  """uint8 (V, T, S, S, 3): the evaluation views of a window's frames, as of a video of that many frames."""
  idx = views.frame_indices(len(frames), spec)
  return views.views_from_clips(frames[idx.reshape(-1)], spec)


def parse_span(text: str, fps: float, what: str) -> int:
  """Frames of a `--window` / `--stride` value: seconds ('2', '2.5s') or frames ('16f') at `fps`."""
  t = str(text).strip().lower()
  try:
    frames = float(t[:-1]) if t.endswith('f') else float(t.rstrip('s')) * fps
  except ValueError:
    raise ValueError(f'--{what} {text!r}: give seconds (2.5) or frames (16f)') from None
  if not frames > 0:
    raise ValueError(f'--{what} must be positive, got {text!r}')
  return max(1, int(round(frames)))


def stem(path: str) -> str:
  """The name of a video's output files: its file name without extension (a folder: its name)."""
  return os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
