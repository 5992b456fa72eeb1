"""Model families: one module for every single-encoder scheme, one for ViViT's factorised encoder (Model 2).

VideoTransformer  (B, T, H, W, 3) -> tokens (B, n_t, N, D) -> Encoder(stages of the scheme) -> head
  ViViT Model 1 (spatiotemporal), Model 3 (factorised_self_attention), Model 4 (factorised_dot_product);
  TimeSformer space / joint / divided / local_global / axial; X-ViT space_time_mixing.
FactorisedEncoder (ViViT Model 2, sec. 3.3): a spatial encoder shared over the n_t temporal indices, then a
  temporal encoder over the n_t frame representations (temporal_layers = 0: average-pool baseline).
SpaceThenTime     (VideoPrism, attention='space_then_time'): the same spatial encoder, then a temporal encoder over
  the n_t tokens of every spatial position, all n_t * N tokens kept to the head.
Any of them may classify with the attentive pooler (classifier='attentive', vvt/models/poolers.py) over all the
normalised tokens. Every family returns the logits, or with `outputs=(...)` the named outputs asked for (the
tokens after any block, the final-normed tokens, the pooled representation, the logits: vvt/models/outputs.py).
"""
from __future__ import annotations

import math
from typing import Any

import chex
import flax.linen as nn
import jax.numpy as jnp

from vvt.models import frame_size
from vvt.models import masking
from vvt.models import norms
from vvt.models import outputs as outputs_lib
from vvt.models.blocks import Encoder
from vvt.models.embedding import PositionalEmbedding
from vvt.models.embedding import TubeletEmbedding
from vvt.models.heads import ClassifierHead
from vvt.models.heads import TemporalAttentionHead
from vvt.models.poolers import AttentivePooler
from vvt.models.spec import ModelSpec

# ModelSpec's dtype names (model.dtype, model.param_dtype) -> the JAX dtypes the modules compute and store in.
DTYPES = {'float32': jnp.float32, 'bfloat16': jnp.bfloat16}


def dtypes(spec: ModelSpec) -> tuple:
  """(compute dtype, parameter dtype) of the model as JAX dtypes."""
  return DTYPES[spec.dtype], DTYPES[spec.param_dtype]


def check_video(video, num_frames: int, image_size: tuple[int, int]) -> None:
  """The model boundary: video must be (B, T, H, W, 3) with T = model.num_frames, (H, W) = model.image_size."""
  h, w = image_size
  expected = (None, num_frames, h, w, 3)
  message = (f'video input must be (B, T, H, W, 3) = (B, {num_frames}, {h}, {w}, 3) for model.num_frames='
             f'{num_frames}, model.image_size={frame_size.config_value(image_size)}; got {tuple(video.shape)}')
  chex.assert_rank(video, 5, custom_message=message)
  chex.assert_shape(video, expected, custom_message=message)


def check_kept(spec: ModelSpec, kept) -> None:
  """A masked call (`kept` not None) of a scheme that cannot drop tokens is a ValueError saying why."""
  if kept is not None:
    why = masking.refusal(spec.attention, spec.class_token, spec.classifier)
    if why:
      raise ValueError(why)


def block_fields(spec: ModelSpec, stages, grid, *, num_heads=None, mlp_dim=None, mixing=None, projected=None,
                 backend=None, rope=False) -> dict:
  """The EncoderBlock fields of one encoder of the model (projected: per stage, default none; rope: V-JEPA 2's
  3D RoPE in its attention, the main encoder of positional_embedding='rope' only)."""
  return dict(
      stages=tuple(stages), projected=tuple(projected or (False,) * len(stages)), grid=tuple(grid),
      num_heads=num_heads or spec.num_heads, mlp_dim=mlp_dim or spec.mlp_dim, mixing=mixing,
      qkv_bias=spec.qkv_bias, key_bias=spec.key_bias, layer_norm_eps=spec.layer_norm_eps,
      gelu_approximate=spec.gelu_approximate,
      dropout_rate=spec.dropout_rate, attention_dropout_rate=spec.attention_dropout_rate, dtype=dtypes(spec)[0],
      param_dtype=dtypes(spec)[1], attention_impl=spec.attention_impl, backend=backend, rope=rope,
      logit_cap=spec.attention_logit_cap, layer_norm_scale_offset=spec.layer_norm_scale_offset)


