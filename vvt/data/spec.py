"""`DataSpec`: the dataset section of a run config as the input pipeline reads it, every field explicit (no
TensorFlow; a run's `data`, vvt.config.run_spec).

    spec = DataSpec.of(config.dataset, class_names=config.class_names)

The fields are those of the dataset section (their defaults and meaning: vvt.config.dataset, docs/data.md), read
once as they are, plus the run's `class_names`. Dict values (multi-head `label_keys` / `num_classes`,
`randaugment`) are read-only mappings, sequences tuples. The pipeline (`vvt.data.pipeline`), the sources
(`vvt.data.reading`) and the transforms read these attributes and nothing else, so a dataset section with the
same fields (a config's, before it is resolved: the config layer's checks of the files and the classes) reads
alike.
"""
from __future__ import annotations

import dataclasses
import types
from typing import Any, Optional

from vvt.models import frame_size


@dataclasses.dataclass(frozen=True)
class DataSpec:
  """The dataset section, frozen (field comments: vvt.config.dataset)."""
  # where the data is
  name: str
  data_dir: str
  train_files: Any           # a pattern ('a,b' allowed) or a sequence of them
  eval_files: Any
  tfds_name: str
  tfds_train_split: str
  tfds_video_key: str
  tfds_label_keys: Any       # a key, or head -> key
  # the record format
  frames_key: str
  label_keys: Any            # a key (or a 1-tuple), or head -> key
  video_id_key: str
  num_classes: Any           # int, or head -> int
  multi_label: bool          # several labels per record -> a multi-hot 'label' (C,) (task 'multilabel')
  captions: int              # the captions read per video ('caption' (K,) strings, padded with ''); 0: none
  tokenizer: str             # the folder of the texts' tokenizer.json ('': the checkpoint's, vvt.train.texts)
  # temporal sampling
  num_frames: int
  stride: int
  sampling: str
  short_video_policy: str
  fps: Optional[float]
  num_test_clips: Any        # int, or 'all' (each whole video tiled)
  # spatial
  image_size: tuple[int, int]  # (H, W) of the frames fed to the model (the section's int S: (S, S); the
                               # transforms read either, through vvt.models.frame_size.parse)
  train_min_resize: int
  train_max_resize: int
  eval_resize: int
  num_spatial_crops: int
  # augmentation (training)
  horizontal_flip: bool
  label_aware_flip: bool
  color_jitter: float
  color_jitter_prob: float
  randaugment: Any           # None, or {'num_layers', 'magnitude'}
  autoaugment: Optional[str]
  random_erasing: float
  repeated_augmentation: int
  normalization: str
  # reading
  shuffle_buffer: int
  cache: bool
  cycle_length: int
  prefetch: int
  on_error: str
  seed: int
  # the run's
  class_names: Optional[tuple]  # names in label order (config.class_names); None: the dataset's own, if any

  @classmethod
  def of(cls, section, class_names=None) -> 'DataSpec':
    """The DataSpec of a validated dataset section (a ConfigDict) and the run's `class_names`."""
    values = {f.name: _frozen(section[f.name], f.type) for f in dataclasses.fields(cls) if f.name != 'class_names'}
    values['image_size'] = frame_size.parse(section['image_size'], 'dataset.image_size')
    return cls(**values, class_names=None if class_names is None else tuple(class_names))


def require(spec, what: str) -> None:
  """TypeError unless `spec` is a DataSpec: `what` (an entrance past the config boundary, e.g. 'the data pipeline')
  takes a run's DataSpec, never the dataset section it was resolved from."""
  if not isinstance(spec, DataSpec):
    raise TypeError(f'{what} takes a DataSpec (vvt.data.spec.DataSpec.of a validated dataset section), '
                    f'not {type(spec).__name__}')


def fields() -> tuple:
  """The names of the dataset section's fields that a DataSpec holds (all but the run's `class_names`)."""
  return tuple(f.name for f in dataclasses.fields(DataSpec) if f.name != 'class_names')


def _frozen(value, kind: str):
  """`value` as its field reads it: a scalar of the field's type, a read-only mapping, or a tuple."""
  scalar = {'int': int, 'float': float, 'bool': bool, 'str': str}.get(kind)
  if scalar is not None:
    return scalar(value)
  if hasattr(value, 'items'):
    return types.MappingProxyType({k: _frozen(v, 'Any') for k, v in value.items()})
  if isinstance(value, (list, tuple)):
    return tuple(_frozen(v, 'Any') for v in value)
  return value
