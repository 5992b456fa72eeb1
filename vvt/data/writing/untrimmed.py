"""Synthetic untrimmed videos: short motion events (the synthetic classes) in long videos of background.

    info = write_untrimmed(out_dir, num_classes=4, train_videos=8, validation_videos=4, video_seconds=24.0, fps=8,
                           events=(1, 3), event_seconds=(2.0, 4.0), background='noise', seed=0)

Every video has one background (a dark colour with a random gradient, as the synthetic clips'); `background='static'`
shows it still, `'noise'` with fresh pixel noise (std `NOISE`) on every frame, events included, so the noise tells
nothing. Between `events[0]` and `events[1]` events per video, each of a random class and of `event_seconds[0]` to
`event_seconds[1]` seconds, are placed at random, apart: an event is a clip of its motion class
(`synthetic.render_clip`: one object moving down, up, down-and-back, ...) drawn over the video's background, so
outside the events there is no object at all. Written:

    out_dir/videos/{training,validation}_NNNN.mp4   (MPEG-4 part 2 via PyAV, `fps` frames per second)
    out_dir/annotations.json                        ActivityNet style: {"database": {video_id: {"subset":
                                                    "training" | "validation", "duration", "annotations":
                                                    [{"segment": [start_s, end_s], "label": class name}]}}}
    out_dir/classes.txt                             the class names, line i = label i

A segment is [first frame / fps, (last frame + 1) / fps]: the seconds the event's frames are shown. Every value is
checked before anything is written (ValueError, one line).
"""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from vvt.data.reading import annotations as annotations_lib
from vvt.data.writing import synthetic

BACKGROUNDS = ('static', 'noise')
NOISE = 12.0           # std of the pixel noise of 'noise' backgrounds
MIN_EVENT_FRAMES = 4   # what the synthetic classes need to show their order
SUBSETS = ('training', 'validation')


def check(num_frames_video: int, fps: float, events: tuple, event_frames: tuple, frame_size: int, videos: tuple,
          background: str) -> list:
  """Problems of the sizes (one line each): counts, lengths, events that do not fit in a video."""
  problems = []
  if fps <= 0:
    problems.append(f'fps must be positive, got {fps:g}')
  if frame_size < 16:
    problems.append(f'frame size must be >= 16 pixels, got {frame_size}')
  if min(videos) < 1:
    problems.append(f'train and validation videos must be >= 1 each, got {videos[0]} and {videos[1]}')
  if background not in BACKGROUNDS:
    problems.append(f'background must be one of {", ".join(BACKGROUNDS)}, got {background!r}')
  if not 1 <= events[0] <= events[1]:
    problems.append(f'events per video must be MIN,MAX with 1 <= MIN <= MAX, got {events[0]},{events[1]}')
  if not MIN_EVENT_FRAMES <= event_frames[0] <= event_frames[1]:
    problems.append(f'event lengths must be MIN,MAX seconds with MIN >= {MIN_EVENT_FRAMES} frames and MIN <= MAX, '
                    f'got {event_frames[0]},{event_frames[1]} frames')
  elif events[1] * (event_frames[1] + 1) > num_frames_video:
    problems.append(f'{events[1]} events of up to {event_frames[1]} frames (and a frame apart) do not fit in a '
                    f'video of {num_frames_video} frames: give longer videos, fewer or shorter events')
  return problems


def _layout(rng, num_frames: int, events: tuple, event_frames: tuple, num_classes: int) -> list:
  """[(first frame, frames, label)] of one video's events in time order, at least one frame apart."""
  n = int(rng.integers(events[0], events[1] + 1))
  lengths = rng.integers(event_frames[0], event_frames[1] + 1, size=n)
  labels = rng.integers(0, num_classes, size=n)
  spare = num_frames - int(lengths.sum()) - (n - 1)  # frames of background beyond one between events
  cuts = np.sort(rng.integers(0, spare + 1, size=n))  # where each event starts within the spare frames
  starts = cuts + np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])
  return [(int(s), int(k), int(c)) for s, k, c in zip(starts, lengths, labels, strict=True)]


