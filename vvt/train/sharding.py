"""Parameter and optimiser-state shardings of a JAX mesh, from a run's MeshSpec (vvt.config.sharding: its rules,
fsdp_min_size and logical axis rules).

  shardings = state_shardings(abstract_state, mesh, run.mesh)   # TrainState of NamedSharding
  params_shardings = param_shardings(params, mesh, run.mesh)

The axes, the rules and each parameter's partition spec are computed without JAX in `vvt.config.sharding`;
this module reads the parameter paths and shapes of a pytree and makes the NamedShardings.
"""
from typing import Any, Mapping

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from vvt.config.sharding import MeshSpec
from vvt.config.sharding import follow
from vvt.config.sharding import param_specs
from vvt.train import mesh as mesh_lib


def path_str(path) -> str:
  """'a/b/c' of a jax key path."""
  return jax.tree_util.keystr(tuple(path), simple=True, separator='/')


def flat_shapes(tree) -> dict:
  """{path string: shape} of a pytree of arrays or shapes."""
  return {path_str(p): tuple(x.shape) for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def specs_of(params, mesh, mesh_spec: MeshSpec) -> dict:
  """{path: spec tuple} of `params` (arrays or shapes) on `mesh` by the rules of `mesh_spec` (vvt.config.sharding)."""
  return param_specs(flat_shapes(params), mesh_lib.axis_sizes(mesh), rules=mesh_spec.rules,
                     min_size=mesh_spec.fsdp_min_size, logical_rules=mesh_spec.logical_rules)


def tree_shardings(tree, mesh, specs: Mapping[str, tuple]) -> Any:
  """NamedShardings of every leaf of `tree` on `mesh`, each following its parameter (`follow`)."""
  return jax.tree_util.tree_map_with_path(
      lambda p, x: NamedSharding(mesh, P(*follow(path_str(p), len(x.shape), specs))), tree)


def param_shardings(params, mesh, mesh_spec: MeshSpec) -> Any:
  """NamedShardings of `params` (a pytree of arrays or shapes) on `mesh` by the rules of `mesh_spec`."""
  return tree_shardings(params, mesh, specs_of(params, mesh, mesh_spec))


def state_shardings(abstract_state, mesh, mesh_spec: MeshSpec) -> Any:
  """A TrainState of NamedShardings: params by the rules of `mesh_spec`, opt state and EMA params following them,
  the rest replicated."""
  specs = specs_of(abstract_state.params, mesh, mesh_spec)
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
