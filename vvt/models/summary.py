"""Parameter and FLOP counts of a model config, without allocating its weights.

FLOPs come from XLA's cost analysis of the lowered (not executed) inference forward pass for one view.
XLA counts a multiply-add as 2 FLOPs; the papers (ViViT Table 2, TimeSformer Table 1, X-ViT Table 5) count
it as one, so `gflops` reports XLA's number / 2 (i.e. GMACs), the papers' convention. The papers also count
every token through every layer; with a class-token classifier the last block's patch-token outputs are dead
code that XLA removes, so `gflops` keeps them alive (as the papers count) and `gflops_executed` is what the
jitted classifier really runs.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_collections

from vvt.models import build, resolve, token_grid


def _abstract_params(module, cfg, batch):
  video = jax.ShapeDtypeStruct((batch, cfg.num_frames, cfg.image_size, cfg.image_size, 3), jnp.float32)
  variables = jax.eval_shape(lambda v: module.init({'params': jax.random.key(0)}, v), video)
  return variables['params'], video


def count_params(params) -> int:
  return sum(math.prod(x.shape) for x in jax.tree.leaves(params))


def summarise(cfg, batch: int = 1) -> dict:
  """{'params', 'params_m', 'gflops' (multiply-add = 1, per view), 'xla_flops', 'tokens', 'grid'} of a config."""
  rcfg = resolve(cfg)
  # Count the function, not its implementation: attention as einsum, layers unrolled, no remat (XLA's cost
  # analysis counts a scan's or a chunked loop's body once). Parameters are the same in every layout.
  rcfg = resolve(ml_collections.ConfigDict(dict(rcfg.to_dict(), attention_impl='einsum', scan_layers=False,
                                                remat='none')))
  module = build(rcfg)
  params, video = _abstract_params(module, rcfg, batch)
  def logits_only(p, v):
    return module.apply({'params': p}, v, train=False)

  def all_tokens(p, v):  # keeps every token's output of the last block alive, as the papers count.
    return module.apply({'params': p}, v, train=False, mutable=['intermediates'])

  flops = _xla_flops(all_tokens, params, video) / batch
  executed = _xla_flops(logits_only, params, video) / batch
  nt, nh, nw = token_grid(rcfg)
  n = count_params(params)
  return dict(params=n, params_m=n / 1e6, xla_flops=flops, gflops=flops / 2 / 1e9,
              gflops_executed=executed / 2 / 1e9, tokens=nt * nh * nw, grid=(nt, nh, nw))


def _xla_flops(fn, *args) -> float:
  cost = jax.jit(fn).lower(*args).cost_analysis()
  if isinstance(cost, (list, tuple)):
    cost = cost[0]
  return float(cost['flops'])


def format_summary(name: str, s: dict) -> str:
  return (f'{name}: params {s["params_m"]:.1f}M | {s["gflops"]:.4g} GFLOPs/view (multiply-add = 1 FLOP, all '
          f'tokens; {s["gflops_executed"]:.4g} executed) | tokens {s["tokens"]} = {"x".join(map(str, s["grid"]))}')
