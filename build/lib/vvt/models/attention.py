"""One attention primitive, and the space-time neighbourhoods of every scheme as reshapings of tokens.

Every scheme of ViViT, TimeSformer and X-ViT is the same scaled dot-product attention (ViViT eq. 7,
TimeSformer eq. 5, X-ViT eq. 10) applied to a different grouping of the video tokens:

  tokens x: (B, T, N, ...) with N = n_h * n_w patch tokens per temporal index (row-major h, w)
  group(x, stage) -> (B * G, L, ...)   G groups of L tokens that attend to each other
  ungroup(y, stage) -> (B, T, N, ...)

Stages (TimeSformer Fig. 2 / ViViT Fig. 4-6):
  joint   one group of all T*N tokens                        (ViViT Model 1, TimeSformer 'joint')
  space   one group per temporal index: N tokens             (TimeSformer 'space', X-ViT)
  time    one group per spatial position: T tokens           (TimeSformer / ViViT temporal attention)
  width   one group per (t, row): n_w tokens                 (TimeSformer axial)
  height  one group per (t, column): n_h tokens              (TimeSformer axial)
  local   one group per spatial quadrant: T x n_h/2 x n_w/2  (TimeSformer sparse local)
  global  one group per (t, h, w) parity: stride 2 in each   (TimeSformer sparse global)

Two schemes change more than the grouping, and are still this one primitive:
  factorised_dot_product  (ViViT Model 4) half of the heads attend within `space`, half within `time`,
                          over the same projected Q, K, V.
  space_time_mixing       (X-ViT eq. 9-10) K and V take 1/shift_div of their channels from frame t+i and
                          as many from t-i (i = 1..t_w, zeros at the clip ends) before `space` attention;
                          optionally every frame also attends to one summary token (spatial mean) per frame.
                          With `num_segments` < T the T frames are cut into consecutive segments of
                          num_segments frames that mix only among themselves (zeros at every segment end), as
                          the official code's TemporalShift(n_segment=NUM_SEGMENTS) does.

A class token (global, shape (B, 1, D)) is prepended to every group of a stage except `time`, and its
outputs are averaged over the groups (TimeSformer: the class token is excluded from temporal attention,
replicated for each frame's spatial attention and averaged). A per-frame class token is simply part of
the frame's N tokens.

Implementations of the one primitive (`model.attention_impl`; all compute the same softmax(Q K^T / sqrt(d_h)) V):
  einsum       the two einsums and a float32 softmax: materialises the (G, H, Lq, Lk) scores; attention dropout.
  dot_product  jax.nn.dot_product_attention: cuDNN flash attention on GPU where cuDNN takes the call (bfloat16 /
               float16, d_h <= 128 and a multiple of 8; tokens padded to a multiple of 64, the padding masked by
               query_seq_lengths / key_value_seq_lengths), jax's XLA implementation otherwise.
  chunked      blockwise (pure JAX, any backend): O(L * block) temporaries, and a custom VJP whose backward
               recomputes the scores tile by tile from the saved log-sum-exp, so neither pass stores the (Lq, Lk)
               scores. Tiled by key blocks with an online softmax on GPU / TPU, by query tiles of one head against
               all keys on the CPU (cache-sized steps; `chunked_attention`).
  splash       the Pallas TPU splash-attention kernel (TPU only): tokens padded to a multiple of 128, padded keys
               masked by segment ids.
  auto         per stage, from the stage's sequence length and the backend (`choose_impl`).
Only `einsum` implements attention dropout; the config refuses attention_dropout_rate > 0 with the others, and
`auto` then picks `einsum` everywhere.
"""
from __future__ import annotations

import functools
import math
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from vvt.models.config import ATTENTION_IMPLS

IMPLS = ATTENTION_IMPLS  # model.attention_impl
BATCH_AXES = ('data', 'fsdp')  # the mesh axes a batch (and a group axis G, batch-major) is sharded over
AUTO_MIN_LENGTH = 1024  # auto: groups of at least this many queries or keys leave einsum
CHUNK_SIZE = 512  # chunked, tiled by keys (GPU, TPU): keys per block
QUERY_TILE = 128  # chunked, tiled by queries (CPU): queries per tile

STAGES = ('joint', 'space', 'time', 'width', 'height', 'local', 'global')
_CLASS_TOKEN_STAGES = ('joint', 'space', 'width', 'height', 'local', 'global')


