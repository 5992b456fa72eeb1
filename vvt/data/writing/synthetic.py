"""A synthetic temporal-reasoning video dataset in the DMVR format.

Every clip shows one shape (random shape, size, colour) over a random
background, moving vertically on a torus (it wraps around the frame edges)
from a random start with a random speed and a small random sideways drift.
The class is *only* the temporal order in which the positions of that one
trajectory are shown: the clip's frames are `base[order_c(t)]` where `base`
is the straight-line trajectory and `order_c` a class-specific permutation:

    0 down              0 1 2 ... T-1            (moves down)
    1 up                T-1 ... 1 0              (moves up)
    2 down-and-back     0 2 4 .. T-1 .. 3 1      (down, then back up)
    3 up-and-back       mirror of 2              (up, then back down)
    4 down-with-cut     T/2 .. T-1 0 .. T/2-1    (down, jumps back, down)
    5 up-with-cut       mirror of 4
    6 down-zigzag       0 3 6 .. 5 2 1 4 ..      (down, up, down)
    7 up-zigzag         mirror of 6

so for every class the *set* of frames is the same (any order-free model,
e.g. a mean over per-frame features, is at chance), and with a uniformly
random start on the torus each single frame has the same distribution for
every class and every time step. Only the order, i.e. motion, tells classes
apart. Vertical motion keeps the labels valid under horizontal flips.

Clips are written at `num_frames` frames; sample them so a clip covers the
whole video (e.g. 8 frames at stride 2 of 16): a short window of class 2 can
look like class 0.
"""
import hashlib
import json
import os

import numpy as np

CLASS_NAMES = ('down', 'up', 'down_and_back', 'up_and_back', 'down_with_cut',
               'up_with_cut', 'down_zigzag', 'up_zigzag')
MAX_CLASSES = len(CLASS_NAMES)
_SHAPES = ('square', 'disc', 'triangle', 'cross', 'ring')


def class_order(label, num_frames):
  """The permutation of trajectory positions shown by class `label`."""
  t = num_frames
  if label in (0, 1):
    order = list(range(t))
  elif label in (2, 3):
    order = list(range(0, t, 2)) + [i for i in range(t - 1, -1, -1) if i % 2]
  elif label in (4, 5):
    half = t // 2
    order = list(range(half, t)) + list(range(half))
  elif label in (6, 7):
    up = list(range(0, t, 3))
    down = [i for i in range(t - 1, -1, -1) if i % 3 == 2]
    again = [i for i in range(t) if i % 3 == 1]
    order = up + down + again
  else:
    raise ValueError(f'label {label} not in [0, {MAX_CLASSES})')
  order = np.asarray(order, np.int64)
  if label % 2 == 1:  # the mirrored class: same positions, opposite direction
    order = t - 1 - order
  assert sorted(order.tolist()) == list(range(t)), (label, order)
  return order


def _shape_mask(shape, size, canvas):
  """A float mask (canvas, canvas) with the shape drawn at the top-left."""
  yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
  c, r = size / 2.0, size / 2.0
  if shape == 'square':
    m = np.ones((size, size), np.float32)
  elif shape == 'disc':
    m = ((yy - c) ** 2 + (xx - c) ** 2 <= r * r).astype(np.float32)
  elif shape == 'ring':
    d = np.sqrt((yy - c) ** 2 + (xx - c) ** 2)
    m = ((d <= r) & (d >= 0.55 * r)).astype(np.float32)
  elif shape == 'triangle':
    m = (np.abs(xx - c) <= yy / 2.0).astype(np.float32)
  else:  # cross
    w = max(1.0, size / 6.0)
    m = ((np.abs(xx - c) <= w) | (np.abs(yy - c) <= w)).astype(np.float32)
  out = np.zeros((canvas, canvas), np.float32)
  out[:size, :size] = m
  return out


def gradient_background(rng, frame_size):
  """float (frame_size, frame_size, 3): a dark colour with a random linear gradient (three draws from `rng`)."""
  gy = np.linspace(-1, 1, frame_size, dtype=np.float32)[:, None, None]
  gx = np.linspace(-1, 1, frame_size, dtype=np.float32)[None, :, None]
  return rng.uniform(0, 90, size=3) + 15 * (gy * rng.uniform(-1, 1, 3) + gx * rng.uniform(-1, 1, 3))