class SpaceTimeEncoder(nn.Module):
  """Class token + positional embedding + encoder blocks + final LayerNorm over tokens (B, T, N, D).

  class_token: 'global' (one (1, 1, D) token, `cls`), 'per_frame' (the same token prepended to every
  temporal index, so tokens become (B, T, 1 + N, D)), or None. Returns (tokens, cls) before the final norm,
  the final LayerNorm for the caller's pooling, and {i: tokens after block i} of the blocks in `keep`.

  kept (B, K): the tokens (indices into the flattened T x N of the grid `block['grid']`) the blocks run on; x is
  then those tokens only, (B, K, D) (`TubeletEmbedding` with `kept`), to which the positional embedding's rows at
  `kept` are added, laid out (B, 1, K, D) (joint attention) or (B, T, K / T, D) (a tube mask of a factorised
  scheme); RoPE rotates them by their own positions (vvt/models/masking.py).
  """
  block: dict  # EncoderBlock fields of every layer (`block_fields`)
  num_layers: int
  class_token: str | None
  positional_embedding: str
  time_embedding_rows: int | None
  dropout_rate: float
  stochastic_depth: float
  remat: Any
  scan_layers: bool
  layer_norm_eps: float
  dtype: Any
  param_dtype: Any
  layer_norm_scale_offset: float = 0.0  # VideoPrism's LayerNorm (vvt/models/norms.py)
  pos_table_grid: tuple[int, int, int] | None = None  # grid of a learned table resized to block['grid']
  keep: tuple = ()  # the blocks whose tokens the call also returns (`Encoder.keep`)

  @nn.compact
  def __call__(self, x, train: bool = False, kept=None):
    b, d = x.shape[0], x.shape[-1]
    t, n = (x.shape[1], x.shape[2]) if kept is None else (self.block['grid'][0], math.prod(self.block['grid'][1:]))
    cls = None
    if self.class_token is not None:
      token = self.param('cls', nn.initializers.zeros, (1, 1, d), self.param_dtype).astype(x.dtype)
      if self.class_token == 'global':
        cls = jnp.broadcast_to(token, (b, 1, d))
      else:
        x = jnp.concatenate([jnp.broadcast_to(token[:, None], (b, t, 1, d)), x], axis=2)
    posembed = PositionalEmbedding(self.positional_embedding, time_rows=self.time_embedding_rows,
                                   param_dtype=self.param_dtype, table_grid=self.pos_table_grid,
                                   grid=tuple(self.block['grid']), name='posembed')
    positions = None
    if kept is None:
      x, cls = posembed(x, cls)
    else:  # the table's rows at the kept tokens: (tokens + table)[kept] = tokens[kept] + table[kept]
      table, cls = posembed(jnp.zeros((1, t, n, d), x.dtype), cls)
      rows = t if masking.tube_only(self.block['stages']) else 1
      at = masking.table_rows(table[0], kept, rows)  # (B, rows, K / rows, D)
      x = x.reshape(at.shape) + at
      positions = kept.astype(jnp.int32).reshape(x.shape[:3]) if self.block['rope'] else None
    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
    x, cls, saved = Encoder(self.num_layers, self.block, self.stochastic_depth, self.remat, self.scan_layers,
                            self.keep, name='layers')(x, cls, train, positions)
    self.sow('intermediates', 'tokens', x)  # (B, T, N, D) before the final norm: features, and FLOP counts.
    norm = norms.layer_norm(self.layer_norm_eps, self.dtype, self.param_dtype, 'encoder_norm',
                            self.layer_norm_scale_offset)
    return x, cls, norm, saved


def encoder(spec: ModelSpec, block: dict, num_layers: int, class_token, positional_embedding: str,
            time_embedding_rows=None, *, name: str, pos_table_grid=None, keep=()) -> SpaceTimeEncoder:
  """A SpaceTimeEncoder of the model, its regularisation, memory and numerics fields from `spec`."""
  return SpaceTimeEncoder(block, num_layers, class_token, positional_embedding, time_embedding_rows,
                          spec.dropout_rate, spec.stochastic_depth, spec.remat, spec.scan_layers,
                          spec.encoder_norm_eps, *dtypes(spec), spec.layer_norm_scale_offset,
                          pos_table_grid, tuple(keep), name=name)


def pool(x, cls, norm, classifier: str, pooling: str = 'mean'):
  """Video representation (B, D) of tokens x (B, T, N, D): the normalised class token ('token'), else by
  `pooling` the mean of the normalised tokens ('mean'), the normalised mean of the tokens ('mean_then_norm':
  VideoMAE's fc_norm), or the normalised first token ('first_token': VideoMAE without mean pooling)."""
  if classifier == 'token':
    return norm(cls)[:, 0]
  if pooling == 'mean_then_norm':
    return norm(jnp.mean(x, axis=(1, 2)))
  if pooling == 'first_token':
    return norm(x[:, 0, 0])
  return jnp.mean(norm(x), axis=(1, 2))


