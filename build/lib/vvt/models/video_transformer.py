"""Model families: one module for every single-encoder scheme, one for ViViT's factorised encoder (Model 2).

VideoTransformer  (B, T, H, W, 3) -> tokens (B, n_t, N, D) -> Encoder(stages of the scheme) -> head
  ViViT Model 1 (spatiotemporal), Model 3 (factorised_self_attention), Model 4 (factorised_dot_product);
  TimeSformer space / joint / divided / local_global / axial; X-ViT space_time_mixing.
FactorisedEncoder (ViViT Model 2, sec. 3.3): a spatial encoder shared over the n_t temporal indices, then a
  temporal encoder over the n_t frame representations (temporal_layers = 0: average-pool baseline).
"""
from __future__ import annotations

import chex
import flax.linen as nn
import jax.numpy as jnp
import ml_collections

from vvt.models import config as config_lib
from vvt.models.blocks import Encoder, projected_stages, stages_of
from vvt.models.embedding import PositionalEmbedding, TubeletEmbedding
from vvt.models.heads import ClassifierHead, TemporalAttentionHead


def _dtype(cfg):
  return jnp.bfloat16 if cfg.dtype == 'bfloat16' else jnp.float32


def _param_dtype(cfg):
  return jnp.bfloat16 if cfg.get('param_dtype') == 'bfloat16' else jnp.float32


def check_video(video, cfg) -> None:
  """The model boundary: video must be (B, T, H, W, 3) with T = model.num_frames, H = W = model.image_size."""
  expected = (None, cfg.num_frames, cfg.image_size, cfg.image_size, 3)
  message = (f'video input must be (B, T, H, W, 3) = (B, {cfg.num_frames}, {cfg.image_size}, {cfg.image_size}, 3) '
             f'for model.num_frames={cfg.num_frames}, model.image_size={cfg.image_size}; got {tuple(video.shape)}')
  chex.assert_rank(video, 5, custom_message=message)
  chex.assert_shape(video, expected, custom_message=message)


def _block_fields(cfg, stages, grid, *, num_heads=None, mlp_dim=None, mixing=None, backend=None):
  return dict(
      stages=tuple(stages), projected=projected_stages(cfg.attention, stages, cfg.temporal_projection),
      grid=tuple(grid), num_heads=num_heads or cfg.num_heads, mlp_dim=mlp_dim or cfg.mlp_dim, mixing=mixing,
      qkv_bias=cfg.qkv_bias, layer_norm_eps=cfg.layer_norm_eps, gelu_approximate=cfg.gelu_approximate,
      dropout_rate=cfg.dropout_rate, attention_dropout_rate=cfg.attention_dropout_rate, dtype=_dtype(cfg),
      param_dtype=_param_dtype(cfg), attention_impl=cfg.get('attention_impl', 'einsum'), backend=backend)


class SpaceTimeEncoder(nn.Module):
  """Class token + positional embedding + encoder blocks + final LayerNorm over tokens (B, T, N, D).

  class_token: 'global' (one (1, 1, D) token, `cls`), 'per_frame' (the same token prepended to every
  temporal index, so tokens become (B, T, 1 + N, D)), or None. Returns (tokens, cls) before the final norm,
  and the final LayerNorm as `self.norm` for the caller's pooling.
  """
  cfg: ml_collections.ConfigDict
  stages: tuple[str, ...]
  grid: tuple[int, int, int]
  num_layers: int
  class_token: str | None
  positional_embedding: str
  num_heads: int | None = None
  mlp_dim: int | None = None
  mixing: object = None
  time_embedding_rows: int | None = None
  backend: str | None = None  # the backend attention_impl='auto' chooses for (None: jax's default)

  @nn.compact
  def __call__(self, x, train: bool = False):
    cfg = self.cfg
    b, t, n, d = x.shape
    cls = None
    if self.class_token is not None:
      token = self.param('cls', nn.initializers.zeros, (1, 1, d), _param_dtype(cfg)).astype(x.dtype)
      if self.class_token == 'global':
        cls = jnp.broadcast_to(token, (b, 1, d))
      else:
        x = jnp.concatenate([jnp.broadcast_to(token[:, None], (b, t, 1, d)), x], axis=2)
    x, cls = PositionalEmbedding(self.positional_embedding, time_rows=self.time_embedding_rows,
                                 param_dtype=_param_dtype(cfg), name='posembed')(x, cls)
    x = nn.Dropout(cfg.dropout_rate)(x, deterministic=not train)
    grid = self.grid
    block = _block_fields(cfg, self.stages, grid, num_heads=self.num_heads, mlp_dim=self.mlp_dim,
                          mixing=self.mixing, backend=self.backend)
    x, cls = Encoder(self.num_layers, block, cfg.stochastic_depth, cfg.remat, cfg.get('scan_layers', False),
                     name='layers')(x, cls, train)
    self.sow('intermediates', 'tokens', x)  # (B, T, N, D) before the final norm: features, and FLOP counts.
    norm = nn.LayerNorm(epsilon=cfg.layer_norm_eps, dtype=_dtype(cfg), param_dtype=_param_dtype(cfg),
                        name='encoder_norm')
    return x, cls, norm


def pool(x, cls, norm, classifier: str):
  """Video representation (B, D): the normalised class token ('token') or the mean of all tokens ('gap')."""
  if classifier == 'token':
    return norm(cls)[:, 0]
  return jnp.mean(norm(x), axis=(1, 2))


