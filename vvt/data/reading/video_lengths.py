"""How long a split's videos are, known without decoding them, against the span of a clip (no TensorFlow).

    lengths(spec, field)           -> `Lengths` of the videos of dataset field `field`, or None (not known)
    short_line(spec, field)        -> the start-up line on the videos shorter than a clip, or None
    every_video_short(spec, field) -> the refusal when every video is shorter than a clip, or None

A 'stride' clip spans (num_frames - 1) x stride + 1 frames at `dataset.fps` (the stored rate when unset); a video
shorter than that is filled by `dataset.short_video_policy` ('pad' repeats its last frame, 'loop' wraps around),
so its clips hold fewer distinct frames than `num_frames`. Lengths come from what costs no decoding: the
manifest `vvt data convert` writes beside its shards (frames and stored rate of each video), the synthetic set's
`manifest.json` (every clip `num_frames` long), or the header of each listed video file of a `video_folder`
list (`video_files.header`: the frames and rate its container declares; cached per file). Other data (TFDS,
records of other converters, containers that declare no length) are not decoded to count: the line says so.
"""
import dataclasses
import functools
import json
import os
from typing import Optional

from vvt.data.reading import frame_rate
from vvt.data.reading import patterns
from vvt.data.reading import video_files
from vvt.data.reading import video_lists

LIST_EXTENSIONS = ('.csv', '.tsv')


@dataclasses.dataclass(frozen=True)
class Lengths:
  """The videos of one split: (stored frames, stored rate or None) of each whose length is known, how many are
  not known, and what was read (for messages)."""
  known: tuple
  unknown: int
  where: str


@functools.lru_cache(maxsize=None)
def _header(path: str, size: int, mtime: int) -> tuple:
  del size, mtime  # the cache key: a file rewritten is read again
  try:
    return video_files.header(path)
  except video_files.UnreadableVideo:
    return 0, None


def header(path: str) -> tuple:
  """(frames its container declares or 0, rate or None) of a video file (0, None when it cannot be opened)."""
  try:
    st = os.stat(path)
  except OSError:
    return 0, None
  return _header(path, st.st_size, st.st_mtime_ns)


def _files(spec, field) -> list:
  return [f for p in patterns.split_patterns(getattr(spec, field))
          for f in patterns.local_matches(patterns.resolve(p, spec.data_dir or ''))]


def video_lists_of(spec, field) -> list:
  """The local video lists (CSV / TSV) and folders of videos that dataset field `field` names, in order."""
  return [f for f in _files(spec, field) if f.lower().endswith(LIST_EXTENSIONS) or os.path.isdir(f)]


def _folder_lengths(lists) -> Lengths:
  heads = [header(video_lists.video_path(path, video_lists.list_root(where)))
           for where in lists for _, path, _, _ in video_lists.read_video_rows(where)]
  known = tuple(h for h in heads if h[0] > 0)
  return Lengths(known, len(heads) - len(known), f'the headers of the videos of {", ".join(lists)}')


def _manifest_lengths(paths) -> Lengths:
  known = []
  for path in paths:
    with open(path, encoding='utf-8') as f:
      manifest = json.load(f)
    resampled = float((manifest.get('options') or {}).get('fps') or 0) or None
    known += [(int(v['frames']), float(v.get('fps') or resampled or 0) or None)
              for v in manifest.get('videos', []) if v.get('status') == 'ok' and v.get('frames')]
  return Lengths(tuple(known), 0, ', '.join(paths))


def _synthetic_lengths(spec, field) -> Optional[Lengths]:
  """The synthetic set's videos (its manifest.json names the pattern of each split and their one length)."""
  pats = patterns.split_patterns(getattr(spec, field))
  if len(pats) != 1:
    return None
  pattern = patterns.resolve(pats[0], spec.data_dir or '')
  path = os.path.join(os.path.dirname(pattern), 'manifest.json')
  try:
    with open(path, encoding='utf-8') as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  key = {'train_files': 'train_clips', 'eval_files': 'test_clips'}[field]
  named = manifest.get(field) if isinstance(manifest, dict) else None
  if not isinstance(named, str) or os.path.basename(named) != os.path.basename(pattern) or not manifest.get(
      'num_frames'):
    return None
  return Lengths(((int(manifest['num_frames']), None),) * int(manifest.get(key) or 0), 0, path)


