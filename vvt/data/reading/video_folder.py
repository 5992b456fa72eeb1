"""The video-folder source (`dataset.name='video_folder'`): video files listed in a CSV, decoded with PyAV as they
are read, with no conversion step.

    dataset.name = 'video_folder'
    dataset.train_files = 'data/footage/train.csv'   # lines `path,label`; eval_files alike
    dataset.train_files = 'data/footage/clips'       # a folder: every video under it (a run that reads no labels)

The lists are what `vvt data convert` reads (`video_lists`): `path,label[,...]` lines (CSV or TSV, an optional
`path` header), relative video paths taken from the list's folder, a label a class name or an integer index.
The class names are those of the training list (`names.list_class_names`: `classes.txt` beside it, else its
labels' set), the same for every split. A record is one listed video (numbered in list order, lists in the order
given); a list of paths only or a folder (`video_lists.read_video_rows`) gives unlabelled videos, refused for a
run that reads labels (`spec.num_classes` set). Its source name is the list (or folder) and its record number the
row, so a bad video is named like a bad TFRecord record, with the video's path in the detail. Its id is the path
as listed (the id `vvt data convert` gives it).

A random-access source: each training epoch reads the host's rows in an order drawn from (seed, epoch), before
the shuffle buffer. Frames are decoded at read time (`VideoFiles`): opening a video lists its frames from the
container's packets (nothing decoded), and a clip decodes only from the keyframe before its first frame to its
last (`video_files.read_frames`), inside tf.data's parallel map. A video that cannot be opened is a bad record
(`errors.UNREADABLE_VIDEO`: raised naming it, or counted and skipped under on_error='skip'); one that breaks off
while its clip is decoded is `errors.CORRUPT`; one whose packets fall short of the frames its container declares
(a file cut short: what `vvt data convert` calls partial) is `errors.PARTIAL_VIDEO`. Under on_error='raise' every
listed file is stat'ed when the source is built: a missing one is refused naming the list and its line. With
`dataset.fps` set, each video's clips are mapped by the rate its container gives (`stored_rates`,
`frame_rate.ratio_fn`), as the TFRecords of `vvt data convert` are by their manifest's.
"""
import numpy as np
import tensorflow as tf

from vvt.data.reading import errors
from vvt.data.reading import names
from vvt.data.reading import patterns
from vvt.data.reading import source
from vvt.data.reading import video_files
from vvt.data.reading import video_lengths
from vvt.data.reading import video_lists

LABEL_KEY = 'label'  # the list's column: what messages name a bad label by


def _probe(path):
  """numpy_function: (int64 (N,) frame times, int32 error code, why the video cannot be read or b''): code
  `errors.UNREADABLE_VIDEO` when it cannot be opened, `errors.PARTIAL_VIDEO` when its packets fall short of the
  frames its container declares (`video_files.falls_short`), else `errors.OK`."""
  where = path.decode()
  try:
    times, declared = video_files.frame_times(where, with_declared=True)
  except video_files.UnreadableVideo as e:
    return np.zeros([0], np.int64), np.int32(errors.UNREADABLE_VIDEO), str(e).encode()
  if video_files.falls_short(len(times), declared):
    why = f'{where}: {video_files.partial_reason(len(times), declared)}'
    return times, np.int32(errors.PARTIAL_VIDEO), why.encode()
  return times, np.int32(errors.OK), b''


def _decode(path, times, indices):
  """numpy_function: uint8 (len(indices), h, w, 3), the frames at `indices` (8x8 black for the stand-in '')."""
  if not path:
    return np.zeros((len(indices), 8, 8, 3), np.uint8)
  where = path.decode()
  got = video_files.read_frames(where, indices, times)
  shapes = {f.shape for f in got.values()}
  if len(shapes) > 1:
    raise video_files.UnreadableVideo(f'{where}: frames of different sizes {sorted(shapes)}')
  return np.stack([got[int(i)] for i in indices])