class VideoTransformer(nn.Module):
  """Every single-encoder scheme (see module docstring). Input (B, T, H, W, 3), output logits (B, C) or a dict."""
  cfg: ml_collections.ConfigDict  # a resolved model config
  backend: str | None = None  # the backend model.attention_impl='auto' chooses for (None: jax's default)

  @nn.compact
  def __call__(self, video, train: bool = False):
    cfg = self.cfg
    check_video(video, cfg)
    x = TubeletEmbedding(cfg.hidden_size, cfg.tubelet, _dtype(cfg), _param_dtype(cfg), name='embedding')(video)
    grid = config_lib.token_grid(cfg)
    class_token = cfg.class_token if cfg.classifier == 'token' else None
    mixing = None
    if cfg.attention == 'space_time_mixing':  # segments in temporal indices (frames / tubelet length)
      segment = (cfg.mixing.get('num_segments') or cfg.num_frames) // cfg.tubelet[0]
      mixing = ml_collections.ConfigDict(dict(cfg.mixing.to_dict(), num_segments=segment))
    x, cls, norm = SpaceTimeEncoder(
        cfg, stages_of(cfg.attention, cfg.attention_order), grid, cfg.num_layers, class_token,
        cfg.positional_embedding, mixing=mixing, time_embedding_rows=cfg.get('time_embedding_rows'),
        backend=self.backend, name='encoder')(x, train)
    if class_token == 'per_frame':
      frames = x[:, :, 0]  # (B, T, D): the per-frame class tokens.
      if cfg.frame_aggregation == 'mean_before_norm':  # TimeSformer space-only: average frames, then norm.
        return self._classify(norm(jnp.mean(frames, axis=1)), train)
      frames = norm(frames)
      if cfg.frame_aggregation == 'temporal_attention':  # X-ViT TA head.
        head = cfg.temporal_head
        block = _block_fields(cfg, ('joint',), (1, 1, frames.shape[1]), num_heads=head.num_heads,
                              mlp_dim=head.mlp_ratio * cfg.hidden_size, backend=self.backend)
        block.update(qkv_bias=head.qkv_bias, layer_norm_eps=head.layer_norm_eps)
        rep = TemporalAttentionHead(head.num_layers, block, _dtype(cfg), _param_dtype(cfg), cfg.remat,
                                    cfg.get('scan_layers', False), name='temporal_head')(frames, train)
        return self._classify(rep, train, ta_head=True)
      return self._classify(jnp.mean(frames, axis=1), train)
    return self._classify(pool(x, cls, norm, cfg.classifier), train)

  def _classify(self, rep, train, ta_head=False):
    cfg = self.cfg
    extra = {}
    if ta_head:  # X-ViT mlp_head: LN -> [Dense -> GELU] -> Dense.
      extra = dict(layer_norm_eps=cfg.temporal_head.layer_norm_eps, mlp_dim=cfg.temporal_head.mlp_dim)
    return ClassifierHead(cfg.num_classes, cfg.representation_size, cfg.dropout_rate,
                          gelu_approximate=cfg.gelu_approximate, dtype=_dtype(cfg), param_dtype=_param_dtype(cfg),
                          name='head', **extra)(rep, train)


class FactorisedEncoder(nn.Module):
  """ViViT Model 2 (sec. 3.3, Fig. 4): spatial encoder shared over time, then temporal encoder."""
  cfg: ml_collections.ConfigDict
  backend: str | None = None  # the backend model.attention_impl='auto' chooses for (None: jax's default)

  @nn.compact
  def __call__(self, video, train: bool = False):
    cfg = self.cfg
    check_video(video, cfg)
    x = TubeletEmbedding(cfg.hidden_size, cfg.tubelet, _dtype(cfg), _param_dtype(cfg), name='embedding')(video)
    b, t, n, d = x.shape
    nt, nh, nw = config_lib.token_grid(cfg)
    class_token = 'global' if cfg.classifier == 'token' else None
    pos = 'joint' if cfg.positional_embedding in ('joint', 'separable', 'spatial') else cfg.positional_embedding
    # Spatial encoder: every temporal index is an image of N tokens (one "frame" of a 1-frame video).
    xs, cls, norm = SpaceTimeEncoder(cfg, ('joint',), (1, nh, nw), cfg.num_layers, class_token, pos,
                                     backend=self.backend, name='spatial_encoder')(x.reshape(b * t, 1, n, d), train)
    frames = pool(xs, cls, norm, cfg.classifier).reshape(b, 1, t, d)  # (B, 1, n_t, D)
    if cfg.temporal_layers == 0:  # the paper's baseline: average-pool the frame representations.
      return ClassifierHead(cfg.num_classes, cfg.representation_size, cfg.dropout_rate, dtype=_dtype(cfg),
                            param_dtype=_param_dtype(cfg), name='head')(jnp.mean(frames, axis=(1, 2)), train)
    xt, cls, norm = SpaceTimeEncoder(cfg, ('joint',), (1, 1, t), cfg.temporal_layers, class_token, pos,
                                     num_heads=cfg.temporal_num_heads, mlp_dim=cfg.temporal_mlp_dim,
                                     backend=self.backend, name='temporal_encoder')(frames, train)
    return ClassifierHead(cfg.num_classes, cfg.representation_size, cfg.dropout_rate, dtype=_dtype(cfg),
                          param_dtype=_param_dtype(cfg), name='head')(pool(xt, cls, norm, cfg.classifier), train)
