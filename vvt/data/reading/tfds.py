"""The TFDS source (`dataset.name='tfds'`): a prepared tensorflow-datasets video dataset, read with its frames
still encoded (`SkipDecoding`), so only the sampled frames are decoded (`image_frames.ImageFrames`).

Split spec.tfds_train_split for 'train', else the split of that name; vvt never downloads or prepares one at run
time. A record is an example; its labels are the features `spec.tfds_label_keys`, its class names those of the
label feature where it is a `ClassLabel`.
"""
import tensorflow as tf

from vvt.data.reading import image_frames
from vvt.data.reading import labels
from vvt.data.reading import source


class TfdsSource:
  """A tensorflow-datasets video dataset, read with its frames still encoded:
  split spec.tfds_train_split for 'train', else the split of that name (a `vvt.data.reading.source.Source`)."""

  frames = image_frames.ImageFrames()
  files = ()
  damaged = ()

  def __init__(self, spec, split):
    import tensorflow_datasets as tfds
    if not spec.tfds_name:
      raise ValueError("dataset.tfds_name must be set when dataset.name == 'tfds'")
    try:
      self._builder = tfds.builder(spec.tfds_name, data_dir=spec.data_dir or None)
    except Exception as e:
      raise FileNotFoundError(
          f'TFDS dataset {spec.tfds_name!r} not found in data_dir '
          f'{spec.data_dir!r}: {e}') from e
    if not tf.io.gfile.exists(str(self._builder.data_path)):
      raise FileNotFoundError(
          f'TFDS dataset {spec.tfds_name!r} is not prepared in data_dir '
          f'{spec.data_dir!r} (looked for {self._builder.data_path}); vvt never '
          'downloads at run time: prepare it with tfds first')
    tfds_split = spec.tfds_train_split if split == 'train' else split
    splits = self._builder.info.splits
    if tfds_split not in splits:
      raise ValueError(f'TFDS dataset {spec.tfds_name!r} has no split '
                       f'{tfds_split!r}; it has {sorted(splits.keys())}')
    self._split = tfds_split
    self._tfds = tfds
    self.num_records = int(splits[tfds_split].num_examples)
    self.description = f'tfds {spec.tfds_name}:{tfds_split}'
    self.heads = labels.label_heads(spec.tfds_label_keys)
    self.class_names = _class_names(self._builder.info.features, self.heads)
    self._video_key = spec.tfds_video_key
    self._name = f'tfds:{spec.tfds_name}/{tfds_split}'

  def records(self, lo, hi, shuffle_seed=None):
    """('tfds:name/split', index, index, example, '') for examples [lo, hi)."""
    del shuffle_seed  # TFDS files are read in order; the shuffle buffer mixes.
    if lo >= hi:
      raise ValueError(f'{self._name}: empty host range [{lo}, {hi})')
    ds = self._builder.as_dataset(
        split=f'{self._split}[{lo}:{hi}]', shuffle_files=False,
        decoders={self._video_key: self._tfds.decode.SkipDecoding()})
    name = self._name
    return ds.enumerate(lo).map(
        lambda i, ex: (tf.constant(name), i, i, ex, tf.constant('')))

  def record(self, index):
    """The `Row` of example `index` (numpy values)."""
    rows = self.records(index, index + 1)
    return source.Row(*next(iter(rows.as_numpy_iterator())))

  def locate(self, index):
    return self._name, index

  def parse(self, raw):
    return parse_tfds_example(raw, self._video_key, self.heads)


def parse_tfds_example(example, video_key, label_keys):
  """A TFDS example read with its frames still encoded -> the same dict as
  `parse_record` (no video id)."""
  return {'frames': example[video_key],
          'labels': {f: tf.cast(example[k], tf.int64)
                     for f, k in label_keys.items()},
          'video_id': tf.constant('')}


def _class_names(features, heads):
  """The names of the one label feature's classes (a ClassLabel), else None."""
  if tuple(heads) != ('label',):
    return None
  try:
    names = getattr(features[heads['label']], 'names', None)
  except (KeyError, TypeError):
    return None
  return tuple(names) if names else None
