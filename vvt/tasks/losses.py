"""Classification losses and on-device mixup / cutmix.

Targets are always soft distributions `{head: (B, C_head)}`, so label
smoothing, mixup and cutmix compose. A single-head model uses the head name
`''` internally (batch key `label`); multi-head models (Epic-Kitchens verb +
noun) use their head names (batch keys `label/<head>`), and the loss is the sum
of the heads' cross-entropies.
"""
from typing import Mapping

import jax
import jax.numpy as jnp


def label_key(head: str) -> str:
  return 'label' if head == '' else f'label/{head}'


def as_head_dict(logits):
  return dict(logits) if isinstance(logits, Mapping) else {'': logits}


def one_hot_targets(labels, num_classes: int, label_smoothing: float):
  """One-hot targets smoothed towards the uniform distribution."""
  onehot = jax.nn.one_hot(labels, num_classes, dtype=jnp.float32)
  if label_smoothing:
    onehot = onehot * (1.0 - label_smoothing) + label_smoothing / num_classes
  return onehot


def softmax_cross_entropy(logits, targets):
  """Per-example cross-entropy between logits (B, C) and soft targets (B, C)."""
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return -jnp.sum(targets * logp, axis=-1)


def multi_head_loss(logits: Mapping, targets: Mapping):
  """Sum over heads of per-example cross-entropies, shape (B,)."""
  return sum(softmax_cross_entropy(logits[h], targets[h]) for h in targets)


def _beta(rng, alpha):
  return jax.random.beta(rng, alpha, alpha)


def cutmix_box_mask(rng, lam, height: int, width: int):
  """A (H, W) float mask, 1 inside a random box of area ~(1 - lam) and the exact lam."""
  ry, rx = jax.random.split(rng)
  ratio = jnp.sqrt(1.0 - lam)
  cut_h = jnp.round(height * ratio)
  cut_w = jnp.round(width * ratio)
  cy = jax.random.uniform(ry, (), minval=0.0, maxval=height)
  cx = jax.random.uniform(rx, (), minval=0.0, maxval=width)
  y0 = jnp.clip(jnp.round(cy - cut_h / 2), 0, height)
  y1 = jnp.clip(jnp.round(cy + cut_h / 2), 0, height)
  x0 = jnp.clip(jnp.round(cx - cut_w / 2), 0, width)
  x1 = jnp.clip(jnp.round(cx + cut_w / 2), 0, width)
  ys = jnp.arange(height)[:, None]
  xs = jnp.arange(width)[None, :]
  box = ((ys >= y0) & (ys < y1) & (xs >= x0) & (xs < x1)).astype(jnp.float32)
  lam_exact = 1.0 - box.sum() / (height * width)
  return box, lam_exact


def mix_batch(rng, inputs, targets: Mapping, *, mixup_alpha: float = 0.0,
              cutmix_alpha: float = 0.0, switch_prob: float = 0.5):
  """Mixup / cutmix of a video batch with its reversed copy, on device.

  One mixing coefficient per batch (as timm's batch mode). Cutmix cuts the same
  spatial box in every frame of a clip. With both enabled, cutmix is chosen
  with probability `switch_prob`. Returns (inputs, targets, lam) where lam is
  the weight of the original example.
  """
  if not mixup_alpha and not cutmix_alpha:
    return inputs, targets, jnp.ones((), jnp.float32)
  r_mix, r_cut, r_box, r_switch = jax.random.split(rng, 4)
  partner = jnp.flip(inputs, axis=0)
  h, w = inputs.shape[-3], inputs.shape[-2]
  results = []
  if mixup_alpha:
    lam = _beta(r_mix, mixup_alpha)
    results.append((inputs * lam + partner * (1.0 - lam), lam))
  if cutmix_alpha:
    lam0 = _beta(r_cut, cutmix_alpha)
    box, lam = cutmix_box_mask(r_box, lam0, h, w)
    box = box[:, :, None]  # (H, W, 1) broadcasts over (B, T, H, W, C)
    results.append((inputs * (1.0 - box) + partner * box, lam))
  if len(results) == 2:
    use_cut = jax.random.uniform(r_switch) < switch_prob
    mixed = jnp.where(use_cut, results[1][0], results[0][0])
    lam = jnp.where(use_cut, results[1][1], results[0][1])
  else:
    mixed, lam = results[0]
  mixed_targets = {h_: t * lam + jnp.flip(t, axis=0) * (1.0 - lam)
                   for h_, t in targets.items()}
  return mixed.astype(inputs.dtype), mixed_targets, lam.astype(jnp.float32)
