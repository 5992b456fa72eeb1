"""Temporal annotations of untrimmed videos: ActivityNet-1.3-style JSON and THUMOS14's per-class text files.

    ann = read_annotations('activity_net.v1-3.min.json')          # a .json file: ActivityNet style
    ann = read_annotations('thumos14/annotations/', subset='val')  # a folder: THUMOS14's {Class}_{subset}.txt
    ann.labels                                   ('BaseballPitch', ...): label index i is labels[i]
    ann.videos['video_validation_0000051']       VideoAnnotation(duration, subset, segments, ambiguous)
      .segments                                  ((start_s, end_s, label index), ...) sorted by start
    ann.select('validation')                     the videos of one subset
    write_activitynet(path, ann)                 the same form back as ActivityNet-style JSON

ActivityNet style: `{"database": {video_id: {"subset", "duration", "annotations": [{"segment": [start, end] (seconds),
"label"}]}}}` (other keys are ignored; a test video may have no annotations). THUMOS14: per class a file
`{Class}_{subset}.txt` of lines `video_id start end` (seconds), and `Ambiguous_{subset}.txt` for the stretches its
annotators could not decide (kept apart as `ambiguous`, as THUMOS14's evaluation ignores detections there); THUMOS14
states no durations (None, or the `durations` given).

The label list is `labels` where given (a label outside it is refused), else the labels found, sorted. Bad
annotations are refused with one line (`AnnotationError`, a ValueError) naming the file and the video: a missing
field, a segment that is not two numbers, one that starts before 0 or ends before it starts, or one that ends past
the video's duration by more than `tolerance` seconds (default 1 s: neither ActivityNet's evaluation nor OpenTAD's
loaders check a segment against the duration at all (OpenTAD keeps any segment that starts inside the video,
opentad/datasets/anet.py `AnetPaddingDataset.get_gt`), and ActivityNet's durations are rounded from the
container; a segment starting past the duration is refused whatever the tolerance).
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from typing import Mapping, Optional, Sequence

AMBIGUOUS = 'Ambiguous'  # THUMOS14's class of undecided stretches
TOLERANCE = 1.0          # seconds a segment may end past its video's duration
THUMOS_LINE = re.compile(r'^(\S+)\s+(\S+)\s+(\S+)\s*$')


class AnnotationError(ValueError):
  """Bad temporal annotations; the message names the file and the video."""
  user_error = True
  bad_input = True  # a command refusing them exits 2 (vvt.cli.common.run)


@dataclasses.dataclass(frozen=True)
class VideoAnnotation:
  """One video: duration in seconds (None where the format states none), subset, segments ((start_s, end_s,
  label index), ...) sorted by start, ambiguous ((start_s, end_s), ...) (THUMOS14's)."""
  duration: Optional[float]
  subset: str
  segments: tuple
  ambiguous: tuple = ()


@dataclasses.dataclass(frozen=True)
class Annotations:
  """Videos {video_id: VideoAnnotation} and the label list (label index i names labels[i])."""
  videos: dict
  labels: tuple

  def select(self, subset: str) -> 'Annotations':
    """The videos of one subset, the same label list."""
    return Annotations({k: v for k, v in self.videos.items() if v.subset == subset}, self.labels)


def _number(value, where: str, what: str) -> float:
  if isinstance(value, bool) or not isinstance(value, (int, float, str)):
    raise AnnotationError(f'{where}: {what} is not a number ({value!r})')
  try:
    out = float(value)
  except ValueError:
    raise AnnotationError(f'{where}: {what} is not a number ({value!r})') from None
  if not math.isfinite(out):
    raise AnnotationError(f'{where}: {what} is not a finite number ({value!r})')
  return out


def _check_segment(start: float, end: float, duration: Optional[float], where: str, tolerance: float) -> None:
  """AnnotationError for a segment before 0, ending before it starts, or past the duration (+ tolerance)."""
  if start < 0:
    raise AnnotationError(f'{where}: segment [{start:g}, {end:g}] starts before 0 s')
  if end < start:
    raise AnnotationError(f'{where}: segment [{start:g}, {end:g}] ends before it starts')
  if duration is not None and (start >= duration or end > duration + tolerance):
    raise AnnotationError(f'{where}: segment [{start:g}, {end:g}] goes past the video\'s duration {duration:g} s '
                          f'(an end up to {tolerance:g} s past it is allowed)')


def _label_list(found: Sequence[str], labels: Optional[Sequence[str]]) -> tuple:
  if labels is None:
    return tuple(sorted(set(found)))
  labels = tuple(labels)
  dup = sorted({n for n in labels if labels.count(n) > 1})
  if dup:
    raise AnnotationError(f'the label list repeats {", ".join(dup)}')
  return labels


def _index(label: str, table: dict, where: str) -> int:
  if label not in table:
    raise AnnotationError(f'{where}: label {label!r} is not in the label list ({len(table)} labels)')
  return table[label]


# ----------------------------------------------------------------------------------- ActivityNet style


def _anet_video(video_id, entry, where: str) -> tuple:
  """(duration, subset, [(start, end, label name)]) of one database entry; AnnotationError for missing fields."""
  if not isinstance(entry, dict):
    raise AnnotationError(f'{where}: not an object')
  missing = [k for k in ('subset', 'duration') if k not in entry]
  if missing:
    raise AnnotationError(f'{where}: no {" or ".join(missing)}')
  duration = _number(entry['duration'], where, 'duration')
  if duration <= 0:
    raise AnnotationError(f'{where}: duration {duration:g} s is not positive')
  raw = entry.get('annotations', [])
  if not isinstance(raw, list):
    raise AnnotationError(f'{where}: annotations is not a list')
  segments = []
  for i, a in enumerate(raw):
    at = f'{where}: annotation {i}'
    if not isinstance(a, dict) or 'segment' not in a or 'label' not in a:
      raise AnnotationError(f'{at}: needs a segment [start, end] and a label')
    seg = a['segment']
    if not isinstance(seg, (list, tuple)) or len(seg) != 2:
      raise AnnotationError(f'{at}: segment {seg!r} is not [start, end]')
    segments.append((_number(seg[0], at, 'segment start'), _number(seg[1], at, 'segment end'), str(a['label'])))
  return duration, str(entry['subset']), segments


def read_activitynet(path: str, labels: Optional[Sequence[str]] = None, tolerance: float = TOLERANCE) -> Annotations:
  """An ActivityNet-style JSON file (see the module docstring) -> Annotations; AnnotationError (one line) naming
  the file and video of the first bad annotation."""
  try:
    with open(path, encoding='utf-8') as f:
      doc = json.load(f)
  except (OSError, ValueError) as e:
    raise AnnotationError(f'{path}: not a readable JSON file ({type(e).__name__}: {e})') from None
  database = doc.get('database') if isinstance(doc, dict) else None
  if not isinstance(database, dict):
    raise AnnotationError(f'{path}: no "database" object of videos (ActivityNet style: '
                          '{"database": {video_id: {"subset", "duration", "annotations"}}})')
  raw = {vid: _anet_video(vid, entry, f'{path}: video {vid}') for vid, entry in database.items()}
  names = _label_list([s[2] for _, _, segs in raw.values() for s in segs], labels)
  table = {n: i for i, n in enumerate(names)}
  videos = {}
  for vid, (duration, subset, segs) in raw.items():
    where = f'{path}: video {vid}'
    out = []
    for start, end, label in segs:
      _check_segment(start, end, duration, where, tolerance)
      out.append((start, end, _index(label, table, where)))
    videos[vid] = VideoAnnotation(duration, subset, tuple(sorted(out)))
  return Annotations(videos, names)


def activitynet_json(ann: Annotations) -> dict:
  """Annotations -> the ActivityNet-style document (`database`; labels by name)."""
  database = {}
  for vid, v in ann.videos.items():
    database[vid] = {'subset': v.subset, 'duration': v.duration,
                     'annotations': [{'segment': [float(s), float(e)], 'label': ann.labels[k]}
                                     for s, e, k in v.segments]}
  return {'version': 'vvt', 'database': database}


def write_activitynet(path: str, ann: Annotations) -> None:
  """Annotations -> an ActivityNet-style JSON file at `path` (what `read_activitynet` reads back)."""
  from vvt import fileio
  fileio.atomic_write_text(path, json.dumps(activitynet_json(ann), indent=1) + '\n')


# ----------------------------------------------------------------------------------- THUMOS14


def _thumos_lines(path: str) -> list:
  """[(video_id, start, end)] of one THUMOS14 class file; AnnotationError naming the file and line."""
  out = []
  with open(path, encoding='utf-8') as f:
    for n, line in enumerate(f, start=1):
      if not line.strip():
        continue
      m = THUMOS_LINE.match(line.strip())
      if not m:
        raise AnnotationError(f'{path}: line {n}: expected "video_id start end", got {line.strip()!r}')
      where = f'{path}: line {n}: video {m.group(1)}'
      out.append((m.group(1), _number(m.group(2), where, 'start'), _number(m.group(3), where, 'end')))
  return out


def _thumos_files(folder: str, subset: str) -> dict:
  """{class name: path} of `folder`'s `{Class}_{subset}.txt` files (Ambiguous included)."""
  suffix = f'_{subset}.txt'
  files = {name[:-len(suffix)]: os.path.join(folder, name) for name in sorted(os.listdir(folder))
           if name.endswith(suffix) and len(name) > len(suffix)}
  if not [c for c in files if c != AMBIGUOUS]:
    raise AnnotationError(f'{folder}: no THUMOS14 class files *{suffix} (per class `{{Class}}{suffix}` of lines '
                          '"video_id start end")')
  return files


def read_thumos14(folder: str, subset: str = 'val', labels: Optional[Sequence[str]] = None,
                  durations: Optional[Mapping[str, float]] = None, tolerance: float = TOLERANCE) -> Annotations:
  """THUMOS14's per-class files of `subset` ('val' or 'test', as its file names say) in `folder` -> Annotations
  (subset as given; duration from `durations` where given, else None); AnnotationError naming file, line, video."""
  files = _thumos_files(folder, subset)
  classes = [c for c in files if c != AMBIGUOUS]
  names = _label_list(classes, labels)
  table = {n: i for i, n in enumerate(names)}
  segments, ambiguous = {}, {}
  for name, path in files.items():
    for vid, start, end in _thumos_lines(path):
      duration = None if durations is None else durations.get(vid)
      _check_segment(start, end, duration, f'{path}: video {vid}', tolerance)
      if name == AMBIGUOUS:
        ambiguous.setdefault(vid, []).append((start, end))
      else:
        segments.setdefault(vid, []).append((start, end, _index(name, table, f'{path}: video {vid}')))
  videos = {vid: VideoAnnotation(None if durations is None else durations.get(vid), subset,
                                 tuple(sorted(segments.get(vid, []))), tuple(sorted(ambiguous.get(vid, []))))
            for vid in sorted(set(segments) | set(ambiguous))}
  return Annotations(videos, names)


def read_annotations(path: str, subset: Optional[str] = None, labels=None, tolerance: float = TOLERANCE,
                     durations: Optional[Mapping[str, float]] = None) -> Annotations:
  """A .json file (ActivityNet style; `subset` keeps one subset) or a folder of THUMOS14 files (`subset`, default
  'val'; `durations` {video_id: seconds}, e.g. of a sequences.json, since THUMOS14 states none); `labels`: the label
  list, or the path of a class list file (one name a line, as classes.txt); AnnotationError when `path` is
  neither. The result's `labels` are `labels` in the order given (label index i names labels[i]; a label outside
  them is refused), else every label the file or folder has (all subsets of a JSON file), sorted."""
  if isinstance(labels, str):
    from vvt.data.reading import video_lists
    try:
      labels = video_lists.read_class_list(labels)
    except (OSError, ValueError) as e:
      raise AnnotationError(f'label list: {e}') from None
  if os.path.isdir(path):
    return read_thumos14(path, subset or 'val', labels, durations, tolerance)
  if not os.path.isfile(path):
    raise AnnotationError(f'{path}: no such annotation file or folder')
  ann = read_activitynet(path, labels, tolerance)
  return ann.select(subset) if subset else ann
