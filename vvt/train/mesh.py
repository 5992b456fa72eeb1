"""The device mesh of a run (`config.mesh`, as its MeshSpec), the batch sharding, and global batches from per-host
data.

  axes = resolve_axes(run.mesh.axes, num_devices)       # (('data', 4), ('fsdp', 8), ('model', 1))
  mesh = make_mesh(run.mesh)                            # jax.make_mesh: axes follow the topology
  mesh = mesh_of_axes({'data': 2, 'fsdp': -1})          # the same of axes alone
  batch_sharding(mesh, rules)                           # P(('data', 'fsdp')): the axes of logical `batch`

`config.mesh.axes` names the axes and their sizes, as a dict `{'data': -1, 'fsdp': 8}` or a tuple
of (name, size) pairs, in mesh order (the last axis is the fastest-varying, i.e. the nearest devices:
put `model`, then `fsdp`, last). `-1` = the devices the other axes leave. Known axes:

  data    batch sharded, params replicated (data parallelism)
  fsdp    batch sharded and params sharded (`vvt.train.sharding`: ZeRO-3 / FSDP)
  model   params sharded over heads and MLP units (tensor parallelism); the batch is replicated

Axes not named have size 1 and are still in the mesh, so rules and specs may always name all three.
`config.mesh.logical_rules` may map the models' logical axes otherwise (`vvt.config.sharding`), e.g. the batch
over `data` only; the batch functions below take those rules (`rules`: complete (name, mesh axes) pairs, a
MeshSpec's `logical_rules`; None: the active ones, `vvt.models.axes.axis_rules`, by default the models').
`mesh.num_devices` (-1 = all) uses only the first N devices. Each process feeds only its own rows;
the global array is built with `jax.make_array_from_process_local_data`, so the same config runs on
1 CPU device, 8 forced host devices, several hosts and a pod.
"""
import logging
import os
from typing import Any, Optional, Sequence

import jax
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

from vvt.config.sharding import MeshError
from vvt.config.sharding import MeshSpec
from vvt.config.sharding import resolve_axes
from vvt.models import axes as logical_axes
from vvt.train import coordinator
from vvt.train import peers


def slurm_step_tasks(environ=None) -> int:
  """How many processes the SLURM step of this process has (`srun -N 2` on one task per node: 2); 1 outside
  `srun`. A SLURM batch script itself is a step of one task."""
  environ = os.environ if environ is None else environ
  try:
    return int(environ['SLURM_STEP_NUM_TASKS']) if 'SLURM_PROCID' in environ else 1
  except (KeyError, ValueError):
    return 1


def initialize_kwargs(distributed) -> dict:
  """The arguments of `jax.distributed.initialize` for a run's DistributedSpec: the fields that are set (the rest
  jax reads from the environment), and jax's heartbeat, which comes after vvt's (vvt.train.peers) so that vvt names
  a lost process first."""
  kwargs = {'heartbeat_timeout_seconds': peers.jax_heartbeat_timeout(distributed.heartbeat_timeout_seconds)}
  if distributed.coordinator_address:
    kwargs['coordinator_address'] = distributed.coordinator_address
  if distributed.num_processes > 0:
    kwargs['num_processes'] = distributed.num_processes
  if distributed.process_id >= 0:
    kwargs['process_id'] = distributed.process_id
  return kwargs


def maybe_initialize_distributed(distributed) -> None:
  """Calls `jax.distributed.initialize` when `distributed.initialize` is set (a run's DistributedSpec), or when this
  process is one of several tasks of a SLURM step (`srun`): jax then reads the coordinator, process count and id
  from SLURM's environment, so a multi-node trial needs no `distributed.*` field. Process 0 given its coordinator's
  port checks it first (`vvt.train.coordinator`: one line naming a port in use). Once initialised, a second call
  does nothing (a run on feature sequences initialises before its first use of jax, its mesh after)."""
  if (not distributed.initialize and slurm_step_tasks() <= 1) or jax.distributed.is_initialized():
    return
  coordinator.check_port(distributed)
  try:
    jax.distributed.initialize(**initialize_kwargs(distributed))
  except RuntimeError as e:  # already initialised (e.g. by the caller)
    if 'already' not in str(e).lower():
      raise
    logging.info('jax.distributed already initialised: %s', e)