def render_clip(label, rng, num_frames=16, frame_size=64, noise=4.0, background=None, object_scale=1.0):
  """uint8 (num_frames, frame_size, frame_size, 3) of one clip of `label`.

  `rng` draws everything but the label, so two labels rendered from equally
  seeded generators show the same frames in different orders (up to `noise`,
  the std of the per-frame pixel noise). `background` (float (f, f, 3)): drawn
  behind the object instead of the clip's own (the draws from `rng` stay the same).
  `object_scale`: the object's side times this (9-15 px of a 64 px frame at 1; the draws stay the same).
  """
  f, scale = frame_size, frame_size / 64.0
  size = min(f, int(round(rng.uniform(9, 15) * scale * object_scale)))
  shape = _SHAPES[rng.integers(len(_SHAPES))]
  mask = _shape_mask(shape, max(size, 3), f)
  colour = rng.uniform(140, 255, size=3) * (rng.uniform(size=3) < 0.8)
  colour[rng.integers(3)] = rng.uniform(180, 255)
  own = gradient_background(rng, f)
  background = own if background is None else background
  speed = rng.uniform(1.5, 2.5) * scale           # pixels per frame, vertical
  drift = rng.uniform(-0.4, 0.4) * scale          # pixels per frame, sideways
  y0, x0 = rng.uniform(0, f, size=2)
  s = np.arange(num_frames)
  ys = np.round(y0 + speed * s).astype(int) % f   # base trajectory (torus)
  xs = np.round(x0 + drift * s).astype(int) % f
  order = class_order(label, num_frames)
  frames = np.empty((num_frames, f, f, 3), np.float32)
  for t, p in enumerate(order):
    m = np.roll(mask, (ys[p], xs[p]), axis=(0, 1))[..., None]
    frames[t] = background * (1 - m) + colour * m
  if noise:
    frames += rng.normal(0, noise, size=frames.shape)
  return np.clip(np.round(frames), 0, 255).astype(np.uint8)


def motion_frames(directions, rng, frame_size=64, noise=4.0):
  """Yields uint8 (frame_size, frame_size, 3) frames of one long video: the object of `render_clip` (drawn
  alike from `rng`) moving down (+1) or up (-1) on the torus between frame i and i + 1 as `directions[i]`
  says, so a window of it looks like a clip of class 0 (down) or 1 (up). One frame more than `directions`."""
  f, scale = frame_size, frame_size / 64.0
  size = int(round(rng.uniform(9, 15) * scale))
  mask = _shape_mask(_SHAPES[rng.integers(len(_SHAPES))], max(size, 3), f)
  colour = rng.uniform(140, 255, size=3) * (rng.uniform(size=3) < 0.8)
  colour[rng.integers(3)] = rng.uniform(180, 255)
  background = gradient_background(rng, f)
  speed, drift = rng.uniform(1.5, 2.5) * scale, rng.uniform(-0.4, 0.4) * scale
  y, x = rng.uniform(0, f, size=2)
  for step in [0, *np.sign(np.asarray(directions)).tolist()]:
    y, x = y + step * speed, x + abs(step) * drift
    m = np.roll(mask, (int(round(y)) % f, int(round(x)) % f), axis=(0, 1))[..., None]
    frame = background * (1 - m) + colour * m
    if noise:
      frame = frame + rng.normal(0, noise, size=frame.shape)
    yield np.clip(np.round(frame), 0, 255).astype(np.uint8)


def _encode_jpeg(frame, quality=90):
  import io

  from PIL import Image
  buf = io.BytesIO()
  Image.fromarray(frame).save(buf, format='JPEG', quality=quality)
  return buf.getvalue()


def second_labels(rng, labels, num_classes):
  """The multi-label variant's second label of each clip: another class for half the clips (drawn from `rng`),
  -1 for the others."""
  other = (labels + rng.integers(1, num_classes, size=labels.shape)) % num_classes
  return np.where(rng.uniform(size=labels.shape) < 0.5, other, -1)


def _write_split(out_dir, split, num_clips, num_shards, class_ids, num_frames,
                 frame_size, seed, multi_label=False, object_scale=1.0):
  """Label i of the split is motion class `class_ids[i]` (an index of CLASS_NAMES); `multi_label`: half the
  clips also show a second object of another class (the two renderings' brighter pixels), labelled with both;
  `object_scale`: `render_clip`'s."""
  from vvt.data.writing import dmvr_records  # (TensorFlow: only to write the files)
  num_classes = len(class_ids)
  rng = np.random.default_rng([seed, 0 if split == 'train' else 1])
  labels = rng.permutation(np.arange(num_clips) % num_classes)
  clip_seeds = rng.integers(0, 2 ** 63 - 1, size=num_clips)
  second = second_labels(rng, labels, num_classes) if multi_label else np.full(num_clips, -1)
  files, shard_info = [], []
  bounds = np.linspace(0, num_clips, num_shards + 1).astype(int)
  for shard in range(num_shards):
    path = os.path.join(out_dir,
                        f'{split}-{shard:05d}-of-{num_shards:05d}.tfrecord')
    records = []
    for i in range(bounds[shard], bounds[shard + 1]):
      motion = class_ids[labels[i]]
      clip_rng = np.random.default_rng(clip_seeds[i])
      clip = render_clip(motion, clip_rng, num_frames, frame_size, object_scale=object_scale)
      label, text = int(labels[i]), CLASS_NAMES[motion]
      if second[i] >= 0:
        other = class_ids[second[i]]
        clip = np.maximum(clip, render_clip(other, clip_rng, num_frames, frame_size, object_scale=object_scale))
        label, text = [label, int(second[i])], f'{text};{CLASS_NAMES[other]}'
      records.append(dmvr_records.encode_sequence_example(
          [_encode_jpeg(frame) for frame in clip], label,
          video_id=f'{split}_{i:06d}', label_text=text))
    dmvr_records.write_records(path, records)
    with open(path, 'rb') as f:
      digest = hashlib.sha256(f.read()).hexdigest()
    files.append(path)
    shard_info.append({'file': os.path.basename(path),
                       'videos': int(bounds[shard + 1] - bounds[shard]),
                       'sha256': digest})
  every = np.concatenate([labels, second[second >= 0]])
  return files, shard_info, np.bincount(every, minlength=num_classes)