def _frames(rng, layout, num_frames, frame_size, class_ids, background: str):
  """Yields the video's uint8 (f, f, 3) frames: its background, the events drawn over it."""
  noise = NOISE if background == 'noise' else 0.0
  backdrop = synthetic.gradient_background(rng, frame_size)
  still = np.clip(np.round(backdrop), 0, 255).astype(np.uint8)
  events = {start: (length, label) for start, length, label in layout}
  t = 0
  while t < num_frames:
    if t in events:
      length, label = events[t]
      yield from synthetic.render_clip(class_ids[label], rng, length, frame_size, noise=noise, background=backdrop)
      t += length
      continue
    yield still if not noise else np.clip(np.round(backdrop + rng.normal(0, noise, backdrop.shape)), 0,
                                          255).astype(np.uint8)
    t += 1


def write_mp4(path: str, frames, fps: float, frame_size: int) -> None:
  """An mp4 (MPEG-4 part 2 at a high bit rate, so the small object survives) of uint8 (f, f, 3) frames."""
  import av
  with av.open(path, 'w') as c:
    s = c.add_stream('mpeg4', rate=int(round(fps)))
    s.height = s.width = frame_size
    s.pix_fmt, s.bit_rate = 'yuv420p', 2_000_000
    for f in frames:
      c.mux(s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format='rgb24')))
    c.mux(s.encode())


def write_untrimmed(out_dir: str, num_classes: int = 4, classes: Optional[list] = None, train_videos: int = 8,
                    validation_videos: int = 4, video_seconds: float = 24.0, fps: int = 8, frame_size: int = 64,
                    events: tuple = (1, 3), event_seconds: tuple = (2.0, 4.0), background: str = 'noise',
                    seed: int = 0, log=None) -> dict:
  """Writes the untrimmed set (see the module docstring); returns {'videos', 'annotations', 'classes',
  'class_names', 'num_videos', 'num_events'}. ValueError (the problems, one a line) before anything is written."""
  names = synthetic._class_names(classes, num_classes)
  num_frames = int(round(video_seconds * fps))
  event_frames = tuple(int(round(s * fps)) for s in event_seconds)
  problems = check(num_frames, fps, tuple(events), event_frames, frame_size, (train_videos, validation_videos),
                   background)
  if problems:
    raise ValueError('\n'.join(problems))
  class_ids = [synthetic.CLASS_NAMES.index(n) for n in names]
  os.makedirs(os.path.join(out_dir, 'videos'), exist_ok=True)
  videos = {}
  for s, (subset, count) in enumerate(zip(SUBSETS, (train_videos, validation_videos), strict=True)):
    for i in range(count):
      vid, rng = f'{subset}_{i:04d}', np.random.default_rng([seed, s, i])
      layout = _layout(rng, num_frames, tuple(events), event_frames, len(names))
      write_mp4(os.path.join(out_dir, 'videos', f'{vid}.mp4'),
                _frames(rng, layout, num_frames, frame_size, class_ids, background), fps, frame_size)
      videos[vid] = annotations_lib.VideoAnnotation(
          num_frames / fps, subset, tuple((a / fps, (a + k) / fps, c) for a, k, c in layout))
      if log:
        log(vid)
  ann = annotations_lib.Annotations(videos, tuple(names))
  path = os.path.join(out_dir, 'annotations.json')
  annotations_lib.write_activitynet(path, ann)
  with open(os.path.join(out_dir, 'classes.txt'), 'w', encoding='utf-8') as f:
    f.write('\n'.join(names) + '\n')
  return {'videos': os.path.join(out_dir, 'videos'), 'annotations': path,
          'classes': os.path.join(out_dir, 'classes.txt'), 'class_names': list(names), 'num_videos': len(videos),
          'num_events': sum(len(v.segments) for v in videos.values())}
