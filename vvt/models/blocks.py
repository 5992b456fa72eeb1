"""Transformer encoder blocks: a sequence of attention stages, then an MLP (ViViT eq. 4-6, TimeSformer eq. 5-8).

Each stage is pre-norm and residual:  x <- x + DropPath(Proj(MSA_stage(LN(x))))  — Proj is TimeSformer's extra
temporal projection (`temporal_fc`) where asked for, identity otherwise. Then x <- x + DropPath(MLP(LN(x))).
The scheme of a model is just its tuple of stages (`ModelSpec.stages`, from its record in vvt/models/schemes.py).

`Encoder` stacks the blocks either unrolled (params `block_0`, `block_1`, ...) or, with `scan`, as one
`nn.scan` over a block whose params carry a leading layer axis (`blocks`, each leaf (num_layers, ...)):
the same function, compiled once whatever the depth; `vvt.models.layout` converts between the two.
`remat` wraps each block in `nn.remat` with a `jax.checkpoint_policies` policy (`remat_policy`).
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

# The model names no mesh: it reads the one its caller traces it under, and the logical axis rules active then
# (`axes.axis_rules`; by default the batch over `axes.BATCH_AXES`).
from vvt.models import axes as logical_axes
from vvt.models import norms
from vvt.models.attention import MultiHeadAttention


def constrain_batch(x):
  """`x` (B, ...) with its batch axis sharded over the data-like axes of the mesh it is traced under
  (`jax.sharding.use_abstract_mesh`, as vvt's train and eval steps do); unchanged without one, or when B does not
  divide. Inside `nn.scan` XLA's sharding propagation loses the batch sharding of the carry (a ViViT-H Model 1
  step compiled for a TPU v3-32 replicated the whole batch in the loop: 137 GiB per core), so the scanned block
  states it."""
  axes = () if x is None else logical_axes.traced_axes(logical_axes.BATCH, x.shape[0])
  return jax.lax.with_sharding_constraint(x, jax.sharding.PartitionSpec(axes)) if axes else x


def remat_policy(remat):
  """(wrap in nn.remat?, policy) for `model.remat`: False / 'none' no remat; True / 'full' remat saving nothing
  (jax.checkpoint's default); any other name a `jax.checkpoint_policies` policy (what the forward may keep,
  e.g. 'dots_saveable': matmul outputs; 'dots_with_no_batch_dims_saveable': the projections' but not
  attention's batched matmuls; 'nothing_saveable')."""
  if remat in (False, None, 'none'):
    return False, None
  if remat in (True, 'full'):
    return True, None
  return True, getattr(jax.checkpoint_policies, remat)


class DropPath(nn.Module):
  """Stochastic depth (Huang et al.): drops the whole residual branch per example with probability `rate`.

  `rate` may be a traced scalar (one per layer of a scanned encoder)."""

  @nn.compact
  def __call__(self, branches, train: bool, rate):
    if not train or (isinstance(rate, (int, float)) and rate == 0.0):
      return branches
    b = branches[0].shape[0]
    keep = jax.random.bernoulli(self.make_rng('dropout'), 1.0 - rate, (b,))
    scale = keep.astype(jnp.float32) / (1.0 - rate)

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
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, train: bool):
    d = x.shape[-1]
    init = nn.initializers.xavier_uniform()
    bias_init = nn.initializers.normal(stddev=1e-6)
    dense = lambda n, name: nn.Dense(n, dtype=self.dtype, param_dtype=self.param_dtype, kernel_init=init,
                                     bias_init=bias_init, name=name)
    x = dense(self.mlp_dim, 'Dense_0')(x)
    x = nn.gelu(x, approximate=self.gelu_approximate)
    x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
    x = dense(d, 'Dense_1')(x)
    return nn.Dropout(self.dropout_rate)(x, deterministic=not train)


