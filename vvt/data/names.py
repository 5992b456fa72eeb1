"""Names of a dataset's classes and videos, for reports and predictions.

    class_names(cfg)          -> tuple of names in label order, or None
    video_ids(cfg, split)     -> list of str, one per record in global order

Class names come from the dataset's own files when the run config has none:
a `classes.txt` (one name per line, line i = label i: `vvt data synthetic`,
`vvt data convert --classes`) or a manifest (`manifest.json` with
`class_names`, or `<prefix>.manifest.json` with `classes`) beside the
evaluation files or in `data_dir`. Video ids are the records' `video_id`
context feature (`cfg.video_id_key`), or the record's global index as text.
"""
import json
import os
from typing import Optional, Sequence

from vvt.data import patterns


def _candidate_dirs(cfg) -> list:
  """Directories that may hold the dataset's class list: data_dir and the dirs of its files."""
  dirs = []
  base = cfg.get('data_dir', '') or ''
  if base and '://' not in base:
    dirs.append(base)
  for field in ('eval_files', 'train_files'):
    for p in patterns.split_patterns(cfg.get(field)):
      if '://' in p:
        continue
      if base and not os.path.isabs(p):
        p = os.path.join(base, p)
      m = patterns.SHARDED.match(p)
      dirs.append(os.path.dirname(m.group('base') if m else p) or '.')
  return list(dict.fromkeys(dirs))


def _manifest_names(path: str) -> Optional[tuple]:
  try:
    with open(path, encoding='utf-8') as f:
      data = json.load(f)
  except (OSError, ValueError):
    return None
  names = data.get('class_names') or data.get('classes') if isinstance(data, dict) else None
  if isinstance(names, list) and names and all(isinstance(n, str) for n in names):
    return tuple(names)
  return None


manifest_class_names = _manifest_names  # the `class_names` (or `classes`) of a manifest file, or None


def read_class_list(path: str) -> Optional[tuple]:
  """Names of a classes.txt (one a line), or None if it is missing or empty."""
  try:
    with open(path, encoding='utf-8') as f:
      names = tuple(line.strip() for line in f if line.strip())
  except OSError:
    return None
  return names or None


def dataset_class_names(cfg) -> Optional[tuple]:
  """The class names stored with the dataset of `cfg` (dataset section), or None."""
  for d in _candidate_dirs(cfg):
    names = read_class_list(os.path.join(d, 'classes.txt'))
    if names:
      return names
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
      if name.endswith('manifest.json'):
        names = _manifest_names(os.path.join(d, name))
        if names:
          return names
  return None


def class_names(config, head: str = '') -> Optional[tuple]:
  """Names of the classes of a run `config`: config.class_names, else the dataset's.

  Multi-head models (a dict num_classes) have no single list: None.
  Names whose count differs from the model's number of classes are ignored.
  """
  nc = config.get('num_classes')
  if head or hasattr(nc, 'items'):
    return None
  names = config.get('class_names')
  if not names and config.get('dataset') is not None:
    names = dataset_class_names(config.dataset)
  if names and nc and len(names) != int(nc):
    return None
  return tuple(names) if names else None


def label_names(names: Optional[Sequence[str]], num_classes: int) -> list:
  """`names` as a list, or '0', '1', ... when there are none."""
  return list(names) if names else [str(i) for i in range(num_classes)]


def video_ids(cfg, split: str) -> list:
  """The `video_id` of every record of `split` in global order ('' -> its index)."""
  n = None
  try:
    from vvt.data import sources  # pylint: disable=g-import-not-at-top
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    source = sources.make_source(cfg, split)
    n = source.num_records
    if not isinstance(source, sources.DmvrSource) or not cfg.video_id_key:
      return [str(i) for i in range(n)]
    ids = [str(i) for i in range(n)]
    ds = source.records(0, n).map(lambda src, rec, index, raw, unread: (index, raw))
    for index, raw in ds.as_numpy_iterator():
      try:
        ex = tf.train.SequenceExample.FromString(raw)
        value = ex.context.feature[cfg.video_id_key].bytes_list.value
        if value:
          ids[int(index)] = value[0].decode('utf-8', 'replace')
      except Exception:  # pylint: disable=broad-except
        pass  # a corrupt record keeps its index as id
    return ids
  except Exception:  # pylint: disable=broad-except
    return [str(i) for i in range(n or 0)]
