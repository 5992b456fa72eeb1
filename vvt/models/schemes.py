"""The attention schemes of ViViT, TimeSformer and X-ViT: one record each, everything the package knows of it.

A scheme is a sequence of attention stages per encoder block, each stage one grouping of the (B, T, N, D) tokens
(vvt/models/groupings.py) run through the one attention primitive (ViViT's figures numbered as in its ICCV version):

  spatiotemporal             ViViT Model 1 (sec. 3.3, eq. 7)    joint
  factorised_encoder         ViViT Model 2 (sec. 3.3, Fig. 4)   a spatial encoder (joint within each temporal
                                                               index), then a temporal encoder over frames
  factorised_self_attention  ViViT Model 3 (Fig. 5, eq. 9-10)   space, time (attention_order='time_space': time,
                                                               space)
  factorised_dot_product     ViViT Model 4 (Fig. 1)             half of the heads in space, half in time
  space                      TimeSformer Fig. 1 'S'             space
  joint                      TimeSformer Fig. 1 'ST'            joint
  divided                    TimeSformer Fig. 1 'T+S' (eq. 6-8) time, space (temporal first, as the paper)
  local_global               TimeSformer Fig. 1 'L+G'           local, global
  axial                      TimeSformer Fig. 1 'T+W+H'         time, width, height
  space_time_mixing          X-ViT eq. 9-10                     space, keys and values shifted in time
  space_then_time            VideoPrism (sec. 3.2)              a spatial encoder (joint within each temporal
                                                               index), then a temporal encoder over the n_t
                                                               tokens of every spatial position: all n_t * N
                                                               tokens kept (ViViT Model 2 pools each frame to
                                                               one token first)

`SCHEME_TABLE` holds the records; `vvt.models.config.resolve` (class-token rules, classifiers, grid and head
constraints), `vvt.models.spec.spec_of` (a block's stages), `vvt.convert.image_init` (the stage that receives the
image ViT's attention) and the attention maps (`vvt.inspection.attention_maps`) read them. A scheme
that only regroups tokens is one record here (with a new `groupings.GROUPINGS` row if it needs a new
neighbourhood) and its neighbourhood test (tests/models/test_neighbourhoods.py).

Importing this module imports no JAX (the config functions stay fast).
"""
from __future__ import annotations

import dataclasses
import math

from vvt.models import groupings

FAMILIES = ('vivit', 'timesformer', 'xvit', 'pe_video')  # pe_video: vvt/models/pe_video_config.py
CLASSIFIERS = ('token', 'gap', 'attentive')  # attentive: the attentive pooler (vvt/models/poolers.py)
CLASS_TOKENS = ('global', 'per_frame')
ATTENTION_ORDERS = ('space_time', 'time_space')
# The class token of a family where the scheme states none for it (X-ViT: one per frame, for its TA head).
FAMILY_CLASS_TOKEN = {'xvit': 'per_frame'}