def _class_names(classes, num_classes) -> tuple:
  """The classes of the dataset, in label order: `classes` (distinct names of CLASS_NAMES) or the first
  `num_classes` of CLASS_NAMES."""
  if classes is not None:
    unknown = [c for c in classes if c not in CLASS_NAMES]
    if unknown or len(set(classes)) != len(classes):
      raise ValueError(f'classes must be distinct names from {CLASS_NAMES}, '
                       f'got {tuple(classes)}')
    num_classes = len(classes)
  if not 2 <= num_classes <= MAX_CLASSES:
    raise ValueError(f'num_classes must be in [2, {MAX_CLASSES}], got {num_classes}')
  return tuple(classes) if classes is not None else CLASS_NAMES[:num_classes]


MAX_OBJECT_SCALE = 4.0  # the largest object (15 px of 64, times this) still fits in the frame


def _check_sizes(num_frames, frame_size, train_clips, test_clips, object_scale=1.0) -> None:
  """Every problem of the sizes, in one ValueError of lines."""
  problems = [
      *([f'num_frames must be >= 4, got {num_frames}'] if num_frames < 4 else []),
      *([f'frame_size must be >= 16, got {frame_size}'] if frame_size < 16 else []),
      *(['train_clips and test_clips must be >= 1'] if train_clips < 1 or test_clips < 1 else []),
      *([f'object_scale must be in (0, {MAX_OBJECT_SCALE:g}], got {object_scale:g}']
        if not 0 < object_scale <= MAX_OBJECT_SCALE else [])]
  if problems:
    raise ValueError('\n'.join(problems))


def write_synthetic(out_dir, num_classes=4, train_clips=2048, test_clips=256,
                    num_frames=16, frame_size=64, seed=0, train_shards=8,
                    test_shards=2, classes=None, multi_label=False, object_scale=1.0):
  """Writes the synthetic motion dataset; returns its description.

  classes: names of CLASS_NAMES to use, in label order (default: the first
  `num_classes`). E.g. ('down_and_back', 'up_and_back') differ only in the
  order of the same local motions: a model that sees motion only within a
  tubelet (space-only attention) is at chance on them.

  multi_label: the multi-label variant (`dataset.multi_label`, task 'multilabel'): half the clips show a second
  object moving as another class and carry both labels (`videos_per_class` counts every label).

  object_scale: the object's side times this (`render_clip`; in (0, 4], default 1: 9-15 px of a 64 px frame);
  e.g. 2 makes the object a larger share of the pixels, which a pixel-reconstruction loss then weighs more.

  Files: out_dir/{train,test}-XXXXX-of-YYYYY.tfrecord, classes.txt (one class
  name per line, line i = label i), manifest.json.
  Returns {'train_files', 'eval_files' (glob patterns), 'num_classes',
  'train_clips', 'test_clips', 'num_frames', 'frame_size', 'class_names',
  'manifest'}.
  """
  names = _class_names(classes, num_classes)
  num_classes = len(names)
  _check_sizes(num_frames, frame_size, train_clips, test_clips, object_scale)
  os.makedirs(out_dir, exist_ok=True)
  class_ids = [CLASS_NAMES.index(n) for n in names]
  shards = {}
  counts = {}
  for split, n, k in (('train', train_clips, train_shards),
                      ('test', test_clips, test_shards)):
    k = max(1, min(k, n))
    _, shards[split], per_class = _write_split(
        out_dir, split, n, k, class_ids, num_frames, frame_size, seed, multi_label, object_scale)
    counts[split] = per_class.tolist()
  with open(os.path.join(out_dir, 'classes.txt'), 'w') as f:
    f.write('\n'.join(names) + '\n')
  info = {
      'train_files': os.path.join(out_dir, 'train-*-of-*.tfrecord'),
      'eval_files': os.path.join(out_dir, 'test-*-of-*.tfrecord'),
      'num_classes': num_classes, 'train_clips': train_clips,
      'test_clips': test_clips, 'num_frames': num_frames,
      'frame_size': frame_size, 'class_names': list(names),
  }
  from vvt.data.writing import dmvr_records
  manifest = dict(info, format='dmvr', seed=seed, frames_key=dmvr_records.FRAMES_KEY,
                  label_key=dmvr_records.LABEL_KEY, videos_per_class=counts, multi_label=bool(multi_label),
                  object_scale=float(object_scale), shards=shards)
  path = os.path.join(out_dir, 'manifest.json')
  with open(path, 'w') as f:
    json.dump(manifest, f, indent=1)
  info['manifest'] = path
  return info