class VideoFiles:
  """The `FrameReader` of a video file: a record's frames are its path (string scalar)."""

  def inspect(self, frames):
    """({'path', 'times'}, code, detail): `errors.UNREADABLE_VIDEO` (detail: the file and why) when it cannot be
    opened, `errors.PARTIAL_VIDEO` when it holds fewer frames than its container declares, `errors.NO_FRAMES` when
    it has none, else `errors.OK`; a stand-in path '' for a bad video."""
    times, code, why = tf.numpy_function(_probe, [frames], [tf.int64, tf.int32, tf.string], stateful=False)
    times, code, why = tf.ensure_shape(times, [None]), tf.reshape(code, []), tf.reshape(why, [])
    code = tf.where((code == errors.OK) & (tf.size(times) == 0), errors.NO_FRAMES, code)
    ok = code == errors.OK
    usable = {'path': tf.where(ok, frames, ''),
              'times': tf.cond(ok, lambda: times, lambda: tf.zeros([1], tf.int64))}
    return usable, tf.cast(code, tf.int32), why

  def count(self, frames):
    return tf.size(frames['times'], out_type=tf.int32)

  def decode(self, frames, indices, window_of=None):
    """uint8 (len(indices), h, w, 3): the frames at `indices`, decoded whole and cut to `window_of(height,
    width)`."""
    video = tf.numpy_function(_decode, [frames['path'], frames['times'], indices], tf.uint8, stateful=False)
    video = tf.ensure_shape(video, [indices.shape[0], None, None, 3])
    if window_of is None:
      return video
    y, x, h, w = tf.unstack(window_of(tf.shape(video)[1], tf.shape(video)[2]))
    return video[:, y:y + h, x:x + w]


def _lists(spec, field):
  """The video lists of dataset field `field`, in order (globs sorted), each resolved against data_dir."""
  out = []
  for pattern in patterns.split_patterns(getattr(spec, field)):
    pattern = patterns.resolve(pattern, spec.data_dir)
    found = patterns.local_matches(pattern)
    if not found:
      raise FileNotFoundError(f'dataset.{field}: no video list matches {pattern!r}')
    out.extend(found)
  return out


def _label_indices(rows, class_names, on_error):
  """int64 label of each (list, row, label): its index among `class_names` (a name or an int), or the int itself
  without names; a label that is neither raises naming the list and row, or is -1 under on_error='skip' (a bad
  label when read)."""
  out = []
  for where, row, label in rows:
    if label is video_lists.NO_LABEL:  # unlabelled (a run that reads no labels): never read
      out.append(-1)
      continue
    try:
      out.append(video_lists.label_index(label, class_names) if class_names else int(label))
    except ValueError as e:
      if on_error != 'skip':
        raise ValueError(f'{where}: row {row}: {e}' if class_names else
                         f'{where}: row {row}: label {label!r} is not an integer, and there are no class names '
                         f'(a classes.txt beside {where})') from None
      out.append(-1)
  return np.asarray(out, np.int64)


def _captions(per_video, count: int) -> np.ndarray:
  """bytes (N, count): the first `count` captions of each video (a caption list's, `video_lists.merge_captions`),
  padded with b''."""
  out = np.full((len(per_video), count), b'', dtype=object)
  for i, captions in enumerate(per_video):
    for j, caption in enumerate(list(captions)[:count]):
      out[i, j] = caption.encode()
  return out.astype(bytes) if count else np.zeros((len(per_video), 0), bytes)


