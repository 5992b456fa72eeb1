"""The resolved model, as the Flax modules read it: `ModelSpec`, every field explicit (no defaults, no derivation).

    spec = spec_of(resolve(cfg))      # what vvt.models.build hands the modules

`spec_of` is the one place that turns a resolved model config (vvt/models/config.py) into module fields: scheme
stages and projections from the scheme table (vvt/models/schemes.py), the token grid, X-ViT's segments in temporal
indices, the class token None with a GAP classifier. The modules take these fields and nothing else. The module
imports neither JAX nor Flax (a run's specs are resolved before they load, `vvt.config.run_spec`): dtypes are
their names ('float32' | 'bfloat16'), which the modules turn into JAX dtypes (`vvt.models.video_transformer`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from vvt.models import frame_size
from vvt.models import schemes
from vvt.models.config import token_grid
from vvt.models.pe_video_config import PeVideoSpec
from vvt.models.pe_video_config import spec_of as pe_video_spec_of


@dataclasses.dataclass(frozen=True)
class Mixing:
  """X-ViT space-time mixing (eq. 9) of keys and values: temporal window t_w, 1/shift_div of the channels from
  each neighbour, summary tokens, and num_segments temporal indices per segment (None: all)."""
  window: int
  shift_div: int
  summary_token: bool = False
  num_segments: int | None = None


@dataclasses.dataclass(frozen=True)
class TemporalHeadSpec:
  """X-ViT's temporal-attention (TA) head: its transformer layers and its classifier's hidden layer."""
  num_layers: int
  num_heads: int
  mlp_dim: int  # the TA blocks' MLP width: mlp_ratio * hidden_size
  qkv_bias: bool
  layer_norm_eps: float
  hidden_dim: int | None  # the classifier's hidden layer (model.temporal_head.mlp_dim; None: none)


@dataclasses.dataclass(frozen=True)
class PoolerSpec:
  """The attentive pooler of classifier='attentive' (vvt/models/poolers.py; model.attentive_pooler)."""
  num_queries: int
  num_heads: int
  head_dim: int  # per-head width of the cross-attention's q, k, v
  depth: int  # self-attention blocks over the tokens before the queries attend
  mlp_dim: int  # MLP width of those blocks and of the 'block' cross-attention
  cross_attention: str  # 'block' (V-JEPA 2) | 'plain' (VideoPrism)
  per_dim_scale: bool  # VideoPrism's learned per-dimension query scale


@dataclasses.dataclass(frozen=True)
class TextSpec:
  """The text tower of a video-text model (model.text, vvt/models/text_config.py), its numerics the model's."""
  family: str  # 'videoprism'
  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  mlp_dim: int
  max_length: int  # the tokens a text is padded / truncated to: the rows of the position table
  activation: str  # 'relu' | 'gelu' | 'gelu_tanh'
  layer_norm_eps: float
  attention_logit_cap: float | None
  causal: bool
  normalize: bool  # both embeddings L2-normalised
  logit_scale: float  # initial log scale of the similarity logits
  logit_bias: float | None  # initial bias of the similarity logits (None: no bias)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
  """Every field the modules of one model read (field names as in the model config where they are its own)."""
  family: str
  attention: str
  stages: tuple[str, ...]  # of one block (attention_order applied)
  projected: tuple[bool, ...]  # per stage: TimeSformer's extra projection
  num_frames: int
  image_size: tuple[int, int]  # (H, W) of a frame
  tubelet: tuple[int, int, int]
  grid: tuple[int, int, int]  # (n_t, n_h, n_w)
  hidden_size: int
  num_layers: int
  num_heads: int
  mlp_dim: int
  num_classes: Any  # int, or ((head, classes), ...) for several heads
  classifier: str  # 'token' | 'gap'
  pooling: str  # with classifier 'gap': 'mean' | 'mean_then_norm' | 'first_token'
  class_token: str | None  # 'global' | 'per_frame'; None with classifier 'gap'
  positional_embedding: str
  time_embedding_rows: int | None
  temporal_layers: int
  temporal_num_heads: int
  temporal_mlp_dim: int
  mixing: Mixing | None  # X-ViT space-time mixing, num_segments in temporal indices; None for other schemes
  frame_aggregation: str
  temporal_head: TemporalHeadSpec
  representation_size: int | None
  dropout_rate: float
  attention_dropout_rate: float
  stochastic_depth: float
  layer_norm_eps: float
  gelu_approximate: bool
  qkv_bias: bool
  key_bias: bool  # the key projection's bias, where qkv_bias
  encoder_norm_eps: float  # eps of the final LayerNorm
  dtype: str  # compute dtype: 'float32' | 'bfloat16'
  param_dtype: str  # the parameters' dtype, same names
  attention_impl: str
  remat: str
  scan_layers: bool
  attention_logit_cap: float | None  # VideoPrism's tanh cap of the encoders' attention scores (None: none)
  layer_norm_scale_offset: float  # every LayerNorm multiplies by offset + scale (VideoPrism: 1)
  pos_table_grid: tuple[int, int, int] | None  # the grid the learned tables were trained at (resized at run time)
  attentive_pooler: PoolerSpec | None  # classifier='attentive' only
  text: TextSpec | None = None  # a video-text model's text tower (then num_classes is None: no classifier head)
  pe_video: PeVideoSpec | None = None  # family 'pe_video': the towers `PeVideoText` is built from