@dataclasses.dataclass(frozen=True)
class Scheme:
  """One attention scheme (see the module docstring)."""
  name: str  # model.attention
  families: tuple[str, ...]  # the papers that define it; the first is its paper
  paper: str  # where it is defined, for messages and docs
  stages: tuple[str, ...]  # stages of one block in order (groupings or HEAD_SPLITS names): the parameter names
  reorderable: bool = False  # attention_order='time_space' reverses `stages` (ViViT Model 3 only)
  class_token: bool = True  # may have a class token (classifier='token'); False: classifier='gap' only
  per_frame_class_token: bool = False  # a per-frame class token (part of each frame's N tokens) is allowed
  class_token_defaults: tuple[tuple[str, str], ...] = ()  # (family, class_token) where not 'global'
  image_stage: str | None = None  # the stage given the image ViT's attention at image-init (None: stages[-1])
  temporal_mixing: bool = False  # X-ViT: keys and values shifted in time (eq. 9) before `space` attention
  two_encoders: bool = False  # ViViT Model 2: spatial encoder, then temporal encoder (stages of each)
  # two_encoders: the temporal encoder runs over the n_t tokens of every spatial position, keeping all tokens
  # (VideoPrism), not over one pooled token per temporal index (ViViT Model 2)
  temporal_over_positions: bool = False

  def stages_for(self, attention_order: str = 'space_time') -> tuple[str, ...]:
    """The stages of one block for `model.attention_order` (only a reorderable scheme reverses them)."""
    if self.reorderable and attention_order == 'time_space':
      return tuple(reversed(self.stages))
    return self.stages

  @property
  def classifiers(self) -> tuple[str, ...]:
    return CLASSIFIERS if self.class_token else tuple(c for c in CLASSIFIERS if c != 'token')

  @property
  def stage_for_image(self) -> str:
    """The stage that receives the image ViT's attention and LayerNorm at image-init."""
    return self.image_stage or self.stages[-1]

  def default_class_token(self, family: str) -> str:
    """model.class_token when the config leaves it None."""
    return dict(self.class_token_defaults).get(family, FAMILY_CLASS_TOKEN.get(family, 'global'))

  @property
  def groupings(self) -> tuple[str, ...]:
    """Every grouping of the scheme's stages (a head-split stage contributes each of its groupings)."""
    return tuple(g for stage in self.stages for g in groupings.head_groupings(stage))

  @property
  def grid_multiple(self) -> tuple[int, int, int]:
    """(t, h, w) multiples the token grid must have for every grouping of the scheme."""
    multiples = [groupings.GROUPINGS[g].grid_multiple for g in self.groupings]
    return tuple(math.lcm(*axis) for axis in zip(*multiples, strict=True))

  @property
  def head_multiple(self) -> int:
    """num_heads must be a multiple of this: the most groupings a stage splits its heads among."""
    return max(len(groupings.head_groupings(s)) for s in self.stages)


SCHEME_TABLE = {s.name: s for s in (
    Scheme('spatiotemporal', ('vivit',), 'ViViT Model 1', ('joint',)),
    Scheme('factorised_encoder', ('vivit',), 'ViViT Model 2', ('joint',), two_encoders=True),
    Scheme('factorised_self_attention', ('vivit',), 'ViViT Model 3', ('space', 'time'), reorderable=True,
           class_token=False, image_stage='space'),
    Scheme('factorised_dot_product', ('vivit',), 'ViViT Model 4', ('factorised_dot_product',), class_token=False),
    Scheme('space', ('timesformer',), "TimeSformer 'S'", ('space',), per_frame_class_token=True,
           class_token_defaults=(('timesformer', 'per_frame'),)),
    Scheme('joint', ('timesformer',), "TimeSformer 'ST'", ('joint',), per_frame_class_token=True),
    Scheme('divided', ('timesformer',), "TimeSformer 'T+S'", ('time', 'space'), image_stage='space'),
    Scheme('local_global', ('timesformer',), "TimeSformer 'L+G'", ('local', 'global')),
    Scheme('axial', ('timesformer',), "TimeSformer 'T+W+H'", ('time', 'width', 'height')),
    Scheme('space_time_mixing', ('xvit',), 'X-ViT eq. 9-10', ('space',), per_frame_class_token=True,
           temporal_mixing=True),
    Scheme('space_then_time', ('vivit',), 'VideoPrism sec. 3.2', ('joint',), class_token=False, two_encoders=True,
           temporal_over_positions=True),
)}
SCHEMES = tuple(SCHEME_TABLE)


def get(name: str) -> Scheme:
  """The record of scheme `name` (ValueError naming model.attention for an unknown one)."""
  if name not in SCHEME_TABLE:
    raise ValueError(f'model.attention must be one of {SCHEMES}, got {name!r}')
  return SCHEME_TABLE[name]


def projected_stages(stages, temporal_projection: bool) -> tuple[bool, ...]:
  """Which stages carry TimeSformer's extra projection (`{stage}_projection`, its temporal_fc): every stage added
  to the image ViT's one, i.e. all but the last (which keeps the pretrained attention). Table 1 of TimeSformer
  counts them in its parameters."""
  if not temporal_projection or len(stages) == 1:
    return (False,) * len(stages)
  return tuple(i < len(stages) - 1 for i in range(len(stages)))
