"""File patterns of a dataset, without TensorFlow: sharded names, pattern lists, the relative-path rule, the early
existence check.

A pattern is a glob (`dir/train-*.tfrecord`), a sharded name (`dir/train.tfrecord@16` ->
`dir/train.tfrecord-00000-of-00016` ...), an exact path, or a comma-separated list / sequence of those. A relative
pattern is taken relative to `data_dir` when it is set (`resolve`: the one place that rule lives). The sources
read them (through tf.io.gfile, so remote paths work); `missing_files` lets a command name a missing local dataset
path in its first second.
"""
import glob
import os
import re

from vvt.data.reading import registry

SHARDED = re.compile(r'^(?P<base>.+)@(?P<n>\d+)$')


def shard_names(base, num_shards):
  """Names of `base@num_shards`: base-00000-of-0000N, ..."""
  return [f'{base}-{i:05d}-of-{num_shards:05d}' for i in range(num_shards)]


def split_patterns(patterns):
  """'a,b' or a sequence -> the list of non-empty patterns."""
  if not patterns:
    return []
  if isinstance(patterns, str):
    patterns = [p.strip() for p in patterns.split(',')]
  return [p for p in patterns if p]


def is_remote(path: str) -> bool:
  """Whether `path` names a remote file (`gs://...`): left to tf.io.gfile, never checked locally."""
  return '://' in path


def resolve(pattern: str, data_dir: str = '') -> str:
  """`pattern` relative to `data_dir` when it is relative and `data_dir` is set; else `pattern` as it is."""
  if data_dir and not os.path.isabs(pattern) and not is_remote(pattern):
    return os.path.join(data_dir, pattern)
  return pattern


def resolved_patterns(cfg, fields=('train_files', 'eval_files')) -> list:
  """The patterns of the dataset section's `fields`, in order, each resolved against `cfg.data_dir`."""
  base = cfg.get('data_dir', '') or ''
  return [resolve(p, base) for field in fields for p in split_patterns(cfg.get(field))]


def local_matches(pattern):
  """The existing local files of one pattern (a glob, `base@N` or a path)."""
  m = SHARDED.match(pattern)
  if m:
    return [n for n in shard_names(m.group('base'), int(m.group('n'))) if os.path.exists(n)]
  return sorted(glob.glob(pattern))


def missing_files(cfg, fields=('train_files', 'eval_files')) -> list[str]:
  """One line per dataset files field that matches nothing (remote paths and sources without files are left to
  the reader)."""
  out = []
  if not registry.reads_files(cfg.get('name')):
    return out
  for field in fields:
    pats = split_patterns(cfg.get(field))
    if not pats:
      out.append(f'dataset.{field} is empty: set it to the data files (a glob, base@N, or a video list)')
      continue
    for p in (resolve(p, cfg.get('data_dir', '') or '') for p in pats):
      if is_remote(p):
        continue
      if not local_matches(p):
        where = p if os.path.isabs(p) else f'{p!r} (absolute: {os.path.abspath(p)!r})'
        out.append(f'dataset.{field}: no file matches {where}; write the synthetic set with '
                   '`vvt data synthetic` or point the config at your data')
  return out
