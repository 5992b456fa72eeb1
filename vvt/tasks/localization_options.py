"""The localisation task's options (`task.localization`), their spec and checks: its `check` hook.

Imports neither jax nor flax. The defaults are ActionFormer's THUMOS14 settings (`configs/thumos_i3d.yaml` over
`libs/core/config.py`; docs/recipes.md cites each):

  sequences, annotations      the feature-sequence folder (`vvt features --window`) and the annotation file
  train_subset, eval_subset   the annotations' subsets trained and evaluated ('validation' / 'test' on THUMOS14)
  protocol                    'thumos14' (tIoU 0.3:0.1:0.7) | 'activitynet' (0.5:0.05:0.95): the mAP thresholds
  max_seq_len                 training sequences cropped / padded to it (a multiple of 2^(levels - 1))
  embed_dim, num_heads, window, embed_layers, stem_layers, levels, head_layers, prior_prob   the head
  regression_ranges           (low, high) per pyramid level, in its input steps
  center_radius               center sampling radius, in strides of the level
  trunc_thresh, crop_ratio    the random crop of training sequences
  loss_weight                 the regression loss's weight
  pre_nms_thresh, pre_nms_topk, duration_thresh   inference before NMS, per level
  nms, nms_sigma, iou_threshold, min_score, max_segments, multiclass_nms   NMS (`vvt.tasks.soft_nms`)
"""
from __future__ import annotations

import dataclasses
from typing import Any

from vvt.tasks import base as base_lib
from vvt.tasks import soft_nms
from vvt.tasks import temporal_map

DEFAULTS = dict(
    sequences='', annotations='', train_subset='validation', eval_subset='test', protocol='thumos14',
    max_seq_len=2304, embed_dim=512, num_heads=4, window=19, embed_layers=2, stem_layers=2, levels=6,
    head_layers=3, prior_prob=0.01,
    regression_ranges=((0, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 10000)),
    center_radius=1.5, trunc_thresh=0.5, crop_ratio=(0.9, 1.0), loss_weight=1.0,
    pre_nms_thresh=0.001, pre_nms_topk=2000, duration_thresh=0.05,
    nms='soft', nms_sigma=0.5, iou_threshold=0.1, min_score=0.001, max_segments=200, multiclass_nms=True)
POSITIVE_INTS = ('max_seq_len', 'embed_dim', 'num_heads', 'window', 'levels', 'head_layers', 'pre_nms_topk')
POSITIVE_FLOATS = ('nms_sigma', 'loss_weight')
UNIT_FLOATS = ('trunc_thresh', 'iou_threshold', 'pre_nms_thresh', 'min_score')


@dataclasses.dataclass(frozen=True)
class LocalizationSpec:
  """`config.task.localization`, frozen (the fields of `DEFAULTS`)."""
  sequences: str
  annotations: str
  train_subset: str
  eval_subset: str
  protocol: str
  max_seq_len: int
  embed_dim: int
  num_heads: int
  window: int
  embed_layers: int
  stem_layers: int
  levels: int
  head_layers: int
  prior_prob: float
  regression_ranges: tuple
  center_radius: float
  trunc_thresh: float
  crop_ratio: tuple
  loss_weight: float
  pre_nms_thresh: float
  pre_nms_topk: int
  duration_thresh: float
  nms: str
  nms_sigma: float
  iou_threshold: float
  min_score: float
  max_segments: int
  multiclass_nms: bool

  @classmethod
  def of(cls, section) -> 'LocalizationSpec':
    """The spec of a `task.localization` section (a ConfigDict or dict; missing fields: `DEFAULTS`)."""
    values = {k: _get(section, k, v) for k, v in DEFAULTS.items()}
    values['regression_ranges'] = tuple((float(a), float(b)) for a, b in values['regression_ranges'])
    values['crop_ratio'] = tuple(float(v) for v in values['crop_ratio'] or ())
    return cls(**values)

  @property
  def thresholds(self) -> tuple:
    return temporal_map.PROTOCOLS[self.protocol]

  @property
  def nms_options(self) -> soft_nms.NmsOptions:
    return soft_nms.NmsOptions(method=self.nms, sigma=self.nms_sigma, iou_threshold=self.iou_threshold,
                               min_score=self.min_score, max_segments=self.max_segments,
                               multiclass=bool(self.multiclass_nms))


