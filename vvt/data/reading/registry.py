"""The sources by `dataset.name`: which module reads each, loaded only when a source is made (no TensorFlow here).

    make_source(cfg, split)   -> the `Source` (vvt.data.reading.source) of `split` for cfg.name
    SOURCES                   the names `dataset.name` takes (vvt.data.choices, the config validation)

A source is one module with one class that satisfies `vvt.data.reading.source.Source`; adding one is that module,
one line in `SOURCES` and its tests. Entries are 'module:Class' strings, so this table (and the config validation
that reads its names) imports without TensorFlow.
"""
import dataclasses
import importlib


@dataclasses.dataclass(frozen=True)
class Entry:
  """Where a source's class lives ('module:Class') and whether it reads dataset.train_files / eval_files (the
  files the commands check for before any work)."""
  target: str
  reads_files: bool = True


SOURCES = {
    'dmvr': Entry('vvt.data.reading.dmvr:DmvrSource'),                        # TFRecords of SequenceExamples
    'tfds': Entry('vvt.data.reading.tfds:TfdsSource', reads_files=False),     # a prepared TFDS dataset
    'video_folder': Entry('vvt.data.reading.video_folder:VideoFolderSource'),  # video files listed in a CSV
}


def _entry(name) -> Entry:
  if name not in SOURCES:
    raise ValueError(f'dataset.name must be one of {tuple(SOURCES)}, got {name!r}')
  return SOURCES[name]


def reads_files(name) -> bool:
  """Whether source `name` reads dataset.train_files / eval_files (an unknown name: True, checked elsewhere)."""
  return SOURCES[name].reads_files if name in SOURCES else True


def source_class(name):
  """The class of source `name` (its module imported now)."""
  module, cls = _entry(name).target.split(':')
  return getattr(importlib.import_module(module), cls)


def make_source(cfg, split):
  """The source of `split` ('train' or an eval split) for the dataset section `cfg` (cfg.name)."""
  return source_class(cfg.name)(cfg, split)
