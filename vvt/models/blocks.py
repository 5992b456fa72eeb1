"""Transformer encoder blocks: a sequence of attention stages, then an MLP (ViViT eq. 4-6, TimeSformer eq. 5-8).

Each stage is pre-norm and residual:  x <- x + DropPath(Proj(MSA_stage(LN(x))))  — Proj is TimeSformer's extra
temporal projection (`temporal_fc`) where asked for, identity otherwise. Then x <- x + DropPath(MLP(LN(x))).
The scheme of a model is just its tuple of stages (see `stages_of`).
"""
from __future__ import annotations

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from vvt.models.attention import MultiHeadAttention


def stages_of(attention: str, attention_order: str = 'space_time') -> tuple[str, ...]:
  """The attention stages of one block of `attention` (the scheme's neighbourhoods, in order)."""
  if attention in ('spatiotemporal', 'joint'):
    return ('joint',)
  if attention in ('space', 'space_time_mixing'):
    return ('space',)
  if attention == 'factorised_self_attention':
    return ('space', 'time') if attention_order == 'space_time' else ('time', 'space')
  if attention == 'divided':
    return ('time', 'space')  # TimeSformer: temporal attention first.
  if attention == 'local_global':
    return ('local', 'global')
  if attention == 'axial':
    return ('time', 'width', 'height')
  if attention == 'factorised_dot_product':
    return ('factorised_dot_product',)
  raise ValueError(f'unknown attention scheme {attention!r}')


def projected_stages(attention: str, stages: Sequence[str], temporal_projection: bool) -> tuple[bool, ...]:
  """Which stages carry TimeSformer's extra projection: every stage added to the image ViT's one
  (the last stage keeps the pretrained attention). Table 1 of TimeSformer counts them in its parameters."""
  if not temporal_projection or len(stages) == 1:
    return (False,) * len(stages)
  return tuple(i < len(stages) - 1 for i in range(len(stages)))


class DropPath(nn.Module):
  """Stochastic depth (Huang et al.): drops the whole residual branch per example with probability `rate`."""
  rate: float

  @nn.compact
  def __call__(self, branches, train: bool):
    if not train or self.rate == 0.0:
      return branches
    b = branches[0].shape[0]
    keep = jax.random.bernoulli(self.make_rng('dropout'), 1.0 - self.rate, (b,))
    scale = keep.astype(jnp.float32) / (1.0 - self.rate)

    def apply(x):
      if x is None:
        return None
      return x * scale.reshape((b,) + (1,) * (x.ndim - 1)).astype(x.dtype)

    return tuple(apply(x) for x in branches)


class Mlp(nn.Module):
  """Dense(D -> mlp_dim), GELU (exact or tanh), dropout, Dense(mlp_dim -> D), dropout."""
  mlp_dim: int
  dropout_rate: float = 0.0
  gelu_approximate: bool = False
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, train: bool):
    d = x.shape[-1]
    init = nn.initializers.xavier_uniform()
    bias_init = nn.initializers.normal(stddev=1e-6)
    x = nn.Dense(self.mlp_dim, dtype=self.dtype, kernel_init=init, bias_init=bias_init, name='Dense_0')(x)
    x = nn.gelu(x, approximate=self.gelu_approximate)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
    x = nn.Dense(d, dtype=self.dtype, kernel_init=init, bias_init=bias_init, name='Dense_1')(x)
    return nn.Dropout(self.dropout_rate)(x, deterministic=not train)


class EncoderBlock(nn.Module):
  """One block: attention stages then MLP, on tokens x (B, T, N, D) and an optional class token (B, 1, D).

  Parameters are named by stage: `{stage}_norm`, `{stage}_attention`, `{stage}_projection`, then `mlp_norm`, `mlp`.
  """
  stages: tuple[str, ...]
  projected: tuple[bool, ...]
  grid: tuple[int, int, int]
  num_heads: int
  mlp_dim: int
  mixing: Any = None
  qkv_bias: bool = True
  layer_norm_eps: float = 1e-6
  gelu_approximate: bool = False
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  droppath_rate: float = 0.0
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, cls, train: bool = False):
    norm = lambda name: nn.LayerNorm(epsilon=self.layer_norm_eps, dtype=self.dtype, name=name)
    drop_path = DropPath(self.droppath_rate)
    for stage, projected in zip(self.stages, self.projected):
      ln = norm(f'{stage}_norm')
      y, cy = MultiHeadAttention(
          num_heads=self.num_heads, qkv_bias=self.qkv_bias, dropout_rate=self.attention_dropout_rate,
          dtype=self.dtype, name=f'{stage}_attention')(
              ln(x), None if cls is None else ln(cls), stage=stage, grid=self.grid, mixing=self.mixing,
              train=train)
      if projected:
        proj = nn.Dense(x.shape[-1], dtype=self.dtype, name=f'{stage}_projection')
        y, cy = proj(y), (None if cy is None else proj(cy))
      y = nn.Dropout(self.dropout_rate)(y, deterministic=not train)
      y, cy = drop_path((y, cy), train)
      x = x + y
      if cy is not None:
        cls = cls + cy
    ln = norm('mlp_norm')
    mlp = Mlp(self.mlp_dim, self.dropout_rate, self.gelu_approximate, self.dtype, name='mlp')
    y, cy = mlp(ln(x), train), (None if cls is None else mlp(ln(cls), train))
    y, cy = drop_path((y, cy), train)
    x = x + y
    if cls is not None:
      cls = cls + cy
    return x, cls


class Encoder(nn.Module):
  """`num_layers` EncoderBlocks (stochastic depth rising linearly to `stochastic_depth`), optional remat."""
  num_layers: int
  block: dict  # EncoderBlock fields shared by all layers (without droppath_rate).
  stochastic_depth: float = 0.0
  remat: bool = False

  @nn.compact
  def __call__(self, x, cls, train: bool = False):
    block_cls = nn.remat(EncoderBlock, static_argnums=(3,)) if self.remat else EncoderBlock
    for i in range(self.num_layers):
      rate = self.stochastic_depth * i / max(self.num_layers - 1, 1)
      x, cls = block_cls(**self.block, droppath_rate=rate, name=f'block_{i}')(x, cls, train)
    return x, cls