def dot_product_attention(q, k, v, *, dropout_rate=0.0, dropout_rng=None, deterministic=True, impl='einsum',
                          backend=None):
  """Softmax(Q K^T / sqrt(d_h)) V, per head (ViViT eq. 7, TimeSformer eq. 5, X-ViT eq. 10).

  q: (G, Lq, H, d_h); k, v: (G, Lk, H, d_h) -> (G, Lq, H, d_h): G groups (batch x neighbourhoods) of tokens.
  The softmax is computed in float32 by every implementation. `impl` is one of IMPLS (see the module
  docstring; 'auto' is resolved by `choose_impl` from Lq, Lk and `backend`, default: jax's default backend).
  Attention dropout (train mode, dropout_rate > 0) exists in 'einsum' only; the others raise ValueError.
  """
  backend = backend or jax.default_backend()
  dropout = not deterministic and dropout_rate > 0.0
  impl = choose_impl(impl, backend=backend, q_len=q.shape[1], kv_len=k.shape[1], head_dim=q.shape[-1],
                     dtype=q.dtype, dropout=dropout_rate > 0.0)
  if impl == 'einsum':
    return einsum_attention(q, k, v, dropout_rate=dropout_rate if dropout else 0.0, dropout_rng=dropout_rng)
  if dropout:
    raise ValueError(f'attention_impl={impl!r} has no attention dropout (rate {dropout_rate}): use einsum or auto')
  if impl == 'chunked':
    return chunked_attention(q, k, v, backend=backend)
  if impl == 'dot_product':
    return xla_dot_product_attention(q, k, v, cudnn=backend == 'gpu' and cudnn_supports(q.shape[-1], q.dtype))
  if impl == 'splash':
    if backend != 'tpu':
      raise ValueError(f"attention_impl='splash' is the Pallas TPU kernel: the backend is {backend!r}, not 'tpu'")
    return splash_attention(q, k, v)
  raise ValueError(f'unknown attention implementation {impl!r}; expected one of {IMPLS}')


def choose_impl(impl: str, *, backend: str, q_len: int, kv_len: int, head_dim: int, dtype, dropout: bool) -> str:
  """The implementation `auto` stands for in one attention stage (any other `impl` is returned as it is).

  einsum when the stage's groups are short (max(Lq, Lk) < AUTO_MIN_LENGTH = 1024: ViViT's 8- or 16-token
  temporal and 197-token spatial stages, TimeSformer's divided / axial / local stages: their (Lq, Lk) scores
  are small and einsum is the fastest) or when attention dropout is on (only einsum has it); for long groups
  (ViViT Model 1 / TimeSformer joint: 1569-3137 tokens) splash on TPU, dot_product (cuDNN flash attention)
  on GPU where cuDNN takes the dtype and head size, chunked otherwise (CPU, float32 GPU).
  """
  if impl != 'auto':
    return impl
  if dropout or max(q_len, kv_len) < AUTO_MIN_LENGTH:
    return 'einsum'
  if backend == 'tpu':
    return 'splash'
  if backend == 'gpu' and cudnn_supports(head_dim, dtype):
    return 'dot_product'
  return 'chunked'


def cudnn_supports(head_dim: int, dtype) -> bool:
  """Whether cuDNN flash attention (jax.nn.dot_product_attention(implementation='cudnn')) takes the call."""
  return jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and head_dim <= 128 and head_dim % 8 == 0


def einsum_attention(q, k, v, *, dropout_rate=0.0, dropout_rng=None):
  """ViViT eq. 7 as two einsums: scores (G, H, Lq, Lk) in float32, dropout on the weights where rate > 0.

  q, k, v are put heads-first, (G, H, L, d_h), before the einsums and the output back after: the batched
  matmuls then contract the minor axis with (G, H) leading, which XLA's CPU dot runs 4x faster than on the
  (G, L, H, d_h) layout (BENCHMARKS.md, CPU attention); on GPU / TPU the transposes fold into the dots."""
  q = _heads_first(q / jnp.sqrt(q.shape[-1]).astype(q.dtype))
  logits = jnp.einsum('ghqd,ghkd->ghqk', q, _heads_first(k))
  weights = jax.nn.softmax(logits.astype(jnp.float32), axis=-1).astype(v.dtype)
  if dropout_rate > 0.0:
    keep = jax.random.bernoulli(dropout_rng, 1.0 - dropout_rate, weights.shape)
    weights = jnp.where(keep, weights / (1.0 - dropout_rate), 0).astype(v.dtype)
  return _heads_first(jnp.einsum('ghqk,ghkd->ghqd', weights, _heads_first(v)))


