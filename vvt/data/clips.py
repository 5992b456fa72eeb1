"""A video's encoded frames -> the uint8 pixels the model sees.

    train_clip(cfg)(frames, seed) -> (T, S, S, 3)     one random clip, augmented
    eval_views(cfg)(frames, seed) -> (V, T, S, S, 3)  every evaluation view

`frames` is the (N,) string tensor of a record's encoded frames, `seed` a [2]
int64 stateless seed; T = cfg.num_frames, S = cfg.image_size, V =
cfg.num_test_clips * cfg.num_spatial_crops. Each samples frame indices
(`vvt.data.sampling`), gathers and decodes only those frames
(`vvt.data.transforms`), then crops and resizes them (and, in training,
augments them, `vvt.data.augment`).
"""
import tensorflow as tf

from vvt.data import augment
from vvt.data import sampling
from vvt.data import transforms


def flip_flag(cfg, seed):
  """Whether the training clip of `seed` is flipped left-right (drawn from
  fold_in(seed, 4); never without cfg.horizontal_flip)."""
  if not cfg.horizontal_flip:
    return tf.constant(False)
  return transforms.random_flip_flag(transforms.fold_in(seed, 4))


def train_clip(cfg):
  """fn(frames, seed) -> uint8 (T, S, S, 3): one random clip of the video.

  Seeds: fold_in(seed, 1) the temporal sampling, 2 the crop window (scale
  jitter and position, decoded from the JPEG alone), 4 the flip, 3 the
  augmentation of `augment.train_clip_fn`.
  """
  num_frames, size = int(cfg.num_frames), int(cfg.image_size)
  make_clip = augment.train_clip_fn(cfg)

  def clip(frames, seed):
    idx = sampling.train_indices(
        tf.size(frames), num_frames, int(cfg.stride),
        transforms.fold_in(seed, 1), cfg.short_video_policy, cfg.sampling)
    encoded = tf.gather(frames, idx)
    h, w = tf.unstack(transforms.frame_shape(encoded[0]))
    window = transforms.train_crop_window(
        h, w, size, cfg.train_min_resize, cfg.train_max_resize,
        transforms.fold_in(seed, 2))
    flip = flip_flag(cfg, seed)
    return make_clip(transforms.decode_frames(encoded, num_frames, window),
                     flip, transforms.fold_in(seed, 3))
  return clip


def _crops(video, windows, num_crops, size):
  """uint8 (F, h, w, 3) and (C, 4) windows [y, x, height, width] -> uint8
  (C, F, size, size, 3): each window of every frame, resized."""
  per_crop = []
  for k in range(num_crops):
    y, x, ch, cw = tf.unstack(windows[k])
    per_crop.append(augment.resize_tf(video[:, y:y + ch, x:x + cw], size))
  return tf.stack(per_crop)


def _as_views(crops, num_crops, num_clips, num_frames, size):
  """(C, clips*T, S, S, 3) -> (clips*C, T, S, S, 3): view = clip * C + crop."""
  v = tf.reshape(crops, [num_crops, num_clips, num_frames, size, size, 3])
  return tf.reshape(tf.transpose(v, [1, 0, 2, 3, 4, 5]),
                    [num_clips * num_crops, num_frames, size, size, 3])


def eval_views(cfg):
  """fn(frames, seed) -> uint8 (V, T, S, S, 3): every view of the video.

  num_test_clips clips (`sampling.eval_indices`) x num_spatial_crops crops
  (`transforms.eval_crop_windows`), view = clip * num_spatial_crops + crop.
  Deterministic: `seed` is not used.
  """
  num_frames, size = int(cfg.num_frames), int(cfg.image_size)
  clips, crops = int(cfg.num_test_clips), int(cfg.num_spatial_crops)

  def views(frames, seed):
    del seed
    idx = sampling.eval_indices(tf.size(frames), num_frames, int(cfg.stride),
                                clips, cfg.short_video_policy, cfg.sampling)
    encoded = tf.gather(frames, tf.reshape(idx, [-1]))
    video = transforms.decode_frames(encoded, clips * num_frames)
    h, w = tf.shape(video)[1], tf.shape(video)[2]
    windows = transforms.eval_crop_windows(h, w, size, cfg.eval_resize, crops)
    return _as_views(_crops(video, windows, crops, size), crops, clips,
                     num_frames, size)
  return views