def _get(obj, name: str, default=None):
  if obj is None:
    return default
  if hasattr(obj, 'get') and not hasattr(obj, '__dataclass_fields__'):
    return obj.get(name, default)
  return getattr(obj, name, default)


def _number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _range_problems(ranges, levels) -> list[str]:
  path = 'task.localization.regression_ranges'
  try:
    pairs = [(float(a), float(b)) for a, b in ranges]
  except (TypeError, ValueError):
    return [f'{path} must be (low, high) pairs, one per pyramid level, got {ranges!r}']
  out = [] if len(pairs) == levels else [f'{path} has {len(pairs)} ranges for {levels} pyramid levels']
  return out + [f'{path}[{i}] = {p}: low must be >= 0 and below high' for i, p in enumerate(pairs)
                if not 0 <= p[0] < p[1]]


def _field_problems(section) -> list[str]:
  out = []
  for name in POSITIVE_INTS:
    v = _get(section, name)
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
      out.append(f'task.localization.{name} must be a positive int, got {v!r}')
  for name in POSITIVE_FLOATS:
    if not _number(_get(section, name)) or _get(section, name) <= 0:
      out.append(f'task.localization.{name} must be a number > 0, got {_get(section, name)!r}')
  for name in UNIT_FLOATS:
    if not _number(_get(section, name)) or not 0 <= _get(section, name) <= 1:
      out.append(f'task.localization.{name} must be a number in [0, 1], got {_get(section, name)!r}')
  for name, lowest in (('embed_layers', 0), ('stem_layers', 0), ('max_segments', 0)):
    v = _get(section, name)
    if not isinstance(v, int) or isinstance(v, bool) or v < lowest:
      out.append(f'task.localization.{name} must be an int >= {lowest}, got {v!r}')
  return out


def option_problems(section) -> list[str]:
  """The problems of a `task.localization` section, one line each naming its field."""
  out = _field_problems(section)
  if _get(section, 'protocol') not in temporal_map.PROTOCOLS:
    out.append(f'task.localization.protocol must be one of {", ".join(map(repr, temporal_map.PROTOCOLS))}, '
               f'got {_get(section, "protocol")!r}')
  if _get(section, 'nms') not in soft_nms.METHODS:
    out.append(f'task.localization.nms must be one of {", ".join(map(repr, soft_nms.METHODS))}, '
               f'got {_get(section, "nms")!r}')
  levels, length = _get(section, 'levels'), _get(section, 'max_seq_len')
  if isinstance(levels, int) and levels >= 1:
    out += _range_problems(_get(section, 'regression_ranges'), levels)
    if isinstance(length, int) and length >= 1 and length % 2 ** (levels - 1):
      out.append(f'task.localization.max_seq_len={length} must be a multiple of 2^(levels - 1) = '
                 f'{2 ** (levels - 1)} (each pyramid level halves it)')
  embed, heads = _get(section, 'embed_dim'), _get(section, 'num_heads')
  if isinstance(embed, int) and isinstance(heads, int) and heads >= 1 and embed % heads:
    out.append(f'task.localization.embed_dim={embed} must be a multiple of num_heads={heads}')
  crop = _get(section, 'crop_ratio')
  if crop and (len(crop) != 2 or not all(_number(v) and 0 < v <= 1 for v in crop) or crop[0] > crop[1]):
    out.append(f'task.localization.crop_ratio must be () or (low, high) with 0 < low <= high <= 1, got {crop!r}')
  return out


def check(config: Any) -> list[str]:
  """The localisation task's `check` hook (`vvt.tasks.base.CheckOptions`)."""
  return option_problems(_get(_get(config, 'task'), 'localization'))


def start_problems(config: Any) -> list[str]:
  """A localisation run reads its feature sequences and annotations: both must be named."""
  section = _get(_get(config, 'task'), 'localization')
  return [f'task.localization.{name} is not set: {what}' for name, what in (
      ('sequences', 'the folder of `vvt features --window` (sequences.json)'),
      ('annotations', 'the annotation file (ActivityNet JSON or THUMOS14)')) if not _get(section, name)]


def summary_note(config: Any) -> str:
  del config
  return ('task localization: the figures above are the video backbone\'s; the ActionFormer head trains on its '
          'frozen feature sequences (task.localization.sequences)')


HOOKS = base_lib.ConfigHooks(check=check, start_problems=start_problems, summary_note=summary_note,
                             runs_on='feature_sequences', result_keys=('average_map', 'map@'))
