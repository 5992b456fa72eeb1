"""File patterns of a dataset, without TensorFlow: sharded names, pattern lists, the early existence check.

A pattern is a glob (`dir/train-*.tfrecord`), a sharded name (`dir/train.tfrecord@16` ->
`dir/train.tfrecord-00000-of-00016` ...), an exact path, or a comma-separated list / sequence of those.
`vvt.data.sources` reads them (through tf.io.gfile, so remote paths work); `missing_files` lets a command
name a missing local dataset path in its first second.
"""
import glob
import os
import re

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


def local_matches(pattern):
  """The existing local files of one pattern (a glob, `base@N` or a path)."""
  m = SHARDED.match(pattern)
  if m:
    return [n for n in shard_names(m.group('base'), int(m.group('n'))) if os.path.exists(n)]
  return sorted(glob.glob(pattern))


def missing_files(cfg, fields=('train_files', 'eval_files')) -> list[str]:
  """One line per dataset files field that matches nothing (remote paths and TFDS are left to the reader)."""
  out = []
  if cfg.get('name') == 'tfds':
    return out
  for field in fields:
    pats = split_patterns(cfg.get(field))
    if not pats:
      out.append(f'dataset.{field} is empty: set it to the TFRecord files (glob or base@N)')
      continue
    base = cfg.get('data_dir', '') or ''
    for p in pats:
      if '://' in p:
        continue
      if base and not os.path.isabs(p):
        p = os.path.join(base, p)
      if not local_matches(p):
        where = p if os.path.isabs(p) else f'{p!r} (absolute: {os.path.abspath(p)!r})'
        out.append(f'dataset.{field}: no file matches {where}; write the synthetic set with '
                   '`vvt data synthetic` or point the config at your TFRecords')
  return out
