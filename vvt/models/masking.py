"""The encoder on kept tokens only (masked pretraining: VideoMAE, V-JEPA): which schemes allow it, and the layout
of the kept tokens.

A masked call of any model family takes `kept` (B, K) int32: indices into the flattened token grid (n_t x N,
time-major: index t * N + s for temporal index t and spatial position s = h * n_w + w) of the tokens the encoder
runs on. The positional embedding (learned table, sine-cosine, V-JEPA 2's RoPE) is added on the full grid and the
tokens are gathered with it (RoPE: the kept tokens' own (t, h, w) rotate q and k), then the blocks run on K tokens.

Layout of the K kept tokens inside the encoder:
  joint attention only (ViViT Model 1, TimeSformer 'ST')   (B, 1, K, D): any set of kept tokens, in `kept`'s order.
  space / time factorisations (ViViT Models 2, 3, 4,      (B, n_t, K_s, D), K = n_t * K_s: a *tube* mask only,
  TimeSformer 'S' and 'T+S', VideoPrism)                  the same K_s spatial positions kept in every temporal
                                                          index, `kept` time-major (row t holds t * N + s_j for
                                                          the same s_0 < ... < s_{K_s - 1}, as
                                                          `vvt.tasks.masks.tube_mask` makes it). Space attention
                                                          runs over the K_s kept positions of a temporal index,
                                                          time attention over the n_t tokens of a kept position.
A scheme where dropping tokens has no meaning is refused (`refusal`): X-ViT's space-time mixing shifts channels
from the same spatial position of neighbouring frames, and TimeSformer's local-global and axial windows are
defined on the full (n_h, n_w) grid. A per-frame class token is refused too (it would sit among the patch tokens).

This module imports no JAX at load (the task's config check calls `refusal`).
"""
from __future__ import annotations

from vvt.models import schemes

# stages whose groups are rows, columns or windows of the full (n_h, n_w) grid: meaningless on kept tokens
GRID_STAGES = ('width', 'height', 'local', 'global')


def refusal(attention: str, class_token=None, classifier: str | None = None) -> str | None:
  """Why the encoder of `model.attention` cannot run on kept tokens only (one line), or None where it can."""
  scheme = schemes.get(attention)
  if scheme.temporal_mixing:
    return (f'model.attention={attention!r} ({scheme.paper}) shifts keys and values in from the same spatial '
            'positions of neighbouring frames: the encoder cannot drop tokens')
  windows = [g for g in scheme.groupings if g in GRID_STAGES]
  if windows:
    return (f'model.attention={attention!r} ({scheme.paper}) attends within {"/".join(windows)} windows of the '
            'full spatial grid: the encoder cannot drop tokens')
  if class_token == 'per_frame' and classifier in (None, 'token'):
    return 'model.class_token=\'per_frame\' sits among every frame\'s patch tokens: the encoder cannot drop tokens'
  return None


def tube_only(stages) -> bool:
  """Whether kept tokens must be a tube mask laid out (n_t, K_s): any stage other than joint attention."""
  return any(s != 'joint' for s in stages)


def check_shape(kept, b: int, rows: int) -> None:
  """ValueError unless `kept` is (B, K) token indices, K a multiple of `rows`."""
  if kept.ndim != 2 or kept.shape[0] != b or kept.shape[1] % rows:
    raise ValueError(f'kept must be (B, K) = ({b}, a multiple of {rows}) token indices, got {tuple(kept.shape)}')


def table_rows(table, kept, rows: int):
  """The rows of a table (T, N, D) that every clip shares (a positional embedding) at each clip's `kept` (B, K)
  -> (B, rows, K / rows, D), gathered from the table itself (no (B, T, N, D) copy of it)."""
  import jax.numpy as jnp
  t, n, d = table.shape
  b, k = kept.shape
  check_shape(kept, b, rows)
  return jnp.take(table.reshape(t * n, d), kept.astype(jnp.int32), axis=0).reshape(b, rows, k // rows, d)


def gather(x, kept, rows: int):
  """Tokens x (B, T, N, ...) at `kept` (B, K) (indices into the flattened T x N) -> (B, rows, K / rows, ...)."""
  import jax.numpy as jnp
  b, t, n = x.shape[:3]
  check_shape(kept, b, rows)
  flat = x.reshape(b, t * n, *x.shape[3:])
  idx = kept.astype(jnp.int32).reshape(b, -1, *(1,) * (x.ndim - 3))
  out = jnp.take_along_axis(flat, idx, axis=1)
  return out.reshape(b, rows, kept.shape[1] // rows, *x.shape[3:])


def per_frame(kept, t: int, n: int):
  """A tube mask's `kept` (B, t * K_s) time-major -> the spatial positions of each temporal index (B * t, K_s):
  what an encoder over single temporal indices (ViViT Model 2's, VideoPrism's spatial encoder) keeps."""
  b, k = kept.shape
  if k % t:
    raise ValueError(f'a tube mask keeps the same spatial positions in all {t} temporal indices: K={k} is not a '
                     f'multiple of {t}')
  return (kept.reshape(b * t, k // t) % n).astype(kept.dtype)
