"""The frame rate a config's stride assumes (`dataset.fps`) against the rate its videos are stored at.

`dataset.stride` counts frames at `dataset.fps`, the rate the recipe assumes (ViViT's Kinetics: 25 fps;
TimeSformer and X-ViT: 30 fps). `vvt data convert` records each video's stored rate in its manifest
(`<prefix>.manifest.json`, field `fps` of each video: the `--fps` it was resampled to, else the container's own
rate). When a config states `dataset.fps`, training and evaluation read the manifests beside their TFRecord
shards; for the videos stored at another rate (more than 1% away: 29.97 is 30) the sampler maps each clip onto
the stored frames nearest to its frames' times at `dataset.fps` (`ratio_fn`, `vvt.data.transforms.sampling`),
so one conversion serves configs of every rate. A video list read as it is (`video_folder`) maps its videos the
same way, each by the rate its container gives (the source's `stored_rates`). One line says so, once, on the
console (`note_once`). Data without a manifest (other converters, TFDS) is read as stored.
"""
import collections
import json
import os
import re
import sys

TOLERANCE = 0.01  # relative: rates closer than this are the same rate
_SHARD = re.compile(r'\.tfrecord-\d+-of-\d+$')
_NOTED = set()


def manifest_paths(files) -> list:
  """The manifests (`<prefix>.manifest.json`) of `vvt data convert` shards among `files` that exist."""
  out = []
  for f in files:
    m = _SHARD.search(str(f))
    path = f'{str(f)[:m.start()]}.manifest.json' if m else None
    if path and path not in out and os.path.exists(path):
      out.append(path)
  return out


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


def rates_by_id(paths) -> dict:
  """{video id: stored rate} of the videos in shards of the manifests `paths` whose rate is known."""
  out = {}
  for path in paths:
    manifest = _read(path) or {}
    resampled = float((manifest.get('options') or {}).get('fps') or 0)
    for v in manifest.get('videos', []):
      rate = v.get('fps') or resampled
      if v.get('status') == 'ok' and rate and v.get('id') is not None:
        out[str(v['id'])] = float(rate)
  return out


def source_rates(source) -> tuple:
  """({video id: stored rate}, what they were read from) of a source: the rates its own videos give
  (`stored_rates()`, the video folder's containers), else those of the manifests beside its files."""
  own = getattr(source, 'stored_rates', None)
  if own is not None:
    return own(), ', '.join(source.files)
  paths = manifest_paths(source.files)
  return rates_by_id(paths), ', '.join(paths)


def ratios(fps: float, paths):
  """None when no video of the manifests `paths` is stored at a rate other than `fps`; else the ratio (stored
  rate / fps) every video shares (a float), or {video id: ratio} (1 for the videos at `fps`)."""
  return ratios_of(fps, rates_by_id(paths))


def ratios_of(fps: float, rates: dict):
  """`ratios` of {video id: stored rate}."""
  if not differing(fps, rates.values()):
    return None
  by_id = {k: (1.0 if abs(r - fps) <= TOLERANCE * fps else r / fps) for k, r in rates.items()}
  distinct = set(by_id.values())
  return distinct.pop() if len(distinct) == 1 else by_id


def ratio_fn(spec, source):
  """None (the videos are read as stored: no `dataset.fps`, no manifest, or every video at that rate), or
  fn(parsed record) -> float64 scalar: its stored rate over `dataset.fps`, by its `video_id` (1 for an id the
  manifests do not list)."""
  fps = spec.fps
  check(fps)
  rates = source_rates(source)[0] if fps is not None else {}
  found = ratios_of(float(fps), rates) if rates else None
  if found is None:
    return None
  import tensorflow as tf
  if isinstance(found, float):
    return lambda parsed: tf.constant(found, tf.float64)
  table = tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(tf.constant(list(found)), tf.constant(list(found.values()), tf.float64)),
      default_value=tf.constant(1.0, tf.float64))
  return lambda parsed: table.lookup(parsed['video_id'])


def mismatch_message(fps: float, rates: dict, where: str) -> str | None:
  """One line naming the videos of {video id: stored rate} `rates` (read from `where`) stored at a rate other
  than `fps` and what the sampler does with them, or None."""
  other = differing(fps, rates.values())
  if not other:
    return None
  count = sum(other.values())
  listing = ', '.join(f'{n} at {r:g} fps' for r, n in sorted(other.items()))
  return (f'note: dataset.fps={fps:g}: {count} of {len(rates)} videos in {where} are stored at another '
          f'rate ({listing}); their clips take the stored frames nearest to the times of dataset.stride at '
          f'{fps:g} fps')


def check(fps) -> None:
  """ValueError naming dataset.fps unless it is None or a positive number."""
  if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or fps <= 0):
    raise ValueError(f'dataset.fps must be a positive number of frames per second, or None, got {fps!r}')


def note_once(spec, source, process_index: int = 0, stream=None) -> str | None:
  """Prints `mismatch_message` (what the sampler does with videos at another rate) for the data of `source` once
  per process (first host only); returns it."""
  fps = spec.fps
  check(fps)
  if fps is None or process_index != 0:
    return None
  rates, where = source_rates(source)
  key = (where, float(fps))
  if not rates or key in _NOTED:
    return None
  _NOTED.add(key)
  message = mismatch_message(float(fps), rates, where)
  if message:
    print(message, file=stream or sys.stderr, flush=True)
  return message
