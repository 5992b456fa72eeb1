"""A video's frames -> the uint8 pixels the model sees.

    train_clip(spec, reader)(frames, seed, ratio) -> (T, H, W, 3)     one random clip, augmented
    eval_views(spec, reader)(frames, seed, ratio) -> (V, T, H, W, 3)  every evaluation view
    num_views(spec, reader)(frames, ratio) -> V                       without decoding

`frames` is a record's frames as its source's `FrameReader` takes them (`vvt.data.reading.source`: encoded
images, or a video file), `seed` a [2] int64 stateless seed, `ratio` the video's stored frame rate over
`spec.fps` (None: no mapping; `sampling`); T = spec.num_frames, (H, W) = spec.image_size, V = spec.num_test_clips *
spec.num_spatial_crops, or with num_test_clips='all' the clips that tile the video (`sampling.tile_indices`,
different per video) times num_spatial_crops. Each samples frame indices (`sampling`), has the reader decode
only those frames (of a JPEG only the crop window), then crops and resizes them (and, in training, augments
them, `augment`).
"""
import tensorflow as tf

from vvt.data import choices
from vvt.data.transforms import augment
from vvt.data.transforms import crops
from vvt.data.transforms import random_draws
from vvt.data.transforms import sampling
from vvt.models import frame_size


def flip_flag(spec, seed):
  """Whether the training clip of `seed` is flipped left-right (drawn from
  fold_in(seed, 4); never without spec.horizontal_flip)."""
  if not spec.horizontal_flip:
    return tf.constant(False)
  return crops.random_flip_flag(random_draws.fold_in(seed, 4))


def train_clip(spec, reader):
  """fn(frames, seed) -> uint8 (T, H, W, 3): one random clip of the video.

  Seeds: fold_in(seed, 1) the temporal sampling, 2 the crop window (scale
  jitter and position, from the first sampled frame's size), 4 the flip, 3 the
  augmentation of `augment.train_clip_fn`.
  """
  num_frames, size = int(spec.num_frames), frame_size.parse(spec.image_size)
  make_clip = augment.train_clip_fn(spec)

  def clip(frames, seed, ratio=None):
    idx = sampling.train_indices(
        reader.count(frames), num_frames, int(spec.stride),
        random_draws.fold_in(seed, 1), spec.short_video_policy, spec.sampling, ratio)
    window_of = lambda h, w: crops.train_crop_window(
        h, w, size, spec.train_min_resize, spec.train_max_resize, random_draws.fold_in(seed, 2))
    flip = flip_flag(spec, seed)
    return make_clip(reader.decode(frames, idx, window_of), flip, random_draws.fold_in(seed, 3))
  return clip


def _crops(video, windows, num_crops, size):
  """uint8 (F, h, w, 3) and (C, 4) windows [y, x, height, width] -> uint8
  (C, F, H, W, 3), size = (H, W): each window of every frame, resized."""
  per_crop = []
  for k in range(num_crops):
    y, x, ch, cw = tf.unstack(windows[k])
    per_crop.append(augment.resize_tf(video[:, y:y + ch, x:x + cw], size))
  return tf.stack(per_crop)


def _as_views(per_crop, num_crops, num_clips, num_frames, size):
  """(C, clips*T, H, W, 3) -> (clips*C, T, H, W, 3), size = (H, W): view = clip * C + crop."""
  v = tf.reshape(per_crop, [num_crops, num_clips, num_frames, *size, 3])
  return tf.reshape(tf.transpose(v, [1, 0, 2, 3, 4, 5]),
                    [num_clips * num_crops, num_frames, *size, 3])


def tiles_video(spec) -> bool:
  """Whether evaluation tiles each whole video (`num_test_clips='all'`) rather than taking a fixed number of
  clips."""
  return spec.num_test_clips == choices.WHOLE_VIDEO


def num_views(spec, reader):
  """fn(frames, ratio) -> int32 V: the number of views `eval_views` gives the video, without decoding it."""
  crops_per_clip = int(spec.num_spatial_crops)

  def count(frames, ratio=None):
    if not tiles_video(spec):
      return tf.constant(int(spec.num_test_clips) * crops_per_clip, tf.int32)
    return sampling.num_tiles(reader.count(frames), int(spec.num_frames), int(spec.stride), ratio) * crops_per_clip
  return count


def eval_views(spec, reader):
  """fn(frames, seed, ratio=None) -> uint8 (V, T, H, W, 3): every view of the video.

  num_test_clips clips (`sampling.eval_indices`), or with num_test_clips='all' the clips that tile the video
  (`sampling.tile_indices`, decoded clip by clip), x num_spatial_crops crops (`crops.eval_crop_windows`),
  view = clip * num_spatial_crops + crop. Deterministic: `seed` is not used.
  """
  num_frames, size = int(spec.num_frames), frame_size.parse(spec.image_size)
  num_crops = int(spec.num_spatial_crops)

  def crop_all(video, num_clips):
    h, w = tf.shape(video)[1], tf.shape(video)[2]
    windows = crops.eval_crop_windows(h, w, size, spec.eval_resize, num_crops)
    return _as_views(_crops(video, windows, num_crops, size), num_crops, num_clips, num_frames, size)

  def tiled(frames, ratio):
    idx = sampling.tile_indices(reader.count(frames), num_frames, int(spec.stride), spec.short_video_policy, ratio)
    per_clip = tf.map_fn(lambda clip: crop_all(reader.decode(frames, clip), 1), idx,
                         fn_output_signature=tf.TensorSpec([num_crops, num_frames, *size, 3], tf.uint8))
    return tf.reshape(per_clip, [-1, num_frames, *size, 3])

  def views(frames, seed, ratio=None):
    del seed
    if tiles_video(spec):
      return tiled(frames, ratio)
    clips = int(spec.num_test_clips)
    idx = sampling.eval_indices(reader.count(frames), num_frames, int(spec.stride),
                                clips, spec.short_video_policy, spec.sampling, ratio)
    return crop_all(reader.decode(frames, tf.reshape(idx, [-1])), clips)
  return views