def classifier_head(spec: ModelSpec, **extra) -> ClassifierHead:
  return ClassifierHead(spec.num_classes, spec.representation_size, spec.dropout_rate, dtype=dtypes(spec)[0],
                        param_dtype=dtypes(spec)[1], name='head', **extra)


def attentive_pooler(spec: ModelSpec, backend=None) -> AttentivePooler:
  """The model's attentive pooler (classifier='attentive'), `pooler` in the params."""
  p = spec.attentive_pooler
  block = block_fields(spec, ('joint',), (1, 1, 1), num_heads=p.num_heads, mlp_dim=p.mlp_dim, backend=backend)
  # The pooler's projections all have biases; its self-attention blocks (depth) cap their scores as the encoders'
  # (VideoPrism's auxiliary layers; V-JEPA 2's pooler and its encoder have no cap).
  block.update(qkv_bias=True, key_bias=True)
  return AttentivePooler(num_queries=p.num_queries, num_heads=p.num_heads, head_dim=p.head_dim, depth=p.depth,
                         mlp_dim=p.mlp_dim, cross_attention=p.cross_attention, per_dim_scale=p.per_dim_scale,
                         block=block, remat=spec.remat, scan=spec.scan_layers, name='pooler')


def pool_tokens(module: nn.Module, spec: ModelSpec, tokens, train: bool, backend=None):
  """classifier='attentive': normalised tokens (B, T, N, D) -> the pooler -> (B, D), the head's input. The tokens
  are sown as `features` (intermediates)."""
  b, t, n, d = tokens.shape
  module.sow('intermediates', 'features', tokens)
  return attentive_pooler(spec, backend)(tokens.reshape(b, t * n, d), train)


def by_encoder(blocks: dict, first: int, shape) -> dict:
  """{model block: tokens reshaped to `shape`} of an encoder's kept blocks {its block: tokens}, its first block
  the model's `first`."""
  return {first + i: x.reshape(shape) for i, x in blocks.items()}


class VideoTransformer(nn.Module):
  """Every single-encoder scheme (see module docstring). Input (B, T, H, W, 3), output logits (B, C) or a dict."""
  spec: ModelSpec  # the resolved model (vvt.models.spec.spec_of)
  backend: str | None = None  # the backend model.attention_impl='auto' chooses for (None: jax's default)

  @nn.compact
  def __call__(self, video, train: bool = False, outputs=None, kept=None):
    """video (B, T, H, W, 3) -> logits; with `outputs` (names, vvt/models/outputs.py) {name: array} of those;
    with `kept` (B, K) the encoder runs on those tokens only (vvt/models/masking.py: tokens (B, 1, K, D) for
    joint attention, (B, n_t, K / n_t, D) for a factorised scheme's tube mask)."""
    spec = self.spec
    check_video(video, spec.num_frames, spec.image_size)
    check_kept(spec, kept)
    want = outputs_lib.request(outputs, spec.num_layers)
    x = TubeletEmbedding(spec.hidden_size, spec.tubelet, *dtypes(spec), name='embedding')(video, kept)
    block = block_fields(spec, spec.stages, spec.grid, mixing=spec.mixing, projected=spec.projected,
                         backend=self.backend, rope=spec.positional_embedding == 'rope')
    x, cls, norm, saved = encoder(spec, block, spec.num_layers, spec.class_token, spec.positional_embedding,
                                  spec.time_embedding_rows, name='encoder',
                                  keep=outputs_lib.kept(want, 0, spec.num_layers))(x, train, kept)
    rep, ta_head = self._represent(x, cls, norm, train)
    logits = self._classify(rep, train, ta_head)
    if want is None:
      return logits
    return outputs_lib.select(want, spec.num_layers, dict(logits=logits, pooled=rep, encoded=norm(x)), saved,
                              lambda i: norm)

  def _represent(self, x, cls, norm, train) -> tuple:
    """(the head's input (B, D), whether it is X-ViT's temporal-attention output) of the encoder's tokens."""
    spec = self.spec
    if spec.classifier == 'attentive':
      return pool_tokens(self, spec, norm(x), train, self.backend), False
    if spec.class_token == 'per_frame':
      frames = x[:, :, 0]  # (B, T, D): the per-frame class tokens.
      if spec.frame_aggregation == 'mean_before_norm':  # TimeSformer space-only: average frames, then norm.
        return norm(jnp.mean(frames, axis=1)), False
      frames = norm(frames)
      if spec.frame_aggregation == 'temporal_attention':  # X-ViT TA head.
        return self._temporal_head(frames, train), True
      return jnp.mean(frames, axis=1), False
    return pool(x, cls, norm, spec.classifier, spec.pooling), False

  def _temporal_head(self, frames, train):
    spec, head = self.spec, self.spec.temporal_head
    block = block_fields(spec, ('joint',), (1, 1, frames.shape[1]), num_heads=head.num_heads, mlp_dim=head.mlp_dim,
                         backend=self.backend)
    block.update(qkv_bias=head.qkv_bias, key_bias=True, layer_norm_eps=head.layer_norm_eps)
    return TemporalAttentionHead(head.num_layers, block, *dtypes(spec), spec.remat, spec.scan_layers,
                                 name='temporal_head')(frames, train)

  def _classify(self, rep, train, ta_head=False):
    spec = self.spec
    extra = {}
    if ta_head:  # X-ViT mlp_head: LN -> [Dense -> GELU] -> Dense.
      extra = dict(layer_norm_eps=spec.temporal_head.layer_norm_eps, mlp_dim=spec.temporal_head.hidden_dim)
    return classifier_head(spec, gelu_approximate=spec.gelu_approximate, **extra)(rep, train)


