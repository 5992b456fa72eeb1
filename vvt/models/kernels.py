"""The one attention primitive, softmax(Q K^T / sqrt(d_h)) V (ViViT eq. 7, TimeSformer eq. 5, X-ViT eq. 10), and
its implementations (`model.attention_impl`; all compute the same function on groups of tokens):

  q: (G, Lq, H, d_h); k, v: (G, Lk, H, d_h) -> (G, Lq, H, d_h)   G groups (batch x neighbourhoods)

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
Only `einsum` implements attention dropout and VideoPrism's logit cap (`logit_cap`: scores -> c * tanh(scores / c)
before the softmax); the config refuses attention_dropout_rate > 0 or a cap with the others, and `auto` then picks
`einsum` everywhere. What each implementation asks of the backend is checked in one place each:
`check_backend` (splash: TPU only), `uses_cudnn` (cuDNN: GPU, half precision, head size), `check_dropout`.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from vvt.models import axes
from vvt.models.config import ATTENTION_IMPLS

AUTO_MIN_LENGTH = 1024  # auto: groups of at least this many queries or keys leave einsum
CHUNK_SIZE = 512  # chunked, tiled by keys (GPU, TPU): keys per block
QUERY_TILE = 128  # chunked, tiled by queries (CPU): queries per tile


def check_backend(impl: str, backend: str, field: str = 'attention_impl') -> None:
  """ValueError where `impl` cannot run on `backend`: splash is the Pallas TPU kernel."""
  if impl == 'splash' and backend != 'tpu':
    raise ValueError(f"{field}='splash' is the Pallas TPU kernel: it runs on backend 'tpu' only, not backend "
                     f"{backend!r}; use 'auto', 'chunked' or 'dot_product'")


def check_dropout(impl: str, dropout_rate: float) -> None:
  """ValueError for attention dropout with an implementation other than einsum."""
  if impl != 'einsum':
    raise ValueError(f'attention_impl={impl!r} has no attention dropout (rate {dropout_rate}): use einsum or auto')


def uses_cudnn(backend: str, head_dim: int, dtype) -> bool:
  """Whether dot_product runs cuDNN flash attention: on GPU, where cuDNN takes the head size and dtype."""
  return backend == 'gpu' and cudnn_supports(head_dim, dtype)


def dot_product_attention(q, k, v, *, dropout_rate=0.0, dropout_rng=None, deterministic=True, impl='einsum',
                          backend=None, logit_cap=None):
  """Softmax(Q K^T / sqrt(d_h)) V, per head (ViViT eq. 7, TimeSformer eq. 5, X-ViT eq. 10).

  q: (G, Lq, H, d_h); k, v: (G, Lk, H, d_h) -> (G, Lq, H, d_h): G groups (batch x neighbourhoods) of tokens.
  The softmax is computed in float32 by every implementation. `impl` is one of ATTENTION_IMPLS (see the module
  docstring; 'auto' is resolved by `choose_impl` from Lq, Lk and `backend`, default: jax's default backend).
  Attention dropout (train mode, dropout_rate > 0) exists in 'einsum' only; the others raise ValueError.
  logit_cap c (None: none): the scaled scores s become c * tanh(s / c) before the softmax (VideoPrism), 'einsum'
  only (`auto` chooses it).
  """
  backend = backend or jax.default_backend()
  dropout = not deterministic and dropout_rate > 0.0
  impl = choose_impl(impl, backend=backend, q_len=q.shape[1], kv_len=k.shape[1], head_dim=q.shape[-1],
                     dtype=q.dtype, dropout=dropout_rate > 0.0 or logit_cap is not None)
  if impl == 'einsum':
    return einsum_attention(q, k, v, dropout_rate=dropout_rate if dropout else 0.0, dropout_rng=dropout_rng,
                            logit_cap=logit_cap)
  if logit_cap is not None:
    raise ValueError(f'attention_impl={impl!r} has no logit cap (cap {logit_cap}): use einsum or auto')
  if dropout:
    check_dropout(impl, dropout_rate)
  if impl == 'chunked':
    return chunked_attention(q, k, v, backend=backend)
  if impl == 'dot_product':
    return xla_dot_product_attention(q, k, v, cudnn=uses_cudnn(backend, q.shape[-1], q.dtype))
  if impl == 'splash':
    check_backend(impl, backend)
    return splash_attention(q, k, v)
  raise ValueError(f'unknown attention implementation {impl!r}; expected one of {ATTENTION_IMPLS}')


def choose_impl(impl: str, *, backend: str, q_len: int, kv_len: int, head_dim: int, dtype, dropout: bool) -> str:
  """The implementation `auto` stands for in one attention stage (any other `impl` is returned as it is).

  einsum when the stage's groups are short (max(Lq, Lk) < AUTO_MIN_LENGTH = 1024: ViViT's 8- or 16-token
  temporal and 197-token spatial stages, TimeSformer's divided / axial / local stages: their (Lq, Lk) scores
  are small and einsum is the fastest) or when attention dropout or a logit cap is on (`dropout`: only einsum
  has them); for long groups
  (ViViT Model 1 / TimeSformer joint: 1569-3137 tokens) splash on TPU, dot_product (cuDNN flash attention)
  on GPU where cuDNN takes the dtype and head size, chunked otherwise (CPU, float32 GPU).
  """
  if impl != 'auto':
    return impl
  if dropout or max(q_len, kv_len) < AUTO_MIN_LENGTH:
    return 'einsum'
  if backend == 'tpu':
    return 'splash'
  if uses_cudnn(backend, head_dim, dtype):
    return 'dot_product'
  return 'chunked'


def cudnn_supports(head_dim: int, dtype) -> bool:
  """Whether cuDNN flash attention (jax.nn.dot_product_attention(implementation='cudnn')) takes the call."""
  return jnp.dtype(dtype) in (jnp.bfloat16, jnp.float16) and head_dim <= 128 and head_dim % 8 == 0


def einsum_attention(q, k, v, *, dropout_rate=0.0, dropout_rng=None, logit_cap=None, mask=None):
  """ViViT eq. 7 as two einsums: scores (G, H, Lq, Lk) in float32, dropout on the weights where rate > 0; with
  `logit_cap` c the scores become c * tanh(scores / c) first (VideoPrism's cap, in float32). `mask` (bool,
  broadcasting to (G, H, Lq, Lk); None: none): the keys a query may attend to (the text towers' causal and padding
  mask, vvt/models/text.py), applied after the cap; a masked score becomes float32's lowest value.

  q, k, v are put heads-first, (G, H, L, d_h), before the einsums and the output back after: the batched
  matmuls then contract the minor axis with (G, H) leading, which XLA's CPU dot runs 4x faster than on the
  (G, L, H, d_h) layout (BENCHMARKS.md, CPU attention); on GPU / TPU the transposes fold into the dots."""
  q = _heads_first(q / jnp.sqrt(q.shape[-1]).astype(q.dtype))
  logits = jnp.einsum('ghqd,ghkd->ghqk', q, _heads_first(k)).astype(jnp.float32)
  if logit_cap is not None:
    logits = logit_cap * jnp.tanh(logits / logit_cap)
  if mask is not None:
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
  weights = jax.nn.softmax(logits, axis=-1).astype(v.dtype)
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
  from jax.experimental.pallas.ops.tpu import splash_attention as sa
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
  (`jax.sharding.use_abstract_mesh`, as vvt's steps do): G over the mesh axes of logical `batch` (G is B or
  B x groups, batch-major), H over those of `heads` (tensor-parallel heads), by the active logical axis rules
  (`axes.axis_rules`), where they divide; None without a mesh of > 1 device."""
  mesh = jax.sharding.get_abstract_mesh()
  if mesh.empty or mesh.size <= 1:
    return None
  head_axes = axes.traced_axes(axes.HEADS, heads)
  head_entry = head_axes[0] if len(head_axes) == 1 else (head_axes or None)
  return jax.sharding.PartitionSpec(axes.traced_axes(axes.BATCH, groups) or None, head_entry, None, None)
