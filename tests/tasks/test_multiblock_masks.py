"""V-JEPA's multi-block masks (vvt/tasks/multiblock_masks.py): fixed counts, context and targets disjoint, the same
spatial positions in every time step, the targets the blocks' union where it is large enough, and determinism from
the rng."""
import jax
import numpy as np

from vvt.tasks import multiblock_masks as mb

GRID = (2, 8, 8)  # T' = 2 temporal tokens of 8 x 8
N = GRID[1] * GRID[2]


_SAMPLE = jax.jit(mb.sample, static_argnums=(1, 2, 3))  # compiled once per mask set


def _draw(block_set, seed, batch=16):
  context, target = _SAMPLE(jax.random.PRNGKey(seed), batch, block_set, GRID)
  return np.asarray(context), np.asarray(target)


def test_fixed_counts_disjoint_and_the_same_in_every_time_step():
  for block_set in mb.VJEPA_SETS:
    k_t, k_c = mb.fixed_counts(block_set, GRID[1], GRID[2])
    assert k_t >= 1 and k_c >= 1 and k_t + k_c <= N
    for seed in (0, 1):
      context, target = _draw(block_set, seed)
      assert context.shape == (16, GRID[0] * k_c) and target.shape == (16, GRID[0] * k_t)
      for c, t in zip(context, target, strict=True):
        assert not set(c) & set(t)
        for idx in (c, t):
          assert len(set(idx)) == idx.size and idx.min() >= 0 and idx.max() < GRID[0] * N
          per_step = idx.reshape(GRID[0], -1)
          np.testing.assert_array_equal(per_step - np.arange(GRID[0])[:, None] * N, per_step[:1].repeat(GRID[0], 0))


def test_targets_are_the_union_of_the_blocks():
  """Where the union holds at least K_t positions and leaves K_c free, the targets lie in the union and the
  context outside it; the short-range set's union has more than one block's positions (blocks are unions)."""
  block_set = mb.VJEPA_SETS[0]
  counts = mb.fixed_counts(block_set, GRID[1], GRID[2])
  keys = jax.random.split(jax.random.PRNGKey(3), 64)

  def draw(k):  # spatial_split draws its union from the first half of its key
    union = mb.union_mask(jax.random.split(k)[0], block_set, GRID[1], GRID[2])
    return (union,) + mb.spatial_split(k, block_set, GRID[1], GRID[2], counts)

  unions, targets, contexts = (np.asarray(a) for a in jax.jit(jax.vmap(draw))(keys))
  exact = 0
  for union, t, c in zip(unions, targets, contexts, strict=True):
    if union.sum() >= counts[0] and (~union).sum() >= counts[1]:
      exact += 1
      assert union[t].all() and not union[c].any()
  assert exact >= 0.8 * len(keys)
  one_block = int(np.floor(N * block_set.scale[0]))
  assert np.median(unions.sum(axis=1)) > 2 * one_block


def test_masks_are_a_function_of_the_rng():
  a, b, c = _draw(mb.VJEPA_SETS[0], 7), _draw(mb.VJEPA_SETS[0], 7), _draw(mb.VJEPA_SETS[0], 8)
  np.testing.assert_array_equal(a[0], b[0])
  np.testing.assert_array_equal(a[1], b[1])
  assert not np.array_equal(a[1], c[1])
  assert len({tuple(t) for t in a[1]}) > 8  # clips of one batch draw their own masks
