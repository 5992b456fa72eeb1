"""A video's frames -> the uint8 pixels the model sees.

    train_clip(cfg, reader)(frames, seed) -> (T, S, S, 3)     one random clip, augmented
    eval_views(cfg, reader)(frames, seed) -> (V, T, S, S, 3)  every evaluation view

`frames` is a record's frames as its source's `FrameReader` takes them (`vvt.data.reading.source`: encoded
images, or a video file), `seed` a [2] int64 stateless seed; T = cfg.num_frames, S = cfg.image_size, V =
cfg.num_test_clips * cfg.num_spatial_crops. Each samples frame indices (`sampling`), has the reader decode only
those frames (of a JPEG only the crop window), then crops and resizes them (and, in training, augments them,
`augment`).
"""
import tensorflow as tf

from vvt.data.transforms import augment
from vvt.data.transforms import crops
from vvt.data.transforms import random_draws
from vvt.data.transforms import sampling


def flip_flag(cfg, seed):
  """Whether the training clip of `seed` is flipped left-right (drawn from
  fold_in(seed, 4); never without cfg.horizontal_flip)."""
  if not cfg.horizontal_flip:
    return tf.constant(False)
  return crops.random_flip_flag(random_draws.fold_in(seed, 4))


def train_clip(cfg, reader):
  """fn(frames, seed) -> uint8 (T, S, S, 3): one random clip of the video.

  Seeds: fold_in(seed, 1) the temporal sampling, 2 the crop window (scale
  jitter and position, from the first sampled frame's size), 4 the flip, 3 the
  augmentation of `augment.train_clip_fn`.
  """
  num_frames, size = int(cfg.num_frames), int(cfg.image_size)
  make_clip = augment.train_clip_fn(cfg)

  def clip(frames, seed):
    idx = sampling.train_indices(
        reader.count(frames), num_frames, int(cfg.stride),
        random_draws.fold_in(seed, 1), cfg.short_video_policy, cfg.sampling)
    window_of = lambda h, w: crops.train_crop_window(
        h, w, size, cfg.train_min_resize, cfg.train_max_resize, random_draws.fold_in(seed, 2))
    flip = flip_flag(cfg, seed)
    return make_clip(reader.decode(frames, idx, window_of), flip, random_draws.fold_in(seed, 3))
  return clip


def _crops(video, windows, num_crops, size):
  """uint8 (F, h, w, 3) and (C, 4) windows [y, x, height, width] -> uint8
  (C, F, size, size, 3): each window of every frame, resized."""
  per_crop = []
  for k in range(num_crops):
    y, x, ch, cw = tf.unstack(windows[k])
    per_crop.append(augment.resize_tf(video[:, y:y + ch, x:x + cw], size))
  return tf.stack(per_crop)


def _as_views(per_crop, num_crops, num_clips, num_frames, size):
  """(C, clips*T, S, S, 3) -> (clips*C, T, S, S, 3): view = clip * C + crop."""
  v = tf.reshape(per_crop, [num_crops, num_clips, num_frames, size, size, 3])
  return tf.reshape(tf.transpose(v, [1, 0, 2, 3, 4, 5]),
                    [num_clips * num_crops, num_frames, size, size, 3])


def eval_views(cfg, reader):
  """fn(frames, seed) -> uint8 (V, T, S, S, 3): every view of the video.

  num_test_clips clips (`sampling.eval_indices`) x num_spatial_crops crops
  (`crops.eval_crop_windows`), view = clip * num_spatial_crops + crop.
  Deterministic: `seed` is not used.
  """
  num_frames, size = int(cfg.num_frames), int(cfg.image_size)
  clips, num_crops = int(cfg.num_test_clips), int(cfg.num_spatial_crops)

  def views(frames, seed):
    del seed
    idx = sampling.eval_indices(reader.count(frames), num_frames, int(cfg.stride),
                                clips, cfg.short_video_policy, cfg.sampling)
    video = reader.decode(frames, tf.reshape(idx, [-1]))
    h, w = tf.shape(video)[1], tf.shape(video)[2]
    windows = crops.eval_crop_windows(h, w, size, cfg.eval_resize, num_crops)
    return _as_views(_crops(video, windows, num_crops, size), num_crops, clips,
                     num_frames, size)
  return views