def _num_classes(value):
  """An int, or a dict of heads as ((head, classes), ...) in the config's order (hashable)."""
  return value if isinstance(value, int) else tuple((str(k), int(v)) for k, v in dict(value).items())


def _mixing(cfg, scheme: schemes.Scheme) -> Mixing | None:
  if not scheme.temporal_mixing:
    return None
  frames_per_segment = cfg.mixing.num_segments or cfg.num_frames
  return Mixing(window=cfg.mixing.window, shift_div=cfg.mixing.shift_div, summary_token=bool(cfg.mixing.summary_token),
                num_segments=frames_per_segment // cfg.tubelet[0])


def _pooler(cfg) -> PoolerSpec | None:
  if cfg.classifier != 'attentive':
    return None
  p = cfg.attentive_pooler
  return PoolerSpec(num_queries=p.num_queries, num_heads=p.num_heads, head_dim=p.head_dim, depth=p.depth,
                    mlp_dim=p.mlp_dim, cross_attention=p.cross_attention, per_dim_scale=bool(p.per_dim_scale))


def _text(cfg) -> TextSpec | None:
  t = cfg.get('text')
  return None if t is None else TextSpec(**{f.name: t[f.name] for f in dataclasses.fields(TextSpec)})


def spec_of(cfg) -> ModelSpec:
  """The ModelSpec of a resolved model config (`vvt.models.resolve`)."""
  scheme = schemes.get(cfg.attention)
  stages = scheme.stages_for(cfg.attention_order)
  head = cfg.temporal_head
  return ModelSpec(
      family=cfg.family, attention=cfg.attention, stages=stages,
      projected=schemes.projected_stages(stages, cfg.temporal_projection), num_frames=cfg.num_frames,
      image_size=frame_size.parse(cfg.image_size), tubelet=tuple(cfg.tubelet), grid=tuple(token_grid(cfg)),
      hidden_size=cfg.hidden_size, num_layers=cfg.num_layers, num_heads=cfg.num_heads, mlp_dim=cfg.mlp_dim,
      num_classes=None if cfg.get('text') is not None else _num_classes(cfg.num_classes), classifier=cfg.classifier,
      pooling=cfg.pooling, class_token=cfg.class_token if cfg.classifier == 'token' else None,
      positional_embedding=cfg.positional_embedding, time_embedding_rows=cfg.time_embedding_rows,
      temporal_layers=cfg.temporal_layers, temporal_num_heads=cfg.temporal_num_heads,
      temporal_mlp_dim=cfg.temporal_mlp_dim, mixing=_mixing(cfg, scheme), frame_aggregation=cfg.frame_aggregation,
      temporal_head=TemporalHeadSpec(num_layers=head.num_layers, num_heads=head.num_heads,
                                     mlp_dim=head.mlp_ratio * cfg.hidden_size, qkv_bias=head.qkv_bias,
                                     layer_norm_eps=head.layer_norm_eps, hidden_dim=head.mlp_dim),
      representation_size=cfg.representation_size, dropout_rate=cfg.dropout_rate,
      attention_dropout_rate=cfg.attention_dropout_rate, stochastic_depth=cfg.stochastic_depth,
      layer_norm_eps=cfg.layer_norm_eps, gelu_approximate=cfg.gelu_approximate, qkv_bias=cfg.qkv_bias,
      key_bias=cfg.key_bias, encoder_norm_eps=cfg.encoder_norm_eps, dtype=cfg.dtype,
      param_dtype=cfg.param_dtype, attention_impl=cfg.attention_impl,
      remat=cfg.remat, scan_layers=cfg.scan_layers, attention_logit_cap=cfg.attention_logit_cap,
      layer_norm_scale_offset=float(cfg.layer_norm_scale_offset),
      pos_table_grid=None if cfg.pos_table_grid is None else tuple(cfg.pos_table_grid), attentive_pooler=_pooler(cfg),
      text=_text(cfg), pe_video=None if cfg.get('pe_video') is None else pe_video_spec_of(cfg.pe_video))
