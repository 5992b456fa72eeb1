"""What a dataset section is checked for before any work, from its files' names, lists and headers (no
TensorFlow; the config loader adds these lines to a config's problems, so a command refuses them at once, exit 2).

    list_problems(spec, fields)              the video lists of a `video_folder` source: each readable (UTF-8,
                                             path,label rows) and, under on_error='raise', every listed file there
    unlabelled_problems(spec, fields, reason)
                                             unlabelled videos (a list of paths only, a folder, TFRecords
                                             converted without --classes) for a run that reads labels
    clip_problems(spec, fields)              a split every video of which is shorter than a clip
                                             (`video_lengths.every_video_short`)
    batch_memory_problem(spec, batch, what)  a batch of decoded clips larger than this host's memory

`spec` is a dataset section (a DataSpec, or a config's section before it is resolved); `fields` the dataset
files fields a command reads ('train_files', 'eval_files').
"""
import json
import os
from typing import Optional

from vvt.data.reading import patterns
from vvt.data.reading import video_lengths
from vvt.data.reading import video_lists


def list_problems(spec, fields) -> list:
  """One line per video list of a `video_folder` source that cannot be read (not UTF-8, a row without a label
  or with more columns than its header names), naming the list and its line; under on_error='raise' one line per
  list with listed files that do not exist (the first named, the rest counted)."""
  if spec.name != 'video_folder':
    return []
  out = []
  for field in fields:
    for where in video_lengths.video_lists_of(spec, field):
      try:
        missing = video_lists.missing_videos(where)
      except ValueError as e:
        out.append(f'dataset.{field}: {e}')
        continue
      if missing and spec.on_error != 'skip':
        more = f' (and {len(missing) - 1} more missing)' if len(missing) > 1 else ''
        out.append(f'dataset.{field}: {missing[0]}{more}')
  return out


def _unlabelled_manifest(pattern: str) -> Optional[str]:
  """The manifest `vvt data convert` wrote beside the TFRecords of `pattern` when it says they hold no labels
  (`labelled` false: converted without --classes), else None."""
  folder, name = os.path.split(patterns.SHARDED.sub(r'\g<base>', pattern))
  if '.tfrecord' not in name:
    return None
  path = os.path.join(folder, name[:name.index('.tfrecord')] + '.manifest.json')
  try:
    with open(path, encoding='utf-8') as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  return path if isinstance(manifest, dict) and manifest.get('labelled') is False else None


def unlabelled_problems(spec, fields, reason: str) -> list:
  """One line per unlabelled data file of `fields` (a `video_folder` list of paths only or folder; DMVR records
  whose manifest says they hold no labels), naming it, for a run that reads labels (`reason`: why; '' for a run
  that reads none, which is refused nothing)."""
  if not reason:
    return []
  out = []
  for field in fields:
    if spec.name == 'video_folder':
      for where in video_lengths.video_lists_of(spec, field):
        try:
          rows = video_lists.read_video_rows(where)
        except ValueError:
          continue  # list_problems says why
        if video_lists.unlabelled(rows):
          out.append(video_lists.needs_labels_line(field, where, reason))
    elif spec.name == 'dmvr':
      for pattern in patterns.resolved_patterns(spec, (field,)):
        manifest = _unlabelled_manifest(pattern)
        if manifest:
          out.append(f'dataset.{field}: {manifest}: the records hold no labels (`vvt data convert` without '
                     f'--classes), but {reason}: convert a list of path,label rows with --classes')
  return out


def clip_problems(spec, fields) -> list:
  """The refusal of each split whose every video is shorter than a clip (naming dataset.stride and
  dataset.num_frames)."""
  return [line for line in (video_lengths.every_video_short(spec, f) for f in fields) if line]


def host_memory() -> int:
  """Bytes of physical memory of this host (0 when unknown)."""
  try:
    return int(os.sysconf('SC_PAGE_SIZE')) * int(os.sysconf('SC_PHYS_PAGES'))
  except (ValueError, OSError, AttributeError):
    return 0


def _pixels(image_size) -> int:
  """Pixels of a frame of `image_size` (an int S: S x S, or (H, W))."""
  if isinstance(image_size, (tuple, list)):
    return int(image_size[0]) * int(image_size[1])
  return int(image_size) ** 2


def _gb(n: int) -> str:
  return f'{n / 1e9:.1f} GB'


def batch_memory_problem(spec, batch: int, what: str, memory: Optional[int] = None) -> Optional[str]:
  """The refusal (naming num_frames) of a batch of `batch` decoded clips, batch x num_frames x image_size^2 x 3
  bytes of uint8, that is larger than this host's memory (`memory` bytes, default `host_memory()`); else None.
  `what` names the batch in the line, e.g. 'a training batch (batch_size=8)'."""
  memory = host_memory() if memory is None else memory
  frames, pixels = int(spec.num_frames), _pixels(spec.image_size)
  size = int(batch) * frames * pixels * 3
  if not memory or size <= memory:
    return None
  return (f'num_frames={frames}: {what} of decoded clips is {batch} x {frames} frames x {pixels * 3} bytes = '
          f'{_gb(size)}, more than this host\'s memory ({_gb(memory)}); lower num_frames, image_size or the batch '
          'size')
