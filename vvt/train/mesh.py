"""Device mesh over a `data` axis, shardings, and global batches from per-host data.

Params are replicated (`P()`), batches are sharded along their first dimension
over `data` (`P('data')`). Each process feeds only its own rows; the global
array is assembled with `jax.make_array_from_process_local_data`, so the same
code runs on 1 CPU device, 8 forced host devices and several hosts.
"""
import logging

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA_AXIS = 'data'


def maybe_initialize_distributed(dist_cfg) -> None:
  """Calls `jax.distributed.initialize` when `config.distributed.initialize` is set."""
  if not dist_cfg.initialize:
    return
  kwargs = {}
  if dist_cfg.coordinator_address:
    kwargs['coordinator_address'] = dist_cfg.coordinator_address
  if dist_cfg.num_processes > 0:
    kwargs['num_processes'] = int(dist_cfg.num_processes)
  if dist_cfg.process_id >= 0:
    kwargs['process_id'] = int(dist_cfg.process_id)
  try:
    jax.distributed.initialize(**kwargs)
  except RuntimeError as e:  # already initialised (e.g. by the caller)
    if 'already' not in str(e).lower():
      raise
    logging.info('jax.distributed already initialised: %s', e)


def make_mesh(num_devices: int = -1) -> Mesh:
  """A 1-D mesh over all (or the first `num_devices`) devices, axis `data`."""
  devices = jax.devices()
  if num_devices > 0:
    if num_devices > len(devices):
      raise ValueError(f'mesh.num_devices={num_devices} but only '
                       f'{len(devices)} devices are available')
    devices = devices[:num_devices]
  return Mesh(np.asarray(devices).reshape(-1), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P(DATA_AXIS))


def local_batch_size(global_batch_size: int, mesh: Mesh) -> int:
  """Rows this process feeds: its share of the global batch."""
  n_proc = len({d.process_index for d in mesh.devices.flat})
  return global_batch_size // n_proc


def global_batch(batch: dict, mesh: Mesh, global_batch_size: int) -> dict:
  """Per-host numpy batch -> dict of global jax.Arrays sharded over `data`."""
  sharding = batch_sharding(mesh)
  out = {}
  for key, value in batch.items():
    value = np.asarray(value)
    shape = (global_batch_size,) + value.shape[1:]
    out[key] = jax.make_array_from_process_local_data(sharding, value, shape)
  return out
