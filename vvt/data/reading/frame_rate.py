"""The frame rate a config's stride assumes (`dataset.fps`) against the rate its videos are stored at.

`dataset.stride` counts stored frames, so a stride means the same time span only at the rate the recipe
assumes (ViViT's Kinetics: 25 fps; TimeSformer and X-ViT: videos resampled to 30 fps). `vvt data convert`
records each video's stored rate in its manifest (`<prefix>.manifest.json`, field `fps` of each video: the
`--fps` it was resampled to, else the container's own rate). When a config states `dataset.fps`, training and
evaluation read the manifests beside their TFRecord shards and warn once, on the console, with the number of
videos stored at another rate (more than 1% away: 29.97 is 30). Data without a manifest (other converters,
TFDS, a video list read as it is) is not checked.
"""
import collections
import json
import os
import re
import sys

TOLERANCE = 0.01  # relative: rates closer than this are the same rate
_SHARD = re.compile(r'\.tfrecord-\d+-of-\d+$')
_WARNED = set()


def manifest_paths(files) -> list:
  """The manifests (`<prefix>.manifest.json`) of `vvt data convert` shards among `files` that exist."""
  out = []
  for f in files:
    m = _SHARD.search(str(f))
    path = f'{str(f)[:m.start()]}.manifest.json' if m else None
    if path and path not in out and os.path.exists(path):
      out.append(path)
  return out


def stored_rates(manifest: dict) -> list:
  """The stored rate of each video of a manifest that is in a shard (None where the manifest does not say)."""
  resampled = float((manifest.get('options') or {}).get('fps') or 0)
  rates = []
  for v in manifest.get('videos', []):
    if v.get('status') == 'ok':
      rate = v.get('fps') or resampled or None
      rates.append(float(rate) if rate else None)
  return rates


def differing(fps: float, rates) -> collections.Counter:
  """{rate: videos} of the known rates more than TOLERANCE away from `fps`."""
  return collections.Counter(round(r, 3) for r in rates if r is not None and abs(r - fps) > TOLERANCE * fps)


def _read(path):
  try:
    with open(path, encoding='utf-8') as f:
      data = json.load(f)
  except (OSError, ValueError):
    return None
  return data if isinstance(data, dict) else None


def mismatch_message(fps: float, paths) -> str | None:
  """One line naming the videos of the manifests `paths` stored at a rate other than `fps`, or None."""
  rates = [r for p in paths for r in stored_rates(_read(p) or {})]
  other = differing(fps, rates)
  if not other:
    return None
  count = sum(other.values())
  listing = ', '.join(f'{n} at {r:g} fps' for r, n in sorted(other.items()))
  return (f'warning: dataset.fps={fps:g} (the rate dataset.stride assumes) but {count} of {len(rates)} videos '
          f'in {", ".join(paths)} are stored at another rate ({listing}): their clips span other times; '
          f'convert them with `vvt data convert --fps {fps:g}`')


def check(fps) -> None:
  """ValueError naming dataset.fps unless it is None or a positive number."""
  if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0):
    raise ValueError(f'dataset.fps must be a positive number of frames per second, or None, got {fps!r}')


def warn_once(cfg, source, process_index: int = 0, stream=None) -> str | None:
  """Prints `mismatch_message` for the data of `source` once per process (first host only); returns it."""
  fps = cfg.get('fps')
  check(fps)
  if fps is None or process_index != 0:
    return None
  paths = manifest_paths(source.files)
  key = (tuple(paths), float(fps))
  if not paths or key in _WARNED:
    return None
  _WARNED.add(key)
  message = mismatch_message(float(fps), paths)
  if message:
    print(message, file=stream or sys.stderr, flush=True)
  return message