def _factorised_start(module, video, outputs, kept):
  """The start of both factorised encoders (`module`: FactorisedEncoder, SpaceThenTime, in its compact call):
  (want, count: the outputs asked (`vvt.models.outputs.request`) of the model's layers, the spatial encoder's
  input: every temporal index's tokens (B * n_t, 1, N, D) of `video` (B, T, H, W, 3), or with a tube mask `kept`
  (checked; vvt/models/masking.py) its K_s kept tokens (B * n_t, K_s, D) and their positions in each temporal
  index (B * n_t, K_s) (None unmasked), the sizes (B, n_t, N, D), the encoders' positional embedding, the spatial
  encoder's block fields (one temporal index: N tokens))."""
  spec = module.spec
  check_video(video, spec.num_frames, spec.image_size)
  check_kept(spec, kept)
  count = outputs_lib.num_layers(spec)
  want = outputs_lib.request(outputs, count)
  t, nh, nw = spec.grid
  frame_kept = None if kept is None else masking.per_frame(kept, t, nh * nw)
  x = TubeletEmbedding(spec.hidden_size, spec.tubelet, *dtypes(spec), name='embedding')(video, kept)
  sizes = (video.shape[0], t, nh * nw, spec.hidden_size)
  frames = x.reshape(sizes[0] * t, 1, nh * nw, -1) if kept is None else x.reshape(sizes[0] * t, -1, x.shape[-1])
  pos = 'joint' if spec.positional_embedding in ('joint', 'separable', 'spatial') else spec.positional_embedding
  spatial = block_fields(spec, ('joint',), (1, nh, nw), backend=module.backend)
  return want, count, frames, frame_kept, sizes, pos, spatial


class FactorisedEncoder(nn.Module):
  """ViViT Model 2 (sec. 3.3, Fig. 4): spatial encoder shared over time, then temporal encoder."""
  spec: ModelSpec
  backend: str | None = None  # the backend model.attention_impl='auto' chooses for (None: jax's default)

  @nn.compact
  def __call__(self, video, train: bool = False, outputs=None, kept=None):
    """video (B, T, H, W, 3) -> logits; with `outputs` {name: array} (blocks: the spatial encoder's, then the
    temporal encoder's (B, 1, n_t, D)); with a tube mask `kept` (B, n_t * K_s) the spatial encoder runs on the K_s
    kept positions of every temporal index (vvt/models/masking.py)."""
    spec = self.spec
    want, count, x, frame_kept, (b, t, n, d), pos, spatial = _factorised_start(self, video, outputs, kept)
    # Spatial encoder: every temporal index is an image of N tokens (one "frame" of a 1-frame video).
    xs, cls, norm, saved = encoder(spec, spatial, spec.num_layers, spec.class_token, pos, name='spatial_encoder',
                                   keep=outputs_lib.kept(want, 0, spec.num_layers))(x, train, frame_kept)
    blocks, norms_of = by_encoder(saved, 0, (b, t, -1, d)), [norm] * spec.num_layers
    frames = pool(xs, cls, norm, spec.classifier, spec.pooling).reshape(b, 1, t, d)  # (B, 1, n_t, D)
    if spec.temporal_layers == 0:  # the paper's baseline: average-pool the frame representations.
      rep, encoded = jnp.mean(frames, axis=(1, 2)), norm(xs).reshape(b, t, -1, d)
    else:
      temporal = block_fields(spec, ('joint',), (1, 1, t), num_heads=spec.temporal_num_heads,
                              mlp_dim=spec.temporal_mlp_dim, backend=self.backend)
      xt, cls, norm, saved = encoder(spec, temporal, spec.temporal_layers, spec.class_token, pos,
                                     name='temporal_encoder',
                                     keep=outputs_lib.kept(want, spec.num_layers, spec.temporal_layers))(frames, train)
      blocks.update(by_encoder(saved, spec.num_layers, (b, 1, t, d)))
      norms_of += [norm] * spec.temporal_layers
      rep, encoded = pool(xt, cls, norm, spec.classifier, spec.pooling), norm(xt)
    logits = classifier_head(spec)(rep, train)
    if want is None:
      return logits
    return outputs_lib.select(want, count, dict(logits=logits, pooled=rep, encoded=encoded), blocks,
                              norms_of.__getitem__)


