"""Temporal sampling: which frame indices of a video make a clip.

Two schemes (`dataset.sampling`):
* 'stride' (rate sampling, ViViT / TimeSformer on Kinetics): `num_frames`
  frames `stride` apart. Training takes a random start; evaluation takes
  `num_clips` starts spread uniformly over the video (one clip: the centre).
* 'segment' (TSN-style, TimeSformer / X-ViT on SSv2): the video is cut into
  `num_frames` equal segments and one frame is taken from each, at a random
  position for training and at position (c + 1/2) / num_clips of each segment
  for evaluation clip c.

Whole-video evaluation (`dataset.num_test_clips='all'`, 'stride' only) tiles the
video with non-overlapping clips of span `num_frames * stride` frames, starting
at frames 0, span, 2 * span, ...: ceil(n / span) clips (`num_tiles`,
`tile_indices`), the last one completed by `policy`.

Videos shorter than a 'stride' clip follow `policy`: 'loop' wraps the indices
around (frame n follows frame n-1 ... 0), 'pad' repeats the last frame.

Frame rates: `stride` counts frames at the rate the config assumes
(`dataset.fps`). `ratio` = stored rate / that rate (None: the same) maps a
'stride' clip onto the stored frames: the video is `rate_count(n, ratio)` frames
long at the config's rate, the clip is sampled there, and each of its frames
becomes the stored frame nearest to it in time (`to_stored`). 'segment'
sampling cuts the video into fractions of its length and needs no mapping.
All functions are TF ops on a scalar int frame count `n` (> 0) and return
int32 indices of stored frames; only these frames are decoded later.
"""
import tensorflow as tf

from vvt.data import choices

# Philox named explicitly: the random streams do not depend on TF's default
# ('auto_select') generator.
_ALG = 'philox'


def _apply_policy(idx, n, policy):
  if policy == 'loop':
    return tf.math.floormod(idx, n)
  if policy == 'pad':
    return tf.minimum(idx, n - 1)
  raise ValueError(f'dataset.short_video_policy must be one of {choices.SHORT_VIDEO_POLICIES}, '
                   f'got {policy!r}')


def _check(num_frames, stride, scheme):
  if num_frames < 1 or stride < 1:
    raise ValueError(f'num_frames ({num_frames}) and stride ({stride}) must be >= 1')
  if scheme not in choices.SAMPLING_SCHEMES:
    raise ValueError(f'dataset.sampling must be one of {choices.SAMPLING_SCHEMES}, got {scheme!r}')


def _round(x):
  """Nearest integer, halves up (tf.round rounds halves to even)."""
  return tf.cast(tf.floor(x + 0.5), tf.int32)


def rate_count(n, ratio=None):
  """int32: the frames of a video of `n` stored frames at the config's rate (`ratio` = stored rate / config
  rate; None: n), at least 1."""
  n = tf.cast(n, tf.int32)
  if ratio is None:
    return n
  return tf.maximum(_round(tf.cast(n, tf.float64) / tf.cast(ratio, tf.float64)), 1)


def to_stored(idx, n, ratio=None):
  """int32 indices of frames at the config's rate -> the stored frames nearest in time, in [0, n)."""
  if ratio is None:
    return idx
  stored = _round(tf.cast(idx, tf.float64) * tf.cast(ratio, tf.float64))
  return tf.minimum(stored, tf.cast(n, tf.int32) - 1)


def _segment_frames(pos, n, num_frames):
  """int32 frames at positions `pos` (float32, counted in segments: segment i covers [i, i + 1)) of a video of
  `n` frames cut into `num_frames` equal segments."""
  return tf.minimum(tf.cast(tf.floor(pos * tf.cast(n, tf.float32) / num_frames), tf.int32), n - 1)


def _latest_start(n, num_frames, stride):
  """int32: the last start at which a clip of `num_frames` frames `stride` apart fits in `n` frames (0 when
  none fits)."""
  return tf.maximum(n - ((num_frames - 1) * stride + 1), 0)


def train_indices(n, num_frames, stride, seed, policy='loop', scheme='stride', ratio=None):
  """Indices (num_frames,) of one random training clip; `seed` is a [2] tensor."""
  _check(num_frames, stride, scheme)
  n = tf.cast(n, tf.int32)
  t = tf.range(num_frames, dtype=tf.int32)
  if scheme == 'segment':
    u = tf.random.stateless_uniform([num_frames], seed, alg=_ALG)
    return _segment_frames(tf.cast(t, tf.float32) + u, n, num_frames)
  m = rate_count(n, ratio)
  start = tf.random.stateless_uniform([], seed, 0, _latest_start(m, num_frames, stride) + 1,
                                    dtype=tf.int32, alg=_ALG)
  return to_stored(_apply_policy(start + t * stride, m, policy), n, ratio)


def eval_indices(n, num_frames, stride, num_clips, policy='loop',
                 scheme='stride', ratio=None):
  """Indices (num_clips, num_frames) of the evaluation clips of a video."""
  _check(num_frames, stride, scheme)
  if num_clips < 1:
    raise ValueError(f'dataset.num_test_clips must be >= 1, got {num_clips}')
  n = tf.cast(n, tf.int32)
  t = tf.range(num_frames, dtype=tf.int32)
  if scheme == 'segment':
    c = (tf.range(num_clips, dtype=tf.float32) + 0.5) / num_clips
    return _segment_frames(tf.cast(t, tf.float32)[None, :] + c[:, None], n, num_frames)
  m = rate_count(n, ratio)
  max_start = _latest_start(m, num_frames, stride)
  if num_clips == 1:
    starts = tf.reshape(max_start // 2, [1])
  else:
    frac = tf.range(num_clips, dtype=tf.float32) / (num_clips - 1)
    starts = tf.cast(tf.round(frac * tf.cast(max_start, tf.float32)), tf.int32)
  return to_stored(_apply_policy(starts[:, None] + t[None, :] * stride, m, policy), n, ratio)


def num_tiles(n, num_frames, stride, ratio=None):
  """int32: the non-overlapping clips of span num_frames * stride that cover a video of `n` stored frames,
  ceil(length / span) with the length at the config's rate."""
  span = int(num_frames) * int(stride)
  return (rate_count(n, ratio) + span - 1) // span


def tile_indices(n, num_frames, stride, policy='loop', ratio=None):
  """Indices (num_tiles, num_frames) of the clips that tile the whole video: clip k starts at frame k * span
  (span = num_frames * stride frames at the config's rate); the last one past the video's end follows
  `policy`."""
  _check(num_frames, stride, 'stride')
  m = rate_count(n, ratio)
  span = int(num_frames) * int(stride)
  starts = tf.range(num_tiles(n, num_frames, stride, ratio), dtype=tf.int32) * span
  idx = _apply_policy(starts[:, None] + tf.range(num_frames, dtype=tf.int32)[None, :] * stride, m, policy)
  return to_stored(idx, n, ratio)
