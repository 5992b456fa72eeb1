"""V-JEPA's 3-D multi-block masks (Bardes et al. 2024, "Revisiting Feature Prediction for Learning Visual
Representations from Video", sec. 3.2 / appendix; facebookresearch/jepa `src/masks/multiblock3d.py`): per clip, a
set of `num_blocks` rectangles of the spatial token grid is masked, each spanning the whole clip in time, and the
predictor predicts the tokens of their union from the rest (the context).

A mask set (`BlockSet`): `num_blocks` blocks, each of `scale` x (h x w) spatial tokens (a scale drawn uniformly
from `scale`'s range) and aspect ratio h / w drawn uniformly from `aspect_ratio`; block height round(sqrt(n * r)),
width round(sqrt(n / r)) clipped to the grid (and at least 1), its top-left corner uniform over the positions where
it fits (as `_MaskGenerator._sample_block_size` / `_sample_block_mask` do). V-JEPA's two sets (its configs
`configs/pretrain/vitl16.yaml` `mask:`): short-range, 8 blocks of scale 0.15, and long-range, 2 blocks of scale
0.7, both of aspect ratio 0.75 - 1.5 and temporal scale 1.0 (every block covers every time step): `VJEPA_SETS`.
Each set is its own (context, target) pair, predicted with its own mask token (the reference runs the encoder and
predictor once per set and averages the losses).

Because every block covers the whole clip, the masked positions are the same in every time step: the context is a
tube layout, `(T', K_c)` spatial positions repeated over the T' temporal tokens, so the factorised schemes run on it
as on any tube mask. Indices are into the flattened (T' x N) token grid, time-major: t * N + s.

Fixed counts (the step compiles once): the reference truncates every clip's context and target index lists to the
smallest counts in its batch (`min_keep_enc`, `min_keep_pred`), a different length per batch. A jitted step needs
the same lengths at every step, so the counts are fixed per set and grid: `fixed_counts` draws 512 clips' masks
from a fixed key and takes the 10th percentile of the union's size (targets K_t) and of its complement's (context
K_c); K_t + K_c <= N. Per clip the spatial positions are ranked masked-first (random order within the masked and
within the unmasked): the targets are the first K_t, the context the last K_c. A clip whose union holds at least K_t
positions and leaves at least K_c free (9 clips in 10 or more) is truncated exactly as the reference truncates, to
random subsets of the union and of its complement; otherwise the shorter side is topped up from the other side's
positions that neither list takes, so context and targets never share a position.

Masks are a function of the rng the task gives (the step's `fold_in(state.rng, step)`): a resumed run draws the
same masks. Evaluation draws them from a fixed key (`eval_key`).
"""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class BlockSet:
  """One mask set: `num_blocks` blocks of spatial scale in [scale[0], scale[1]] and aspect ratio h / w in
  [aspect_ratio[0], aspect_ratio[1]], each over every time step."""
  num_blocks: int
  scale: tuple[float, float]
  aspect_ratio: tuple[float, float] = (0.75, 1.5)


# facebookresearch/jepa configs/pretrain/vitl16.yaml `mask:` (the V-JEPA 2 configs keep the same two sets).
VJEPA_SETS = (BlockSet(8, (0.15, 0.15)), BlockSet(2, (0.7, 0.7)))
COUNT_DRAWS = 512       # clips drawn by `fixed_counts`
COUNT_PERCENTILE = 10   # the percentile of the union's (complement's) size that fixes K_t (K_c)


def eval_key(seed: int = 0) -> jax.Array:
  """The fixed key an evaluation draws its masks from (the same masks at every evaluation)."""
  return jax.random.PRNGKey(seed)


def _block_size(rng, block_set: BlockSet, height: int, width: int):
  """(h, w) int32 of one block: the scale and aspect ratio drawn uniformly from their ranges."""
  r_scale, r_ratio = jax.random.split(rng)
  lo, hi = block_set.scale
  scale = lo + jax.random.uniform(r_scale) * (hi - lo)
  lo, hi = block_set.aspect_ratio
  ratio = lo + jax.random.uniform(r_ratio) * (hi - lo)
  n = jnp.floor(height * width * scale)
  h = jnp.clip(jnp.round(jnp.sqrt(n * ratio)), 1, height).astype(jnp.int32)
  w = jnp.clip(jnp.round(jnp.sqrt(n / ratio)), 1, width).astype(jnp.int32)
  return h, w