class SpaceThenTime(nn.Module):
  """VideoPrism's factorised encoder (attention='space_then_time'): tokens (B, n_t, N, D) -> a spatial encoder over
  the N tokens of each temporal index (its learned table (1, N, D)) -> its final LayerNorm -> a temporal encoder
  over the n_t tokens of each spatial position (its learned table (1, n_t, D)) -> its final LayerNorm: all
  n_t * N tokens (B, n_t, N, D), pooled by the classifier ('attentive': VideoPrism's attention pooler; 'gap').

  With `pos_table_grid` the two tables keep the size they were trained at, (1, h0 * w0, D) and (1, t0, D), and are
  resized to the model's grid at run time (transformers' `interpolate_pos_encoding=True`).
  """
  spec: ModelSpec
  backend: str | None = None

  @property
  def cfg(self) -> ModelSpec:
    """The model's spec (reads like a resolved config: `get`)."""
    return self.spec

  @nn.compact
  def __call__(self, video, train: bool = False, outputs=None, kept=None):
    """video (B, T, H, W, 3) -> logits; with `outputs` {name: array} (blocks: the spatial encoder's, then the
    temporal encoder's, each (B, n_t, N, D)); with a tube mask `kept` (B, n_t * K_s) both encoders run on the K_s
    kept positions (tokens (B, n_t, K_s, D); vvt/models/masking.py)."""
    spec = self.spec
    want, count, x, frame_kept, (b, t, n, d), pos, spatial = _factorised_start(self, video, outputs, kept)
    table = spec.pos_table_grid
    xs, _, norm_s, saved = encoder(spec, spatial, spec.num_layers, None, pos, name='spatial_encoder',
                                   pos_table_grid=None if table is None else (1, table[1], table[2]),
                                   keep=outputs_lib.kept(want, 0, spec.num_layers))(x, train, frame_kept)
    n = xs.shape[2]  # the kept positions K_s of a masked call
    blocks = by_encoder(saved, 0, (b, t, n, d))
    xs = norm_s(xs).reshape(b, t, n, d).transpose(0, 2, 1, 3).reshape(b * n, 1, t, d)  # every position's n_t tokens
    temporal = block_fields(spec, ('joint',), (1, 1, t), num_heads=spec.temporal_num_heads,
                            mlp_dim=spec.temporal_mlp_dim, backend=self.backend)
    xt, _, norm, saved = encoder(spec, temporal, spec.temporal_layers, None, pos, name='temporal_encoder',
                                 pos_table_grid=None if table is None else (1, 1, table[0]),
                                 keep=outputs_lib.kept(want, spec.num_layers, spec.temporal_layers))(xs, train)
    across = lambda y: y.reshape(b, n, t, d).transpose(0, 2, 1, 3)  # (B * N, 1, n_t, D) -> (B, n_t, N, D)
    blocks.update({i: across(y) for i, y in by_encoder(saved, spec.num_layers, (b * n, 1, t, d)).items()})
    tokens = across(xt)  # (B, n_t, N, D), before the final norm
    if spec.classifier == 'attentive':
      rep = pool_tokens(self, spec, norm(tokens), train, self.backend)
    else:
      rep = pool(tokens, None, norm, spec.classifier, spec.pooling)
    logits = classifier_head(spec)(rep, train)
    if want is None:
      return logits
    return outputs_lib.select(want, count, dict(logits=logits, pooled=rep, encoded=norm(tokens)), blocks,
                              lambda i: norm_s if i < spec.num_layers else norm)
