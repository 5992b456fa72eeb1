"""A run's classes from its training data: `num_classes` and `class_names` taken from the data's manifest.

    data_class_names(dataset_cfg)        -> (names, where) or (None, None)
    resolve(config, check=False)         -> config, its unset num_classes / class_names filled in

A dataset names its classes where it is written: `vvt data convert --output DIR/train` in
`DIR/train.manifest.json` (`class_names`, from the class list it was given), `vvt data synthetic` in
`DIR/manifest.json` and `DIR/classes.txt`. The training files of a config lead to those:
`DIR/train.tfrecord@16` or `DIR/train.tfrecord-*` -> `DIR/train.manifest.json`, then the folder's
`manifest.json` and `classes.txt`; a video list (`DIR/train.csv`, `dataset.name='video_folder'`) names its
classes in the `classes.txt` beside it, else by its labels' set (a list of paths only, or a folder of videos, names
none); where the training files have none, those of
the evaluation files do.
The synthetic motion data (`schema.SYNTHETIC_DIR`) names its classes before
it is written (`loader.ensure_synthetic` writes it on first use).

A config whose `num_classes` (0) or `class_names` (None) is unset takes the data's; one that sets them and
disagrees with the data is refused with one line naming both (`check`: where the data is the run's, i.e.
training; evaluation and prediction read the run's saved config, which holds what training resolved).
Multi-head configs (a dict `num_classes`) are left as they are. Reads files only, no TensorFlow.
"""
import os

from vvt.config import schema
from vvt.config.errors import ConfigError
from vvt.data import is_remote
from vvt.data import is_unlabelled_list
from vvt.data import is_video_list
from vvt.data import manifest_class_names
from vvt.data import read_class_list
from vvt.data import reads_files
from vvt.data import resolved_patterns
from vvt.data import video_list_class_names


def _local_patterns(cfg) -> list:
  """The dataset's local file patterns, training files first, then evaluation files, with data_dir joined."""
  return [p for p in resolved_patterns(cfg) if not is_remote(p)]


def _candidates(pattern: str) -> list:
  """Files that may name the classes of the records of `pattern`, most specific first."""
  folder, name = os.path.split(pattern)
  out = []
  if is_video_list(name):
    out.append(pattern)  # a video list: its classes.txt, else its labels' set
    if is_unlabelled_list(pattern):
      return out  # a list of paths only names no classes (not a classes.txt beside it)
  elif '.tfrecord' in name:
    out.append(os.path.join(folder, name[:name.index('.tfrecord')] + '.manifest.json'))
  out += [os.path.join(folder, 'manifest.json'), os.path.join(folder, 'classes.txt')]
  return out


def _read_names(path: str):
  if is_video_list(path):
    return video_list_class_names(path) if os.path.isfile(path) else None
  if path.endswith('.json'):
    return manifest_class_names(path) if os.path.isfile(path) else None
  return read_class_list(path)


def data_class_names(cfg):
  """(tuple of class names, the file that names them) of the dataset section `cfg`, or (None, None)."""
  if cfg is None or not reads_files(getattr(cfg, 'name', None)):
    return None, None
  pats = _local_patterns(cfg)
  for pattern in pats:
    if cfg.name == 'video_folder' and os.path.isdir(pattern):
      continue  # a folder of videos names no classes (unlabelled)
    for path in _candidates(pattern):
      found = _read_names(path)
      if found:
        return tuple(found), path
  if any(os.path.normpath(p).startswith(os.path.normpath(schema.SYNTHETIC_DIR) + os.sep) for p in pats):
    return tuple(schema.SYNTHETIC_CLASS_NAMES), f'{schema.SYNTHETIC_DIR}: the synthetic motion data'
  return None, None


def _shown(names) -> str:
  names = tuple(names)
  return repr(names) if len(names) <= 8 else f"({', '.join(map(repr, names[:6]))}, ... {len(names)} names)"


def resolve(config, check: bool = False):
  """Fills an unset `num_classes` / `class_names` of the run `config` from its data's class names (in place).

  With `check`, set values that disagree with the data raise ConfigError naming both. Returns `config`.
  """
  nc = config.get('num_classes')
  if hasattr(nc, 'items'):
    return config
  names, where = data_class_names(config.get('dataset'))
  if names is None:
    return config
  if not nc:
    config.num_classes = nc = len(names)
  elif check and int(nc) != len(names):
    both = ' --config.class_names=None' if config.get('class_names') else ''
    raise ConfigError(f'num_classes={nc} but the training data has {len(names)} classes {_shown(names)} '
                      f'({where}): add --config.num_classes=0{both} to take the data\'s (0: unset), or point the '
                      'config at other data')
  set_names = config.get('class_names')
  if not set_names:
    if int(nc) == len(names):
      config.class_names = names
  elif check and tuple(set_names) != names:
    raise ConfigError(f'class_names {_shown(set_names)} differ from the training data\'s {_shown(names)} '
                      f'({where}): add --config.class_names=None to take the data\'s, or give the data\'s')
  return config