def union_mask(rng, block_set: BlockSet, height: int, width: int):
  """bool (height * width,): the union of the set's blocks of one clip (row-major spatial positions)."""
  rows = jnp.arange(height)[:, None]
  cols = jnp.arange(width)[None, :]

  def block(key):
    r_size, r_top, r_left = jax.random.split(key, 3)
    h, w = _block_size(r_size, block_set, height, width)
    top = jax.random.randint(r_top, (), 0, height - h + 1)
    left = jax.random.randint(r_left, (), 0, width - w + 1)
    return (rows >= top) & (rows < top + h) & (cols >= left) & (cols < left + w)

  blocks = jax.vmap(block)(jax.random.split(rng, block_set.num_blocks))
  return jnp.any(blocks, axis=0).reshape(-1)


@functools.lru_cache(maxsize=64)
def fixed_counts(block_set: BlockSet, height: int, width: int) -> tuple[int, int]:
  """(K_t, K_c): the fixed numbers of target and context spatial positions of `block_set` on a height x width grid
  (the module docstring), each at least 1. ValueError when the grid cannot give both."""
  n = height * width
  if n < 2:
    raise ValueError(f'a multi-block mask needs at least 2 spatial tokens; the grid is {height} x {width}')
  with jax.ensure_compile_time_eval():  # concrete even when first asked while a step is traced
    keys = jax.random.split(jax.random.PRNGKey(0), COUNT_DRAWS)
    sizes = np.asarray(jax.jit(jax.vmap(lambda k: jnp.sum(union_mask(k, block_set, height, width))))(keys))
  targets = int(np.percentile(sizes, COUNT_PERCENTILE, method='lower'))
  context = int(np.percentile(n - sizes, COUNT_PERCENTILE, method='lower'))
  targets = min(max(targets, 1), n - 1)
  context = min(max(context, 1), n - targets)
  return targets, context


def spatial_split(rng, block_set: BlockSet, height: int, width: int, counts: tuple[int, int]):
  """(target (K_t,), context (K_c,)) int32 spatial positions of one clip, each sorted: the union ranked first in a
  random order, then the rest in a random order; the targets the first K_t, the context the last K_c."""
  r_mask, r_order = jax.random.split(rng)
  masked = union_mask(r_mask, block_set, height, width)
  key = masked.astype(jnp.float32) + jax.random.uniform(r_order, masked.shape)  # masked: [1, 2), free: [0, 1)
  order = jnp.argsort(-key)
  k_t, k_c = counts
  return jnp.sort(order[:k_t]).astype(jnp.int32), jnp.sort(order[order.shape[0] - k_c:]).astype(jnp.int32)


def over_time(spatial, num_frames: int, tokens_per_frame: int):
  """(B, K) spatial positions -> (B, T' * K) indices into the flattened (T' x N) grid, time-major (t * N + s)."""
  t = jnp.arange(num_frames, dtype=jnp.int32)[None, :, None] * tokens_per_frame
  return (t + spatial[:, None, :]).reshape(spatial.shape[0], -1)


def sample(rng, batch_size: int, block_set: BlockSet, grid: tuple[int, int, int]):
  """(context (B, T' * K_c), target (B, T' * K_t)) int32 token indices of `block_set` for a batch on `grid`
  (T', h, w): one independent draw per clip (keys split from `rng`), the counts `fixed_counts`."""
  frames, height, width = grid
  counts = fixed_counts(block_set, height, width)
  split = functools.partial(spatial_split, block_set=block_set, height=height, width=width, counts=counts)
  target, context = jax.vmap(split)(jax.random.split(rng, batch_size))
  n = height * width
  return over_time(context, frames, n), over_time(target, frames, n)