# ----------------------------------------------------------------------------- mesh


def mesh_devices(mesh_spec: Optional[MeshSpec] = None, devices: Optional[Sequence[Any]] = None) -> list:
  """The devices of the mesh: `devices` (default `jax.devices()`), the first `mesh.num_devices` of a MeshSpec."""
  devices = list(jax.devices() if devices is None else devices)
  n = -1 if mesh_spec is None else mesh_spec.num_devices
  if n > 0:
    if n > len(devices):
      raise MeshError(f'mesh.num_devices={n} but only {len(devices)} devices are available')
    devices = devices[:n]
  return devices


def make_mesh(mesh_spec: Optional[MeshSpec] = None, devices: Optional[Sequence[Any]] = None) -> Mesh:
  """The mesh of a run's MeshSpec over `devices` (default: all; its first `num_devices`), `mesh_of_axes`.
  Without `mesh_spec`: one `data` axis over all `devices` (e.g. `devices=jax.local_devices()[:1]`, the one-device
  mesh of `vvt predict`)."""
  if mesh_spec is None:
    return mesh_of_axes(None, devices)
  return mesh_of_axes(mesh_spec.axes, mesh_devices(mesh_spec, devices))


def mesh_of_axes(axes: Any = None, devices: Optional[Sequence[Any]] = None) -> Mesh:
  """The mesh of `axes` (`mesh.axes`: a dict such as {'data': 2, 'fsdp': -1} or (name, size) pairs; None: one
  `data` axis) over `devices` (default: all), axes in `vvt.config.sharding.AXES` (sizes may be 1).

  Built with `jax.make_mesh` (Auto axis types), so on a TPU pod the axes follow the physical topology.
  """
  devices = list(jax.devices() if devices is None else devices)
  axes = resolve_axes(axes, len(devices))
  names = tuple(k for k, _ in axes)
  shape = tuple(v for _, v in axes)
  auto = (jax.sharding.AxisType.Auto,) * len(names)
  try:
    return jax.make_mesh(shape, names, axis_types=auto, devices=devices)
  except (ValueError, NotImplementedError, AssertionError):  # a shape the topology helper cannot lay out
    return Mesh(np.asarray(devices).reshape(shape), names, axis_types=auto)


def axis_sizes(mesh: Mesh) -> dict:
  """{axis name: size} of `mesh`."""
  return dict(zip(mesh.axis_names, mesh.devices.shape, strict=True))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_spec(mesh: Mesh, leading: int = 0, rules=None) -> P:
  """P(None * leading, ('data', 'fsdp')): the batch dimension after `leading` dimensions, over the mesh axes of
  logical `batch` under `rules` (None: the active rules; `vvt.models.axes.batch_axes`) in mesh order."""
  wanted = logical_axes.batch_axes(rules)
  return P(*([None] * leading), tuple(a for a in mesh.axis_names if a in wanted))


def batch_sharding(mesh: Mesh, rules=None) -> NamedSharding:
  return NamedSharding(mesh, batch_spec(mesh, rules=rules))


def global_batch(batch: dict, mesh: Mesh, global_batch_size: int, rules=None) -> dict:
  """Per-host numpy batch -> dict of global jax.Arrays sharded over the batch's axes (`batch_spec`)."""
  sharding = batch_sharding(mesh, rules)
  out = {}
  for key, value in batch.items():
    value = np.asarray(value)
    shape = (global_batch_size,) + value.shape[1:]
    out[key] = jax.make_array_from_process_local_data(sharding, value, shape)
  return out
