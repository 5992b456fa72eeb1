"""Names of a dataset's classes and videos, for reports and predictions.

    class_names(spec)          -> tuple of names in label order, or None (spec: a run's DataSpec)
    video_ids(spec, split)     -> list of str, one per record in global order

Class names come from the dataset's own files when the run config has none:
a `classes.txt` (one name per line, line i = label i: `vvt data synthetic`,
`vvt data convert --classes`) or a manifest (`manifest.json` with
`class_names`, or `<prefix>.manifest.json` with `classes`) beside the
evaluation files or in `data_dir`; for a video list (a CSV), its
`classes.txt` or its labels' set (`video_lists.list_class_names`). Video ids
are what the source parses (DMVR: the `video_id` context feature,
`spec.video_id_key`; a video list: the listed path), or the record's global
index as text. No TensorFlow at import.
"""
import json
import os
from typing import Optional, Sequence

from vvt.data.reading import patterns
from vvt.data.reading import registry
from vvt.data.reading import video_lists

LIST_EXTENSIONS = ('.csv', '.tsv')  # files that are video lists, not records


def _candidate_dirs(spec) -> list:
  """Directories that may hold the dataset's class list: data_dir and the dirs of its files."""
  dirs = []
  base = spec.data_dir or ''
  if base and not patterns.is_remote(base):
    dirs.append(base)
  for p in patterns.resolved_patterns(spec, ('eval_files', 'train_files')):
    if patterns.is_remote(p):
      continue
    m = patterns.SHARDED.match(p)
    dirs.append(os.path.dirname(m.group('base') if m else p) or '.')
  return list(dict.fromkeys(dirs))


def manifest_class_names(path: str) -> Optional[tuple]:
  """The `class_names` (or `classes`) of a manifest file, or None."""
  try:
    with open(path, encoding='utf-8') as f:
      data = json.load(f)
  except (OSError, ValueError):
    return None
  names = data.get('class_names') or data.get('classes') if isinstance(data, dict) else None
  if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
    return tuple(names)
  return None


def read_class_list(path: str) -> Optional[tuple]:
  """Names of a classes.txt (one a line), or None if it is missing, empty or repeats a name."""
  try:
    return tuple(video_lists.read_class_list(path))
  except (OSError, ValueError):
    return None


def is_video_list(path: str) -> bool:
  """Whether a data file is a video list (a CSV or TSV), not records."""
  return path.lower().endswith(LIST_EXTENSIONS)


def is_unlabelled_list(path: str) -> bool:
  """Whether the video list `path` is one of paths only (`video_lists.unlabelled`; False when it cannot be
  read)."""
  try:
    return os.path.isfile(path) and video_lists.unlabelled(video_lists.read_video_rows(path))
  except (OSError, ValueError):
    return False


def video_list_class_names(path: str) -> Optional[tuple]:
  """The class names of the video list `path` (`video_lists.list_class_names`), or None (none, or unreadable)."""
  try:
    return video_lists.list_class_names(path)
  except (OSError, ValueError):
    return None


def list_class_names(spec) -> Optional[tuple]:
  """The class names of the dataset's video list (train_files first), or None when its files are not lists."""
  for p in patterns.resolved_patterns(spec):
    if is_video_list(p) and os.path.isfile(p):
      return video_list_class_names(p)
  return None


def dataset_class_names(spec) -> Optional[tuple]:
  """The class names stored with the dataset of `spec` (a DataSpec or a dataset section), or None."""
  listed = list_class_names(spec)
  if listed:
    return listed
  for d in _candidate_dirs(spec):
    names = read_class_list(os.path.join(d, 'classes.txt'))
    if names:
      return names
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
      if name.endswith('manifest.json'):
        names = manifest_class_names(os.path.join(d, name))
        if names:
          return names
  return None


def class_names(spec, head: str = '') -> Optional[tuple]:
  """Names of the classes of a run's DataSpec `spec`: its class_names (the run's), else the dataset's.

  Multi-head models (a dict num_classes) have no single list: None.
  Names whose count differs from the model's number of classes are ignored.
  """
  nc = spec.num_classes
  if head or hasattr(nc, 'items'):
    return None
  names = spec.class_names or dataset_class_names(spec)
  if names and nc and len(names) != int(nc):
    return None
  return tuple(names) if names else None


def label_names(names: Optional[Sequence[str]], num_classes: int) -> list:
  """`names` as a list, or '0', '1', ... when there are none."""
  return list(names) if names else [str(i) for i in range(num_classes)]


def video_ids(spec, split: str) -> list:
  """The id of every record of `split` in global order (a record without one, or that cannot be read: its
  index; all indices when the split cannot be read)."""
  ids = []
  try:
    source = registry.make_source(spec, split)
    ids = [str(i) for i in range(source.num_records)]
    if not ids:
      return ids
    import tensorflow as tf

    def dataset():
      return source.records(0, source.num_records).map(
          lambda src, rec, index, raw, unread: (index, source.parse(raw)['video_id']))
    # Built with AutoGraph off, as `examples.build` (the same graph, without seconds of conversion).
    ds = tf.autograph.experimental.do_not_convert(dataset)()
    for index, video_id in ds.ignore_errors(log_warning=False).as_numpy_iterator():
      if video_id:
        ids[int(index)] = video_id.decode('utf-8', 'replace')
  except Exception:  # (ids are for reports: a split that cannot be read keeps indices)
    pass
  return ids
