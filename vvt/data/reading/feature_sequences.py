"""Feature sequences of untrimmed videos with their annotated segments: the data of temporal action localisation.

A folder `DIR` of `vvt features --window`: `DIR/sequences.json` {"window_seconds", "stride_seconds",
"feature_dim", ..., "videos": {video_id: {"path", "duration", "fps", "centres": [...]}}} and per video
`DIR/sequences/{video_id}.npy` float32 (N_windows, D); the annotations give each video's segments in seconds and
their class indices.

    open_sequences(directory, truth) -> `SequenceSet`: the annotated videos that have a sequence, their segments in
        feature steps (step i = the window centred at centres[i]: t -> (t - centres[0]) / stride, the stride the
        spacing of the centres, as ActionFormer's `libs/datasets/thumos14.py` lines 157-166 puts seconds on its
        feature grid)
    truth_of(annotations) -> {video_id: (segments (K, 2) seconds, labels (K,))} of `vvt.data.read_annotations`
    crop(length, segments, labels, max_len, rng, ...) -> (start, end, segments, labels): ActionFormer's
        `truncate_feats` (`libs/datasets/data_utils.py` lines 24-112)
    train_batches(sequences, ...) -> an endless iterator of this process's training batches, resume-exact
    eval_batches(sequences, ...) -> every video once, whole, padded to one length

Refusals (`SequenceError`, one line naming the file or video): a missing or unreadable sequences.json, a sequence
file that is missing, unreadable, not 2-D, or whose width is not the index's `feature_dim`, a sequence whose
number of windows differs from its `centres`. A video of the annotations without a sequence is a counted skip
(`SequenceSet.skipped`, said in one line by `skipped_line`): feature extraction may have refused a damaged video,
and ActionFormer too trains on the videos it has features of.
"""
import dataclasses
import json
import os
from typing import Iterator, Mapping

import numpy as np

# the layout `vvt.data.feature_sequences` writes (read here without importing it: it loads the frame readers)
INDEX = 'sequences.json'
SEQUENCES = 'sequences'


class SequenceError(ValueError):
  """A bad feature-sequence folder or file: the message names it."""
  user_error = True  # the CLI prints the message alone, exit 2
  bad_input = True


@dataclasses.dataclass(frozen=True)
class SequenceSet:
  """The annotated videos of one split that have a sequence: `video_ids`, `paths` (their .npy), `lengths` (their
  number of windows), `segments` ((K, 2) float32 in feature steps each) and `labels` ((K,) int32 each);
  `feature_dim` D, `strides` and `first_centres` (seconds between steps and of step 0, each), `skipped`
  (annotated video ids without a sequence)."""
  video_ids: tuple
  paths: tuple
  lengths: tuple
  segments: tuple
  labels: tuple
  feature_dim: int
  strides: tuple
  first_centres: tuple
  skipped: tuple = ()

  def __len__(self) -> int:
    return len(self.video_ids)

  def seconds(self, i: int, steps: np.ndarray) -> np.ndarray:
    """Feature steps of video `i` -> seconds."""
    return self.first_centres[i] + np.asarray(steps, np.float64) * self.strides[i]


def read_index(directory: str) -> dict:
  """DIR/sequences.json, or a `SequenceError` naming it."""
  path = os.path.join(directory, INDEX)
  try:
    with open(path, encoding='utf-8') as f:
      index = json.load(f)
    return dict(index, videos=dict(index['videos']), feature_dim=int(index['feature_dim']))
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise SequenceError(f'{path}: not a feature-sequence index ({type(e).__name__}: {e})') from None


def truth_of(annotations) -> dict:
  """{video_id: (segments (K, 2) seconds, labels (K,))} of an `Annotations` (`vvt.data.read_annotations`)."""
  return {vid: ([s[:2] for s in v.segments], [s[2] for s in v.segments]) for vid, v in annotations.videos.items()}


def _stride(centres: list, index: dict) -> float:
  """Seconds between steps: the index's `stride_seconds`, else the spacing of the centres (1 for one window)."""
  if index.get('stride_seconds'):
    return float(index['stride_seconds'])
  return (centres[-1] - centres[0]) / (len(centres) - 1) if len(centres) > 1 else 1.0


