"""Tube masks of masked video pretraining (VideoMAE, Tong et al. 2022, sec. 3.3 "tube masking"): the same spatial
positions are masked in every temporal index of a clip, so that a masked patch cannot be read off its neighbours in
time; and random masks (`random_mask`, the per-token masking VideoMAE's ablations compare tube masking with): each
token of the clip on its own, so that a masked patch may be read off its neighbours in time.

    kept, masked = tube_mask(rng, batch, grid, ratio)     # (B, n_t * K_s), (B, n_t * M_s) int32
    kept, masked = random_mask(rng, batch, grid, ratio)   # (B, K), (B, M) int32, M = int(ratio * n_t * N)
    kept, masked = draw('tube' | 'random', rng, batch, grid, ratio)

For a token grid (n_t, n_h, n_w) of N = n_h * n_w spatial positions, M_s = int(ratio * N) positions are masked per
clip (VideoMAE's TubeMaskingGenerator: `int(mask_ratio * frames_patches)` masked per frame) and K_s = N - M_s
kept: a fixed count, so a step compiles once. Which positions is drawn per clip from `rng` (uniform noise per
position, its K_s smallest kept, as MAE's per-sample shuffle): the train step's rng is `fold_in(run rng, step)`,
so a resumed run draws the same masks. Indices are into the flattened token grid, time-major (t * N + s), sorted:
the layout the masked encoder takes (vvt/models/masking.py).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def counts(grid, ratio: float) -> tuple[int, int]:
  """(K_s kept, M_s masked) spatial positions per temporal index of a tube mask of `ratio` on `grid`."""
  n = int(grid[1]) * int(grid[2])
  masked = int(ratio * n)
  return n - masked, masked


def tube_mask(rng, batch: int, grid, ratio: float):
  """(kept (B, n_t * K_s), masked (B, n_t * M_s)) int32 token indices of a tube mask per clip (module docstring)."""
  t, n = int(grid[0]), int(grid[1]) * int(grid[2])
  keep, _ = counts(grid, ratio)
  if keep < 1:
    raise ValueError(f'mask ratio {ratio} keeps no spatial position of {n}')
  order = jnp.argsort(jax.random.uniform(rng, (batch, n)), axis=1)
  frames = (jnp.arange(t, dtype=jnp.int32) * n)[None, :, None]  # (1, t, 1)
  spread = lambda s: (jnp.sort(s, axis=1)[:, None, :].astype(jnp.int32) + frames).reshape(batch, -1)
  return spread(order[:, :keep]), spread(order[:, keep:])


def random_mask(rng, batch: int, grid, ratio: float):
  """(kept (B, K), masked (B, M)) int32 indices of a random mask per clip over all n_t * N tokens: M =
  int(ratio * n_t * N) tokens masked, each drawn on its own (uniform noise per token, its K smallest kept), sorted.
  Only an encoder of joint attention takes it (vvt/models/masking.py: any set of kept tokens)."""
  total = int(grid[0]) * int(grid[1]) * int(grid[2])
  keep = total - int(ratio * total)
  if keep < 1:
    raise ValueError(f'mask ratio {ratio} keeps no token of {total}')
  order = jnp.argsort(jax.random.uniform(rng, (batch, total)), axis=1).astype(jnp.int32)
  return jnp.sort(order[:, :keep], axis=1), jnp.sort(order[:, keep:], axis=1)


KINDS = {'tube': tube_mask, 'random': random_mask}  # task.mae.masking


def draw(kind: str, rng, batch: int, grid, ratio: float):
  """(kept, masked) of a mask of `kind` ('tube' or 'random', `KINDS`) per clip."""
  return KINDS[kind](rng, batch, grid, ratio)


def boolean(masked, total: int):
  """(B, total) bool: True at the masked tokens (transformers' `bool_masked_pos`)."""
  b = masked.shape[0]
  return jnp.zeros((b, total), bool).at[jnp.arange(b)[:, None], masked].set(True)