class EncoderBlock(nn.Module):
  """One block: attention stages then MLP, on tokens x (B, T, N, D) and an optional class token (B, 1, D).

  Parameters are named by stage: `{stage}_norm`, `{stage}_attention`, `{stage}_projection`, then `mlp_norm`, `mlp`.
  `droppath_rate` given to the call (a scanned encoder's per-layer rate) overrides the field. `positions` (B, T, N):
  the tokens' indices in the flattened `grid` where x holds kept tokens only (RoPE rotates by them; None: x is the
  grid).
  """
  stages: tuple[str, ...]
  projected: tuple[bool, ...]
  grid: tuple[int, int, int]
  num_heads: int
  mlp_dim: int
  mixing: Any = None
  qkv_bias: bool = True
  key_bias: bool = True
  layer_norm_eps: float = 1e-6
  gelu_approximate: bool = False
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  droppath_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  attention_impl: str = 'einsum'
  backend: str | None = None
  rope: bool = False  # V-JEPA 2's 3D RoPE on q and k (vvt/models/rope.py)
  logit_cap: float | None = None  # VideoPrism's tanh cap of the attention scores
  layer_norm_scale_offset: float = 0.0  # VideoPrism's LayerNorm: scale stored as an offset from 1 (vvt/models/norms.py)

  @nn.compact
  def __call__(self, x, cls, train: bool = False, droppath_rate=None, positions=None):
    rate = self.droppath_rate if droppath_rate is None else droppath_rate
    norm = lambda name: norms.layer_norm(self.layer_norm_eps, self.dtype, self.param_dtype, name,
                                         self.layer_norm_scale_offset)
    drop_path = DropPath()
    for stage, projected in zip(self.stages, self.projected, strict=True):
      ln = norm(f'{stage}_norm')
      y, cy = MultiHeadAttention(
          num_heads=self.num_heads, qkv_bias=self.qkv_bias, key_bias=self.key_bias,
          dropout_rate=self.attention_dropout_rate,
          dtype=self.dtype, param_dtype=self.param_dtype, impl=self.attention_impl, backend=self.backend,
          rope=self.rope, logit_cap=self.logit_cap, name=f'{stage}_attention')(
              ln(x), None if cls is None else ln(cls), stage=stage, grid=self.grid, mixing=self.mixing,
              train=train, positions=positions)
      if projected:
        proj = nn.Dense(x.shape[-1], dtype=self.dtype, param_dtype=self.param_dtype, name=f'{stage}_projection')
        y, cy = proj(y), (None if cy is None else proj(cy))
      y = nn.Dropout(self.dropout_rate)(y, deterministic=not train)
      y, cy = drop_path((y, cy), train, rate)
      x = x + y
      if cy is not None:
        cls = cls + cy
    ln = norm('mlp_norm')
    mlp = Mlp(self.mlp_dim, self.dropout_rate, self.gelu_approximate, self.dtype, self.param_dtype, name='mlp')
    y, cy = mlp(ln(x), train), (None if cls is None else mlp(ln(cls), train))
    y, cy = drop_path((y, cy), train, rate)
    x = x + y
    if cls is not None:
      cls = cls + cy
    return x, cls


class _ScannedBlock(nn.Module):
  """EncoderBlock as an nn.scan body: carry (x, cls, positions), per-layer input the stochastic-depth rate (used when
  `stochastic`; otherwise the block's static rate 0 keeps stochastic depth out of the graph); per-layer output
  the block's tokens where `collect` (else none)."""
  block: dict
  train: bool = False
  stochastic: bool = False
  collect: bool = False

  @nn.compact
  def __call__(self, carry, rate):
    x, cls, positions = (constrain_batch(c) for c in carry)
    x, cls = EncoderBlock(**self.block, name='block')(x, cls, self.train, rate if self.stochastic else None,
                                                      positions)
    x = constrain_batch(x)
    return (x, constrain_batch(cls), positions), (x if self.collect else None)


class Encoder(nn.Module):
  """`num_layers` EncoderBlocks, stochastic depth rising linearly from 0 to `stochastic_depth`.

  remat: False / True or a policy name (`remat_policy`). scan: one nn.scan over the layers (params under
  `blocks` with a leading (num_layers,) axis) instead of `block_0` ... `block_{L-1}`; same outputs and
  gradients (dropout / stochastic-depth random streams differ between the two layouts).

  Returns (x, cls, kept): kept {i: the tokens after block i} of the blocks in `keep` (scanned: the scan's per-layer
  outputs, only when some are kept), {} by default. `positions` (B, T, N): the kept tokens' grid indices
  (`EncoderBlock`), None for the full grid.
  """
  num_layers: int
  block: dict  # EncoderBlock fields shared by all layers (without droppath_rate).
  stochastic_depth: float = 0.0
  remat: Any = False
  scan: bool = False
  keep: tuple = ()  # the blocks (0 ... num_layers - 1) whose tokens the call also returns

  @nn.compact
  def __call__(self, x, cls, train: bool = False, positions=None):
    wrap, policy = remat_policy(self.remat)
    rates = [self.stochastic_depth * i / max(self.num_layers - 1, 1) for i in range(self.num_layers)]
    if self.scan:
      body = nn.remat(_ScannedBlock, policy=policy, prevent_cse=False) if wrap else _ScannedBlock
      scanned = nn.scan(body, variable_axes={'params': 0}, split_rngs={'params': True, 'dropout': True},
                        length=self.num_layers)
      (x, cls, _), ys = scanned(self.block, train, self.stochastic_depth > 0, bool(self.keep), name='blocks')(
          (x, cls, positions), jnp.asarray(rates, jnp.float32))
      return x, cls, {i: ys[i] for i in self.keep}
    block_cls = nn.remat(EncoderBlock, static_argnums=(3,), policy=policy) if wrap else EncoderBlock
    kept = {}
    for i in range(self.num_layers):
      x, cls = block_cls(**self.block, droppath_rate=rates[i], name=f'block_{i}')(x, cls, train, None, positions)
      if i in self.keep:
        kept[i] = x
    return x, cls, kept