def read_sequence(path: str, feature_dim: int, windows: int = -1) -> np.ndarray:
  """(T, D) float32 of `path`, or a `SequenceError` naming it (unreadable, not 2-D, D != `feature_dim`, T !=
  `windows` where given)."""
  try:
    x = np.load(path, allow_pickle=False)
  except (OSError, ValueError) as e:
    raise SequenceError(f'{path}: unreadable feature sequence ({e})') from None
  if x.ndim != 2 or x.shape[1] != feature_dim:
    raise SequenceError(f'{path}: a sequence of shape {x.shape}, the index says (windows, {feature_dim})')
  if windows >= 0 and x.shape[0] != windows:
    raise SequenceError(f'{path}: {x.shape[0]} windows, the index has {windows} centres')
  return x.astype(np.float32)


def _header(path: str, feature_dim: int) -> int:
  """The number of windows of the .npy `path` (its header only), checked as `read_sequence` checks."""
  try:
    x = np.load(path, mmap_mode='r', allow_pickle=False)
  except (OSError, ValueError) as e:
    raise SequenceError(f'{path}: unreadable feature sequence ({e})') from None
  if x.ndim != 2 or x.shape[1] != feature_dim:
    raise SequenceError(f'{path}: a sequence of shape {x.shape}, the index says (windows, {feature_dim})')
  return int(x.shape[0])


def open_sequences(directory: str, truth: Mapping) -> SequenceSet:
  """The `SequenceSet` of the videos of `truth` {video_id: (segments (K, 2) seconds, labels (K,))}, in sorted id
  order, checked file by file (headers only; see the module docstring for the refusals and the skip)."""
  index = read_index(directory)
  dim = index['feature_dim']
  rows, skipped = [], []
  for video_id in sorted(truth):
    entry = index['videos'].get(video_id)
    if entry is None:
      skipped.append(video_id)
      continue
    path = os.path.join(directory, SEQUENCES, f'{video_id}.npy')
    length, centres = _header(path, dim), list(entry.get('centres', []))
    if length != len(centres) or not length:
      raise SequenceError(f'{path}: {length} windows, the index has {len(centres)} centres for {video_id}')
    segments, labels = truth[video_id]
    stride = _stride(centres, index)
    steps = (np.asarray(segments, np.float64).reshape(-1, 2) - centres[0]) / stride
    rows.append((video_id, path, length, steps.astype(np.float32), np.asarray(labels, np.int32).reshape(-1),
                 stride, float(centres[0])))
  cols = list(zip(*rows, strict=True)) if rows else [()] * 7
  return SequenceSet(video_ids=tuple(cols[0]), paths=tuple(cols[1]), lengths=tuple(cols[2]),
                     segments=tuple(cols[3]), labels=tuple(cols[4]), feature_dim=dim, strides=tuple(cols[5]),
                     first_centres=tuple(cols[6]), skipped=tuple(skipped))


def skipped_line(sequences: SequenceSet, what: str = 'annotated videos') -> str:
  """One line counting and naming (the first five) videos left out for want of a sequence; '' when none."""
  if not sequences.skipped:
    return ''
  names = ', '.join(sequences.skipped[:5]) + (' ...' if len(sequences.skipped) > 5 else '')
  return f'[data] {len(sequences.skipped)} {what} without a feature sequence skipped: {names}'


def crop(length: int, segments: np.ndarray, labels: np.ndarray, max_len: int, rng: np.random.Generator, *,
         trunc_thresh: float = 0.5, crop_ratio: tuple = (0.9, 1.0), trials: int = 200) -> tuple:
  """(start, end, segments, labels) of a random window of a sequence of `length` steps (ActionFormer's
  `truncate_feats`): a sequence of at most `max_len` steps is cut to a random length in `crop_ratio` of it; a
  window is drawn until one keeps at least one segment with >= `trunc_thresh` of its length inside (at most
  `trials` draws); the kept segments are clipped to the window, in its steps."""
  if length <= max_len:
    if not crop_ratio:
      return 0, length, segments, labels
    max_len = int(rng.integers(max(round(crop_ratio[0] * length), 1), min(round(crop_ratio[1] * length), length) + 1))
    if max_len == length:
      return 0, length, segments, labels
  lengths = np.abs(segments[:, 1] - segments[:, 0])
  for _ in range(trials):
    start = int(rng.integers(0, length - max_len + 1))
    left = np.maximum(start, segments[:, 0])
    right = np.minimum(start + max_len, segments[:, 1])
    keep = np.clip(right - left, 0, None) / np.maximum(lengths, 1e-8) >= trunc_thresh
    if keep.any():
      break
  return start, start + max_len, np.stack([left[keep], right[keep]], 1) - start, labels[keep]