class VideoFolderSource:
  """Video files listed in spec.train_files for split 'train', spec.eval_files for any other split (a
  `vvt.data.reading.source.Source`)."""

  frames = VideoFiles()
  damaged = ()

  def __init__(self, spec, split):
    field = 'train_files' if split == 'train' else 'eval_files'
    if not getattr(spec, field):
      raise ValueError(f'dataset.{field} is empty: point it at the {split!r} video list (a CSV of path,label lines)')
    if hasattr(spec.label_keys, 'keys'):
      raise ValueError("dataset.label_keys: dataset.name='video_folder' reads one label per video (path,label)")
    self.files = tuple(_lists(spec, field))
    if spec.on_error != 'skip':  # every listed file stat'ed now, not found when a batch reaches it
      missing = [line for where in self.files for line in video_lists.missing_videos(where)]
      if missing:
        more = f' (and {len(missing) - 1} more missing)' if len(missing) > 1 else ''
        raise FileNotFoundError(f'dataset.{field}: {missing[0]}{more}')
    listed = {where: video_lists.read_video_list(where) for where in self.files}
    unlabelled = [where for where, got in listed.items() if spec.num_classes and video_lists.unlabelled(got)]
    if unlabelled:
      raise ValueError(video_lists.needs_labels_line(
          field, unlabelled[0], f'this run reads labels (num_classes={spec.num_classes})'))
    rows = [(where, row, video_lists.video_path(path, video_lists.list_root(where)), path, label,
             extra.get('captions', ()))
            for where in self.files for row, (path, label, extra) in enumerate(listed[where])]
    self.num_records = len(rows)
    self.description = f'{field}={getattr(spec, field)!r}'
    self.heads = {'label': LABEL_KEY}
    self.class_names = names.list_class_names(spec)
    self._lists, self._paths, self._ids = ([r[k] for r in rows] for k in (0, 2, 3))
    self._rows = np.asarray([r[1] for r in rows], np.int64)
    self._labels = _label_indices([(r[0], r[1], r[4]) for r in rows], self.class_names, spec.on_error)
    self._captions = _captions([r[5] for r in rows], int(spec.captions))
    self.num_captions = int(spec.captions)

  def stored_rates(self):
    """{video id: the frame rate its container gives} of the listed videos whose rate is known (headers only,
    `video_lengths.header`): what `dataset.fps` maps clips by (`frame_rate.ratio_fn`)."""
    rates = {}
    for video_id, path in zip(self._ids, self._paths, strict=True):
      rate = video_lengths.header(path)[1]
      if rate:
        rates.setdefault(video_id, rate)
    return rates

  def records(self, lo, hi, shuffle_seed=None):
    """(list, row in list, global index, {'path', 'id', 'label'}, '') for [lo, hi): in order, or permuted by
    `shuffle_seed` (a [2] int64 tensor)."""
    order = tf.range(lo, hi, dtype=tf.int64)
    if shuffle_seed is not None:
      order = tf.random.experimental.stateless_shuffle(order, shuffle_seed)
    lists, paths, ids = (tf.constant(v, tf.string) for v in (self._lists, self._paths, self._ids))
    rows, labels = tf.constant(self._rows), tf.constant(self._labels)
    captions = tf.constant(self._captions, tf.string)

    def row(i):
      raw = {'path': tf.gather(paths, i), 'id': tf.gather(ids, i), 'label': tf.gather(labels, i),
             'captions': tf.gather(captions, i)}
      return tf.gather(lists, i), tf.gather(rows, i), i, raw, tf.constant('')
    return tf.data.Dataset.from_tensor_slices(order).map(row)

  def record(self, index):
    """The `Row` of record `index` (numpy values, as `records` yields them)."""
    raw = {'path': self._paths[index].encode(), 'id': self._ids[index].encode(), 'label': self._labels[index],
           'captions': self._captions[index]}
    return source.Row(self._lists[index].encode(), self._rows[index], np.int64(index), raw, b'')

  def locate(self, index):
    return self._lists[index], int(self._rows[index])

  def parse(self, raw):
    parsed = {'frames': raw['path'], 'labels': {'label': raw['label']}, 'video_id': raw['id']}
    if self._captions.shape[1]:
      parsed['captions'] = raw['captions']
    return parsed
