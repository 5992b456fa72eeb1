"""Parameter and FLOP counts of a model config, without allocating its weights.

FLOPs come from XLA's cost analysis of the lowered (not executed) inference forward pass for one view,
lowered for the CPU whatever the default backend, so the count is the same on every host (`count_flops`: on
CUDA and TPU the default backend's lowering has no cost analysis). Where no CPU backend is available it falls
back to the default backend's lowering, then to its compiled executable, then to the matrix-multiply FLOPs
counted from the jaxpr (`flops_source` says which).
XLA counts a multiply-add as 2 FLOPs; the papers (ViViT Table 2, TimeSformer Table 1, X-ViT Table 5) count
it as one, so `gflops` reports XLA's number / 2 (i.e. GMACs), the papers' convention. The papers also count
every token through every layer; with a class-token classifier the last block's patch-token outputs are dead
code that XLA removes, so `gflops` keeps them alive (as the papers count) and `gflops_executed` is what the
jitted classifier really runs.
"""
from __future__ import annotations

import math

import jax
import jax.extend
import jax.numpy as jnp
import ml_collections

from vvt.models import build
from vvt.models import frame_size
from vvt.models.config import resolve
from vvt.models.config import token_grid


def _abstract_params(module, cfg, batch):
  video = jax.ShapeDtypeStruct((batch, cfg.num_frames, *frame_size.parse(cfg.image_size), 3), jnp.float32)
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

  flops, source = count_flops(all_tokens, params, video)
  executed, executed_source = count_flops(logits_only, params, video)
  nt, nh, nw = token_grid(rcfg)
  n = count_params(params)
  sources = source if source == executed_source else f'{source}, executed: {executed_source}'
  return dict(params=n, params_m=n / 1e6, xla_flops=flops / batch, gflops=flops / batch / 2 / 1e9,
              gflops_executed=executed / batch / 2 / 1e9, tokens=nt * nh * nw, grid=(nt, nh, nw),
              flops_source=sources)


# Where the FLOPs come from, in the order tried (see count_flops).
FLOP_SOURCES = ('xla_cpu', 'xla_lowered', 'xla_compiled', 'jaxpr_matmuls')


def count_flops(fn, *args) -> tuple[float, str]:
  """(FLOPs, source) of `fn(*args)` (multiply-add = 2), from abstract args (ShapeDtypeStructs or arrays).

  Tried in order, the first that gives a number wins:
    xla_cpu        XLA's cost analysis of `fn` lowered for the CPU: the same on every host, also where the
                   default backend has no cost analysis of a lowering (CUDA, TPU: the PJRT C API ones).
    xla_lowered    the default backend's lowering (a host whose JAX has no CPU backend, JAX_PLATFORMS=cuda).
    xla_compiled   the default backend's compiled executable (optimised HLO: within ~0.1% of the lowering).
    jaxpr_matmuls  only the dot_general / convolution FLOPs counted from the jaxpr (no elementwise ops and
                   no dead-code elimination: a few % off XLA's count).
  """
  for source, cost_of in ((FLOP_SOURCES[0], _lowered_cpu_cost), (FLOP_SOURCES[1], _lowered_cost),
                          (FLOP_SOURCES[2], _compiled_cost)):
    try:
      flops = _flops_of(cost_of(fn, args))
    except Exception:  # a backend without this analysis: try the next one
      flops = None
    if flops is not None:
      return flops, source
  return matmul_flops(jax.make_jaxpr(fn)(*args).jaxpr), FLOP_SOURCES[3]


def _flops_of(cost) -> float | None:
  """'flops' of a cost analysis (a dict, or a one-element list of dicts in older JAX); None if absent."""
  if isinstance(cost, (list, tuple)):
    cost = cost[0] if cost else None
  if not cost or 'flops' not in cost:
    return None
  return float(cost['flops'])


def _cpu_device():
  try:
    return jax.devices('cpu')[0]
  except RuntimeError:  # JAX_PLATFORMS without cpu
    return None


def _lowered_cpu_cost(fn, args):
  """Cost analysis of `fn` lowered for the CPU: the args are placed on the CPU device, so the lowering and
  its analysis are the CPU backend's whatever jax.default_backend() is."""
  cpu = _cpu_device()
  if cpu is None:
    return None
  sharding = jax.sharding.SingleDeviceSharding(cpu)
  on_cpu = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), args)
  return jax.jit(fn).trace(*on_cpu).lower(lowering_platforms=('cpu',)).cost_analysis()


def _lowered_cost(fn, args):
  return jax.jit(fn).trace(*args).lower().cost_analysis()


def _compiled_cost(fn, args):
  return jax.jit(fn).trace(*args).lower().compile().cost_analysis()


def matmul_flops(jaxpr) -> float:
  """2 x multiply-adds of every dot_general and convolution in `jaxpr` and its sub-jaxprs (a scan's body
  times its length; a while loop's body once, as XLA counts it; the costliest branch of a cond)."""
  total = 0.0
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    if name == 'dot_general':
      (lhs_contract, _), _ = eqn.params['dimension_numbers']
      lhs = eqn.invars[0].aval.shape
      total += 2.0 * math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[d] for d in lhs_contract)
    elif name == 'conv_general_dilated':
      rhs = eqn.invars[1].aval.shape
      out_features = rhs[eqn.params['dimension_numbers'].rhs_spec[0]]
      total += 2.0 * math.prod(eqn.outvars[0].aval.shape) * math.prod(rhs) / out_features
    subs = [matmul_flops(j) for j in _jaxprs_in(eqn.params)]
    if subs:
      total += (max(subs) if name == 'cond' else sum(subs)) * (eqn.params['length'] if name == 'scan' else 1)
  return total


def _jaxprs_in(params):
  """The jaxprs among an equation's params (pjit, remat, custom_jvp/vjp, scan and while bodies, cond branches)."""
  for value in params.values():
    for v in value if isinstance(value, (tuple, list)) else (value,):
      if isinstance(v, jax.extend.core.ClosedJaxpr):
        yield v.jaxpr
      elif isinstance(v, jax.extend.core.Jaxpr):
        yield v


def format_summary(name: str, s: dict) -> str:
  source = s.get('flops_source', FLOP_SOURCES[0])
  note = '' if source == FLOP_SOURCES[0] else f' | FLOPs from {source}'
  return (f'{name}: params {s["params_m"]:.1f}M | {s["gflops"]:.4g} GFLOPs/view (multiply-add = 1 FLOP, all '
          f'tokens; {s["gflops_executed"]:.4g} executed) | tokens {s["tokens"]} = {"x".join(map(str, s["grid"]))}'
          f'{note}')