def epoch_order(num: int, seed: int, epoch: int) -> np.ndarray:
  """The order of `num` videos in `epoch`: a permutation drawn from (seed, epoch) alone."""
  return np.random.default_rng([int(seed), int(epoch)]).permutation(num)


def example(sequences: SequenceSet, i: int, length: int, max_segments: int, rng=None, **crop_options) -> dict:
  """Video `i` as one batch row: 'inputs' (length, D) float32 (zeros past the sequence), 'steps' (length,) bool
  (its valid steps), 'segments' (max_segments, 2) float32 in steps of the window, 'segment_labels'
  (max_segments,) int32 (-1 past its segments), 'offset' the window's first step; randomly cropped with `rng`
  (`crop`), else the whole sequence's first `length` steps."""
  segments, labels = sequences.segments[i], sequences.labels[i]
  total = sequences.lengths[i]
  if rng is not None:
    start, end, segments, labels = crop(total, segments, labels, length, rng, **crop_options)
  else:
    start, end = 0, min(total, length)
  x = read_sequence(sequences.paths[i], sequences.feature_dim, total)[start:end]
  out = {'inputs': np.zeros((length, sequences.feature_dim), np.float32), 'steps': np.arange(length) < end - start,
         'segments': np.zeros((max_segments, 2), np.float32), 'segment_labels': np.full(max_segments, -1, np.int32),
         'offset': np.int32(start)}
  out['inputs'][:end - start] = x
  k = min(len(labels), max_segments)
  out['segments'][:k], out['segment_labels'][:k] = segments[:k], labels[:k]
  return out


def _stack(rows: list) -> dict:
  return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def host_share(num: int, process_index: int, process_count: int) -> tuple[int, int]:
  """[lo, hi): the contiguous share of the videos of one process."""
  return num * process_index // process_count, num * (process_index + 1) // process_count


def train_batches(sequences: SequenceSet, local_batch: int, max_len: int, max_segments: int, *, seed: int = 0,
                  start_step: int = 0, process_index: int = 0, process_count: int = 1,
                  **crop_options) -> Iterator[dict]:
  """This process's training batches from step `start_step` on, endless: its share of the videos
  (`host_share`), each epoch in `epoch_order(share, seed, epoch)`, each video randomly cropped (`crop`) by a
  generator of (seed, epoch, video): batch s is the same whether the run started at 0 or resumed at s."""
  lo, hi = host_share(len(sequences), process_index, process_count)
  if lo == hi:
    raise SequenceError(f'process {process_index} of {process_count} has no training videos ({len(sequences)})')
  share, position = hi - lo, int(start_step) * local_batch
  while True:
    rows = []
    for p in range(position, position + local_batch):
      epoch = p // share
      i = lo + int(epoch_order(share, seed, epoch)[p % share])
      rng = np.random.default_rng([int(seed), epoch, i])
      rows.append(dict(example(sequences, i, max_len, max_segments, rng, **crop_options), mask=np.float32(1),
                       video_index=np.int32(i)))
    position += local_batch
    yield _stack(rows)


def eval_batches(sequences: SequenceSet, local_batch: int, length: int, max_segments: int, *,
                 process_index: int = 0, process_count: int = 1) -> Iterator[dict]:
  """Every video of this process's share once, whole (its first `length` steps), in batches padded at the end
  (mask 0, video_index -1)."""
  lo, hi = host_share(len(sequences), process_index, process_count)
  for first in range(lo, hi, local_batch):
    rows = [dict(example(sequences, i, length, max_segments), mask=np.float32(1), video_index=np.int32(i))
            for i in range(first, min(first + local_batch, hi))]
    while len(rows) < local_batch:
      rows.append(dict(rows[0], mask=np.float32(0), video_index=np.int32(-1)))
    yield _stack(rows)