def _heads_first(x):
  """(G, L, H, d) <-> (G, H, L, d)."""
  return x.swapaxes(1, 2)


def _pad_tokens(x, length: int):
  """(G, L, H, d) -> (G, length, H, d), zeros after the L tokens."""
  return jnp.pad(x, ((0, 0), (0, length - x.shape[1]), (0, 0), (0, 0)))


def xla_dot_product_attention(q, k, v, *, cudnn: bool = False, pad_multiple: int | None = None,
                              implementation: str | None = None):
  """ViViT eq. 7 through `jax.nn.dot_product_attention` on (G, L, H, d_h) (its (B, T, N, H) layout).

  cudnn: cuDNN flash attention. Its backward takes only sequence lengths that are multiples of 64, so the
  Lq queries and Lk keys are zero-padded to the next multiple of 64 (3137 -> 3200, 197 -> 256) and
  query_seq_lengths = Lq, key_value_seq_lengths = Lk mask the padding; the padded rows are dropped.
  pad_multiple / implementation force the padding and jax's implementation (tests run the padded path
  through 'xla' on CPU).
  """
  if cudnn:
    pad_multiple, implementation = pad_multiple or 64, 'cudnn'
  g, lq, lk = q.shape[0], q.shape[1], k.shape[1]
  if not pad_multiple:
    return jax.nn.dot_product_attention(q, k, v, implementation=implementation)
  up = lambda n: -(-n // pad_multiple) * pad_multiple
  out = jax.nn.dot_product_attention(
      _pad_tokens(q, up(lq)), _pad_tokens(k, up(lk)), _pad_tokens(v, up(lk)),
      query_seq_lengths=jnp.full((g,), lq, jnp.int32), key_value_seq_lengths=jnp.full((g,), lk, jnp.int32),
      implementation=implementation)
  return out[:, :lq]


def chunked_attention(q, k, v, *, block_size: int | None = None, tiling: str | None = None, backend=None):
  """ViViT eq. 7 block by block, never holding the (Lq, Lk) scores of a group: O(block * L) memory.

  q: (G, Lq, H, d_h); k, v: (G, Lk, H, d_h) -> (G, Lq, H, d_h). Two tilings of the same arithmetic, both with
  a custom VJP that saves only q, k, v, the output O and the log-sum-exp (lse) of each query's scores, and
  recomputes the probabilities P = exp(S - lse) tile by tile in the backward:
    dV = P^T dO,  dS = P * (dO V^T - rowsum(dO * O)),  dQ = dS K,  dK = dS^T Q.
  Accumulation is in float32; the output has q's dtype.
  tiling='keys' (GPU, TPU; Rabe & Staats 2021, FlashAttention): a scan over blocks of `block_size` keys
    (default CHUNK_SIZE; the last block zero-padded and masked) with an online softmax (running max, running
    sum of exp(s - max), running sum of exp(s - max) V), every query and head at once: (G, H, Lq, block)
    scores per step, large batched matmuls.
  tiling='queries' (CPU): one head of one group at a time, tiles of `block_size` queries (default
    QUERY_TILE) against all the keys with an exact softmax: (block, Lk) scores per step, which stay in the
    CPU's caches; XLA's CPU backend is memory-bound on the large tiles of 'keys' (ViViT-B Model 1's
    attention: 2-3x faster forward and backward, BENCHMARKS.md).
  tiling=None: 'queries' when `backend` (default: jax's default backend) is 'cpu', 'keys' otherwise.
  """
  tiling = tiling or ('queries' if (backend or jax.default_backend()) == 'cpu' else 'keys')
  if tiling == 'queries':
    return _query_tiled(q, k, v, min(block_size or QUERY_TILE, q.shape[1]))
  if tiling == 'keys':
    return _chunked(q, k, v, min(block_size or CHUNK_SIZE, k.shape[1]))
  raise ValueError(f"chunked_attention: tiling must be 'queries' or 'keys', got {tiling!r}")


def _query_tiles(x, tile: int):
  """(G, L, H, d) -> (G * H, nt, tile, d): per head of each group, its L tokens zero-padded to nt tiles."""
  g, l, h, d = x.shape
  nt = -(-l // tile)
  return _heads_first(_pad_tokens(x, nt * tile)).reshape(g * h, nt, tile, d)


def _per_head(x):
  """(G, L, H, d) -> (G * H, L, d)."""
  g, l, h, d = x.shape
  return _heads_first(x).reshape(g * h, l, d)


def _untile(x, g: int, l: int):
  """(G * H, ..., d) tiles of tokens -> (G, L, H, d), the padding dropped."""
  gh, d = x.shape[0], x.shape[-1]
  return _heads_first(x.reshape(g, gh // g, -1, d)[:, :, :l])


def _query_tiled_forward(q, k, v, tile: int):
  """Output (G, Lq, H, d_h) and lse (G * H, nt, tile) of the query-tiled attention."""
  g, lq, h, d = q.shape
  qt = _query_tiles(q / jnp.sqrt(d).astype(q.dtype), tile)
  kh, vh = _per_head(k), _per_head(v)

  def head(xs):
    q_tiles, kk, vv = xs

    def step(qi):  # (tile, d) queries against the head's (Lk, d) keys
      s = (qi @ kk.T).astype(jnp.float32)
      m = s.max(axis=-1, keepdims=True)
      p = jnp.exp(s - m)
      l = p.sum(axis=-1, keepdims=True)
      o = jnp.matmul(p.astype(vv.dtype), vv, preferred_element_type=jnp.float32) / l
      return o.astype(vv.dtype), (m + jnp.log(l))[:, 0]

    return jax.lax.map(step, q_tiles)

  out, lse = jax.lax.map(head, (qt, kh, vh))
  return _untile(out, g, lq), lse


def _query_tiled_bwd(tile, residuals, dout):
  q, k, v, out, lse = residuals
  g, lq, h, d = q.shape
  scale = 1.0 / math.sqrt(d)
  qt = _query_tiles(q / jnp.sqrt(d).astype(q.dtype), tile)
  dot = _query_tiles(dout.astype(jnp.float32), tile)
  delta = _query_tiles((dout.astype(jnp.float32) * out.astype(jnp.float32)).sum(-1, keepdims=True), tile)
  kh, vh = _per_head(k), _per_head(v)

  def head(xs):
    q_tiles, do_tiles, lse_tiles, delta_tiles, kk, vv = xs
    kf, vf = kk.astype(jnp.float32), vv.astype(jnp.float32)

    def step(carry, ys):  # one tile of queries; dK, dV of the head accumulate over the tiles
      dk, dv = carry
      qi, doi, lsei, deltai = ys
      p = jnp.exp((qi @ kk.T).astype(jnp.float32) - lsei[:, None])  # (tile, Lk); padded queries: rows of 0 dO
      dv = dv + p.T @ doi
      ds = p * (doi @ vf.T - deltai)
      return (dk + ds.T @ qi.astype(jnp.float32), dv), ds @ kf

    zeros = jnp.zeros(kf.shape, jnp.float32)
    (dk, dv), dq = jax.lax.scan(step, (zeros, zeros), (q_tiles, do_tiles, lse_tiles, delta_tiles))
    return dq, dk, dv

  dq, dk, dv = jax.lax.map(head, (qt, dot, lse, delta, kh, vh))
  return ((_untile(dq, g, lq) * scale).astype(q.dtype), _untile(dk, g, k.shape[1]).astype(k.dtype),
          _untile(dv, g, v.shape[1]).astype(v.dtype))


def _key_blocks(k, v, block: int):
  """(G, Lk, H, d) keys and values -> (nb, G, block, H, d) each, and the (nb, block) mask of real keys."""
  g, lk, h, d = k.shape
  nb = -(-lk // block)
  split = lambda x: _pad_tokens(x, nb * block).reshape(g, nb, block, h, x.shape[-1]).swapaxes(0, 1)
  return split(k), split(v), (jnp.arange(nb * block) < lk).reshape(nb, block)


def _block_scores(q, kj, valid):
  """Scaled q (G, Lq, H, d) against one key block (G, bk, H, d) -> float32 scores (G, H, Lq, bk), masked."""
  s = jnp.einsum('gqhd,gkhd->ghqk', q, kj).astype(jnp.float32)
  return jnp.where(valid[None, None, None, :], s, -jnp.inf)


def _chunked_forward(q, k, v, block: int):
  g, lq, h, d = q.shape
  qs = q / jnp.sqrt(d).astype(q.dtype)
  kb, vb, valid = _key_blocks(k, v, block)

  def step(carry, xs):
    m, l, acc = carry  # (G, H, Lq), (G, H, Lq), (G, Lq, H, d_v)
    kj, vj, ok = xs
    s = _block_scores(qs, kj, ok)
    m_new = jnp.maximum(m, s.max(axis=-1))  # every block holds at least one real key: finite
    p = jnp.exp(s - m_new[..., None])
    corr = jnp.exp(m - m_new)
    l = l * corr + p.sum(axis=-1)
    pv = jnp.einsum('ghqk,gkhd->gqhd', p.astype(v.dtype), vj, preferred_element_type=jnp.float32)
    acc = acc * corr.transpose(0, 2, 1)[..., None] + pv
    return (m_new, l, acc), None

  init = (jnp.full((g, h, lq), -jnp.inf, jnp.float32), jnp.zeros((g, h, lq), jnp.float32),
          jnp.zeros((g, lq, h, v.shape[-1]), jnp.float32))
  (m, l, acc), _ = jax.lax.scan(step, init, (kb, vb, valid))
  out = (acc / l.transpose(0, 2, 1)[..., None]).astype(v.dtype)
  return out, m + jnp.log(l)  # output, log-sum-exp (G, H, Lq)


def _chunked_bwd(block, residuals, dout):
  q, k, v, out, lse = residuals
  g, lq, h, d = q.shape
  lk = k.shape[1]
  scale = 1.0 / math.sqrt(d)
  qs = q / jnp.sqrt(d).astype(q.dtype)
  kb, vb, valid = _key_blocks(k, v, block)
  do = dout.astype(jnp.float32)
  delta = jnp.einsum('gqhd,gqhd->ghq', do, out.astype(jnp.float32))  # rowsum(dO * O)

  def step(dq, xs):
    kj, vj, ok = xs
    p = jnp.exp(_block_scores(qs, kj, ok) - lse[..., None])  # (G, H, Lq, bk)
    dv = jnp.einsum('ghqk,gqhd->gkhd', p, do)
    dp = jnp.einsum('gqhd,gkhd->ghqk', do, vj.astype(jnp.float32))
    ds = p * (dp - delta[..., None])
    dq = dq + jnp.einsum('ghqk,gkhd->gqhd', ds, kj.astype(jnp.float32))
    dk = jnp.einsum('ghqk,gqhd->gkhd', ds, qs.astype(jnp.float32))
    return dq, (dk, dv)

  dq, (dk, dv) = jax.lax.scan(step, jnp.zeros((g, lq, h, d), jnp.float32), (kb, vb, valid))
  unblock = lambda x: x.swapaxes(0, 1).reshape(g, -1, h, x.shape[-1])[:, :lk]
  return (dq * scale).astype(q.dtype), unblock(dk).astype(k.dtype), unblock(dv).astype(v.dtype)


def _recomputing_vjp(forward, backward):
  """attend(q, k, v, tile) with a custom VJP: `forward(q, k, v, tile)` -> (out, lse); the residuals are
  (q, k, v, out, lse), from which `backward(tile, residuals, dout)` recomputes the probabilities tile by tile."""

  @functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
  def attend(q, k, v, tile):
    return forward(q, k, v, tile)[0]

  def attend_fwd(q, k, v, tile):
    out, lse = forward(q, k, v, tile)
    return out, (q, k, v, out, lse)

  attend.defvjp(attend_fwd, backward)
  return attend


_chunked = _recomputing_vjp(_chunked_forward, _chunked_bwd)  # tiled by keys
_query_tiled = _recomputing_vjp(_query_tiled_forward, _query_tiled_bwd)  # tiled by queries


def splash_attention(q, k, v, *, interpret: bool = False):
  """ViViT eq. 7 through the Pallas TPU splash-attention kernel, vmapped over the G groups.

  q: (G, Lq, H, d_h); k, v: (G, Lk, H, d_h) -> (G, Lq, H, d_h). The kernel works on (H, L, d_h) per group
  with blocks of 128-512 tokens: Lq and Lk are zero-padded to multiples of 128 (3137 -> 3200); the padded
  keys get segment id 1 and every query segment id 0, so no query attends a padded key (and no row of the
  mask is empty); padded query rows are dropped. interpret=True runs the kernel in Pallas' interpreter (any
  backend: the tests' parity check on CPU).
  """
  from jax.experimental.pallas.ops.tpu import splash_attention as sa  # pylint: disable=g-import-not-at-top
  g, lq, h, d = q.shape
  lk = k.shape[1]
  up = lambda n: -(-n // 128) * 128
  lqp, lkp = up(lq), up(lk)
  blk = lambda n: next(b for b in (512, 256, 128) if n % b == 0)
  bq, bkv = blk(lqp), blk(lkp)
  sizes = sa.BlockSizes(block_q=bq, block_kv=bkv, block_kv_compute=bkv, block_q_dkv=bq, block_kv_dkv=bkv,
                        block_kv_dkv_compute=bkv, block_q_dq=bq, block_kv_dq=bkv)
  mask = sa.MultiHeadMask([sa.FullMask((lqp, lkp))] * h)
  kernel = sa.make_splash_mha(mask, head_shards=1, q_seq_shards=1, block_sizes=sizes, interpret=interpret)
  segments = sa.SegmentIds(q=jnp.zeros((lqp,), jnp.int32), kv=(jnp.arange(lkp) >= lk).astype(jnp.int32))
  heads_first = lambda x, n: _heads_first(_pad_tokens(x, n))  # (G, H, L, d)
  qs = q / jnp.sqrt(d).astype(q.dtype)
  run = jax.vmap(kernel, in_axes=(0, 0, 0, None))
  spec = _splash_spec(g, h)
  if spec is not None:  # a Mosaic kernel is not partitioned by XLA: each device runs it on its own groups/heads
    run = jax.shard_map(run, in_specs=(spec, spec, spec, jax.sharding.PartitionSpec()), out_specs=spec,
                        check_vma=False)
  out = run(heads_first(qs, lqp), heads_first(k, lkp), heads_first(v, lkp), segments)
  return out.transpose(0, 2, 1, 3)[:, :lq]


def _splash_spec(groups: int, heads: int):
  """The PartitionSpec of splash's (G, H, L, d_h) operands under the mesh the step is traced with
  (`jax.sharding.use_abstract_mesh`, as vvt's steps do): G over the data-like axes (G is B or B x groups,
  batch-major), H over `model` (tensor-parallel heads), where they divide; None without a mesh of > 1 device."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or mesh.size <= 1:
    return None
  model = 'model' if mesh.shape.get('model', 1) > 1 and heads % mesh.shape['model'] == 0 else None
  return jax.sharding.PartitionSpec(traced_batch_axes(groups) or None, model, None, None)


def traced_batch_axes(size: int) -> tuple[str, ...]:
  """The data-like mesh axes (BATCH_AXES, those of > 1 device) that shard a leading axis of `size` under the mesh
  the caller is traced with (`jax.sharding.use_abstract_mesh`); () without a mesh or when they do not divide."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty:
    return ()
  axes = tuple(a for a in mesh.axis_names if a in BATCH_AXES and mesh.shape[a] > 1)
  return axes if axes and size % math.prod(mesh.shape[a] for a in axes) == 0 else ()


@functools.lru_cache(maxsize=None)
def _layout(stage: str, t: int, n: int, nh: int, nw: int):
  """How `stage` splits the (T, N) token axes: (split shape, group axes, sequence axes)."""
  if stage == 'joint':
    return (t, n), (), (1, 2)
  if stage == 'space':
    return (t, n), (1,), (2,)
  if stage == 'time':
    return (t, n), (2,), (1,)
  if n != nh * nw:
    raise ValueError(f'attention stage {stage!r} needs a pure patch grid, got {n} tokens for {nh}x{nw}')
  if stage == 'width':
    return (t, nh, nw), (1, 2), (3,)
  if stage == 'height':
    return (t, nh, nw), (1, 3), (2,)
  if stage == 'local':  # (T, 2, n_h/2, 2, n_w/2): one group per quadrant.
    return (t, 2, nh // 2, 2, nw // 2), (2, 4), (1, 3, 5)
  if stage == 'global':  # (T/2, 2, n_h/2, 2, n_w/2, 2): one group per parity, stride 2.
    return (t // 2, 2, nh // 2, 2, nw // 2, 2), (2, 4, 6), (1, 3, 5)
  raise ValueError(f'unknown attention stage {stage!r}; expected one of {STAGES}')


def group(x, stage: str, grid):
  """(B, T, N, *F) -> (B * G, L, *F): the groups of tokens that attend to each other in `stage`."""
  b, t, n = x.shape[:3]
  feat = x.shape[3:]
  split, gaxes, saxes = _layout(stage, t, n, grid[1], grid[2])
  x = x.reshape(b, *split, *feat)
  nf = len(feat)
  faxes = tuple(range(len(split) + 1, len(split) + 1 + nf))
  x = x.transpose(0, *gaxes, *saxes, *faxes)
  seq = math.prod(split[a - 1] for a in saxes)
  return x.reshape(-1, seq, *feat)


def ungroup(y, stage: str, grid, batch: int, t: int, n: int):
  """Inverse of `group`: (B * G, L, *F) -> (B, T, N, *F)."""
  feat = y.shape[2:]
  split, gaxes, saxes = _layout(stage, t, n, grid[1], grid[2])
  perm = (0, *gaxes, *saxes)
  y = y.reshape(batch, *(split[a - 1] for a in perm[1:]), *feat)
  inverse = [perm.index(i) for i in range(len(perm))]
  nf = len(feat)
  y = y.transpose(*inverse, *range(len(perm), len(perm) + nf))
  return y.reshape(batch, t, n, *feat)


def temporal_shift(x, *, window: int, shift_div: int, num_segments: int | None = None):
  """X-ViT eq. 9: channels of frame t taken from frames t +- i (i = 1..window), zeros at the clip ends.

  x: (B, T, N, C) with C the flat channel index (head * d_h + j). With fold = C // shift_div, for i = 1..window
  channels [(2i-2) fold, (2i-1) fold) come from frame t+i and [(2i-1) fold, 2i fold) from frame t-i; the rest
  stay at frame t. num_segments (a divisor of T; None = T): the frames are cut into T / num_segments
  consecutive segments, each shifted as a clip of its own: (B, T, ...) -> (B * T/num_segments, num_segments, ...).
  """
  b, t = x.shape[:2]
  if num_segments is not None and num_segments != t:
    if t % num_segments:
      raise ValueError(f'temporal_shift: {t} temporal indices are not a multiple of num_segments={num_segments}')
    y = temporal_shift(x.reshape(b * (t // num_segments), num_segments, *x.shape[2:]), window=window,
                       shift_div=shift_div)
    return y.reshape(x.shape)
  c = x.shape[-1]
  fold = c // shift_div
  parts = []
  for i in range(1, window + 1):
    nxt = x[..., (2 * i - 2) * fold:(2 * i - 1) * fold]
    prv = x[..., (2 * i - 1) * fold:2 * i * fold]
    zeros = jnp.zeros_like(nxt[:, :i])
    parts.append(jnp.concatenate([nxt[:, i:], zeros], axis=1))  # frame t sees t+i
    parts.append(jnp.concatenate([zeros, prv[:, :-i]], axis=1))  # frame t sees t-i
  parts.append(x[..., 2 * window * fold:])
  return jnp.concatenate(parts, axis=-1)


class MultiHeadAttention(nn.Module):
  """Multi-head self-attention over the neighbourhood of `stage` (ViViT eq. 7 with W_q, W_k, W_v, W_O).

  Call with x (B, T, N, D) and an optional global class token cls (B, 1, D); returns (y, cls_y) of the same
  shapes, cls_y None where the class token does not join the stage (`time`: TimeSformer leaves it untouched). Projections are named like flax's
  MultiHeadDotProductAttention (query, key, value: (D, H, d_h); out: (H, d_h, D)).
  """
  num_heads: int
  qkv_bias: bool = True
  dropout_rate: float = 0.0
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32
  kernel_init: Any = nn.initializers.xavier_uniform()
  impl: str = 'einsum'  # one of IMPLS: how `dot_product_attention` runs (per stage for 'auto')
  backend: str | None = None  # the backend 'auto' chooses for (None: jax's default backend)

  @nn.compact
  def __call__(self, x, cls, *, stage: str, grid, mixing=None, train: bool = False):
    b, t, n, d = x.shape
    h = self.num_heads
    dense = functools.partial(nn.DenseGeneral, features=(h, d // h), axis=-1, use_bias=self.qkv_bias,
                              dtype=self.dtype, param_dtype=self.param_dtype, kernel_init=self.kernel_init)
    proj = {name: dense(name=name) for name in ('query', 'key', 'value')}
    q, k, v = (proj[name](x) for name in ('query', 'key', 'value'))  # (B, T, N, H, d_h)
    has_cls = cls is not None
    if has_cls:
      cq, ck, cv = (proj[name](cls) for name in ('query', 'key', 'value'))  # (B, 1, H, d_h)

    extra_kv = None
    if mixing is not None:  # X-ViT space-time mixing of keys and values (eq. 9), within segments.
      seg = mixing.get('num_segments') or t  # temporal indices per segment
      shift = functools.partial(temporal_shift, window=mixing.window, shift_div=mixing.shift_div, num_segments=seg)
      k = shift(k.reshape(b, t, n, d)).reshape(k.shape)
      v = shift(v.reshape(b, t, n, d)).reshape(v.shape)
      if mixing.summary_token:  # one summary token (spatial mean) per frame, seen by every frame of its segment.
        summary = jnp.mean(x, axis=2)  # (B, T, D)
        sk, sv = proj['key'](summary), proj['value'](summary)  # (B, T, H, d_h)
        per_frame = lambda s: jnp.repeat(s.reshape(b * (t // seg), 1, seg, h, d // h), seg, axis=1).reshape(
            b * t, seg, h, d // h)  # (B*T, seg, H, d_h): the summaries of the frame's segment
        extra_kv = (per_frame(sk), per_frame(sv))

    rng = self.make_rng('dropout') if train and self.dropout_rate > 0 else None
    attend = functools.partial(dot_product_attention, dropout_rate=self.dropout_rate, dropout_rng=rng,
                               deterministic=not train, impl=self.impl, backend=self.backend)

    def run(stage, q, k, v, cls_qkv):
      """Attention of `stage` over (B, T, N, H', d_h) tensors; returns (y, cls_y or None)."""
      gq, gk, gv = (group(a, stage, grid) for a in (q, k, v))
      if extra_kv is not None:
        if stage != 'space':
          raise ValueError('summary tokens are defined for space(-time mixing) attention only')
        gk = jnp.concatenate([gk, extra_kv[0]], axis=1)
        gv = jnp.concatenate([gv, extra_kv[1]], axis=1)
      with_cls = cls_qkv is not None and stage in _CLASS_TOKEN_STAGES
      if with_cls:
        groups = gq.shape[0] // b
        cq, ck, cv = (jnp.repeat(a, groups, axis=0) for a in cls_qkv)
        gq, gk, gv = (jnp.concatenate([c, g], axis=1) for c, g in ((cq, gq), (ck, gk), (cv, gv)))
      out = attend(gq, gk, gv)
      cls_out = None
      if with_cls:
        cls_out = out[:, :1].reshape(b, -1, *out.shape[2:]).mean(axis=1, keepdims=True)
        out = out[:, 1:]
      return ungroup(out, stage, grid, b, t, n), cls_out

    cls_qkv = (cq, ck, cv) if has_cls else None
    if stage == 'factorised_dot_product':  # ViViT Model 4: half the heads in space, half in time.
      if has_cls:
        raise ValueError('factorised_dot_product attention has no class token')
      half = h // 2
      ys, _ = run('space', q[..., :half, :], k[..., :half, :], v[..., :half, :], None)
      yt, _ = run('time', q[..., half:, :], k[..., half:, :], v[..., half:, :], None)
      y, cy = jnp.concatenate([ys, yt], axis=-2), None
    else:
      y, cy = run(stage, q, k, v, cls_qkv)

    out = nn.DenseGeneral(features=d, axis=(-2, -1), dtype=self.dtype, param_dtype=self.param_dtype,
                          kernel_init=self.kernel_init, name='out')
    return out(y), (out(cy) if cy is not None else None)