def lengths(spec, field) -> Optional[Lengths]:
  """The `Lengths` of the videos of dataset field `field` ('train_files' / 'eval_files'), or None when they are
  not known without decoding."""
  if spec.name == 'video_folder':
    lists = video_lists_of(spec, field)
    return _folder_lengths(lists) if lists else None
  if spec.name != 'dmvr':
    return None
  manifests = frame_rate.manifest_paths(_files(spec, field))
  return _manifest_lengths(manifests) if manifests else _synthetic_lengths(spec, field)


def span(spec) -> Optional[int]:
  """The frames a 'stride' clip spans at the config's rate, (num_frames - 1) x stride + 1; None for 'segment'
  sampling (it cuts each video into num_frames parts, whatever its length)."""
  if spec.sampling != 'stride':
    return None
  return (int(spec.num_frames) - 1) * int(spec.stride) + 1


def at_config_rate(frames: int, rate, fps) -> int:
  """A video's length in frames at `fps` (`dataset.fps`; None: as stored), as the sampler counts it."""
  if not fps or not rate or abs(rate - fps) <= frame_rate.TOLERANCE * fps:
    return frames
  return max(int(frames * float(fps) / rate + 0.5), 1)


def distinct_frames(frames: int, spec) -> int:
  """The distinct frames of a clip starting at frame 0 of a video of `frames` frames (at the config's rate)."""
  idx = [t * int(spec.stride) for t in range(int(spec.num_frames))]
  if spec.short_video_policy == 'loop':
    return len({i % frames for i in idx})
  return len({min(i, frames - 1) for i in idx})


def _clip_text(spec) -> str:
  rate = f' at dataset.fps={spec.fps:g}' if spec.fps else ''
  return (f'a clip of dataset.num_frames={spec.num_frames} frames dataset.stride={spec.stride} apart spans '
          f'{span(spec)} frames{rate}')


_POLICY = {'pad': 'repeats its last frame', 'loop': 'wraps around to its first frame'}


def _short(spec, found: Lengths) -> list:
  """The lengths (at the config's rate) of the known videos shorter than a clip's span."""
  return sorted(m for m in (at_config_rate(n, r, spec.fps) for n, r in found.known) if m < span(spec))


def short_line(spec, field) -> Optional[str]:
  """One line: how many videos of `field` are shorter than a clip and what `short_video_policy` does with them
  (or that their lengths are not known without decoding); None when none is, or for 'segment' sampling."""
  if span(spec) is None or span(spec) == 1:
    return None
  found = lengths(spec, field)
  if found is None or not found.known:
    return (f'[data] dataset.{field}: the videos\' lengths are not known without decoding them (no manifest of '
            f'`vvt data convert` or readable container headers); {_clip_text(spec)}, and shorter videos follow '
            f'dataset.short_video_policy={spec.short_video_policy!r}')
  short = _short(spec, found)
  unknown = f' ({found.unknown} more not counted: their length is not known without decoding)' if found.unknown else ''
  if not short:
    return None
  return (f'[data] dataset.{field}: {len(short)} of {len(found.known)} videos are shorter than a clip{unknown}: '
          f'{_clip_text(spec)}; dataset.short_video_policy={spec.short_video_policy!r} '
          f'{_POLICY.get(spec.short_video_policy, "fills it")} past a video\'s end, so a clip of the shortest '
          f'({short[0]} frames) holds {distinct_frames(short[0], spec)} distinct frames (lengths from {found.where})')


def every_video_short(spec, field) -> Optional[str]:
  """The refusal (naming dataset.stride and dataset.num_frames) when every video of `field` whose length is
  known, and at least one, is shorter than a clip; else None."""
  if span(spec) is None or span(spec) == 1:
    return None
  found = lengths(spec, field)
  if found is None or not found.known or found.unknown:
    return None
  short = _short(spec, found)
  if len(short) < len(found.known):
    return None
  longest, frames, stride = short[-1], int(spec.num_frames), int(spec.stride)
  fits = (f'dataset.stride={(longest - 1) // (frames - 1)} at most' if 1 < frames <= longest
          else f'dataset.num_frames={(longest - 1) // stride + 1} at most at this stride')
  return (f'dataset.stride: every one of the {len(short)} videos of dataset.{field} is shorter than a clip: '
          f'{_clip_text(spec)}, and the longest video has {longest} frames (its clips would hold '
          f'{distinct_frames(longest, spec)} distinct frames); lower dataset.stride or dataset.num_frames '
          f'({fits} here)')
