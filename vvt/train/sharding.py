"""Parameter and optimiser-state shardings of a JAX mesh, from the specs of `config.mesh` (vvt.config.sharding:
its rules, fsdp_min_size and logical axis rules).

  shardings = state_shardings(abstract_state, mesh, config.mesh)   # TrainState of NamedSharding
  params_shardings = param_shardings(params, mesh, config.mesh)

The axes, the rules and each parameter's partition spec are computed without JAX in `vvt.config.sharding`;
this module reads the parameter paths and shapes of a pytree and makes the NamedShardings.
"""
from typing import Any, Mapping

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

from vvt.config.sharding import DEFAULT_MIN_SIZE, follow, logical_rules_of, param_specs
from vvt.train import mesh as mesh_lib


def path_str(path) -> str:
  """'a/b/c' of a jax key path."""
  return jax.tree_util.keystr(tuple(path), simple=True, separator='/')


def flat_shapes(tree) -> dict:
  """{path string: shape} of a pytree of arrays or shapes."""
  return {path_str(p): tuple(x.shape) for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def _options(mesh_cfg) -> dict:
  """param_specs' options of `config.mesh`: its rules, fsdp_min_size and logical rules."""
  logical_rules = logical_rules_of(mesh_cfg)
  if mesh_cfg is None:
    return dict(rules=(), min_size=DEFAULT_MIN_SIZE, logical_rules=logical_rules)
  return dict(rules=mesh_cfg.get('rules', ()) or (), min_size=int(mesh_cfg.get('fsdp_min_size', DEFAULT_MIN_SIZE)),
              logical_rules=logical_rules)


def tree_shardings(tree, mesh, specs: Mapping[str, tuple]) -> Any:
  """NamedShardings of every leaf of `tree` on `mesh`, each following its parameter (`follow`)."""
  return jax.tree_util.tree_map_with_path(
      lambda p, x: NamedSharding(mesh, P(*follow(path_str(p), len(x.shape), specs))), tree)


def param_shardings(params, mesh, mesh_cfg=None) -> Any:
  """NamedShardings of `params` (a pytree of arrays or shapes) on `mesh` by `config.mesh`'s rules."""
  specs = param_specs(flat_shapes(params), mesh_lib.axis_sizes(mesh), **_options(mesh_cfg))
  return tree_shardings(params, mesh, specs)


def state_shardings(abstract_state, mesh, mesh_cfg=None) -> Any:
  """A TrainState of NamedShardings: params by the rules, opt state and EMA params following them, the rest
  replicated."""
  specs = param_specs(flat_shapes(abstract_state.params), mesh_lib.axis_sizes(mesh), **_options(mesh_cfg))
  rep = NamedSharding(mesh, P())
  return abstract_state.replace(
      step=rep, rng=rep, params=tree_shardings(abstract_state.params, mesh, specs),
      opt_state=tree_shardings(abstract_state.opt_state, mesh, specs),
      ema_params=tree_shardings(getattr(abstract_state, 'ema_params', None), mesh, specs))


def describe(shardings) -> list[str]:
  """'path -> spec' of the sharded leaves of a pytree of NamedShardings (for logs)."""
  leaves = jax.tree_util.tree_flatten_with_path(shardings, is_leaf=lambda x: hasattr(x, 'spec'))[0]
  return [f'{path_str(p)} -> {tuple(s.spec)}' for p, s in leaves
          if any(e is not None for e in tuple(s.spec))]
