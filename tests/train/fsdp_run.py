"""Subprocess helper for test_sharding (8 forced host devices): the same train steps on several meshes.

argv: out_dir [restore_dir]. Trains the tiny model (width 64, every parameter of >= 512 elements
sharded) for STEPS steps on a `data=8` mesh, an `fsdp=8` mesh and a `data=2, fsdp=2, model=2`
mesh from one init and one batch stream; writes out_dir/result.json (losses, the params'
max |difference| to data-parallel, shard fractions) and the fsdp=8 training state as a checkpoint
in out_dir/fsdp8 (+ its params as out_dir/fsdp8_params.npz). With restore_dir, then, in the same process: restores
that workdir's latest training state onto fsdp=8 and writes out_dir/restored.json.
"""
import json
import os
import sys

import jax
import numpy as np

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import train_helpers  # noqa: E402

from vvt.config import run_spec  # noqa: E402
from vvt.train import checkpoints  # noqa: E402
from vvt.train import mesh as mesh_lib  # noqa: E402
from vvt.train import program as program_lib  # noqa: E402
from vvt.train import sharding  # noqa: E402

STEPS = 3
BIG = 'encoder/layers/block_0/mlp/Dense_0/kernel'


def config(axes):
  c = train_helpers.tiny_config('unused')
  c.batch_size = 16
  c.mesh.axes = axes
  c.mesh.fsdp_min_size = 512
  c.optimizer.name = 'sgd'
  c.optimizer.momentum = 0.9
  c.schedule.name = 'constant'
  c.schedule.warmup_steps = 0
  c.schedule.base_lr = 0.5
  c.optimizer.ema_decay = 0.9  # the EMA of the params is kept, sharded like them
  return c


def batches(c):
  rng = np.random.default_rng(0)
  t, s = c.num_frames, c.image_size
  for _ in range(STEPS):
    yield {'inputs': rng.integers(0, 256, size=(c.batch_size, t, s, s, 3)).astype(np.uint8),
           'label': rng.integers(0, 4, size=(c.batch_size,)).astype(np.int32),
           'mask': np.ones((c.batch_size,), np.float32)}


def program(c):
  """The training program of `c` on its mesh (the train step the trainer runs)."""
  run = run_spec.resolve(c)
  return program_lib.build_program(run, mesh_lib.make_mesh(run.mesh), num_train_videos=c.batch_size * STEPS)


def train(axes):
  c = config(axes)
  prog = program(c)
  state = prog.init_state(jax.random.PRNGKey(0))
  losses = []
  for b in batches(c):
    state, _, status = prog.training.step(state, mesh_lib.global_batch(b, prog.mesh, c.batch_size))
    losses.append(float(status['loss']))
  return c, state, losses


def leaves(tree):
  return {sharding.path_str(p): x for p, x in jax.tree_util.tree_flatten_with_path(tree)[0]}


def flat(tree):
  return {k: np.asarray(jax.device_get(v)) for k, v in leaves(tree).items()}


def shard_fraction(x):
  return x.addressable_shards[0].data.size / x.size


def restore(out_dir, restore_dir):
  """Restores `restore_dir`'s latest training state onto fsdp=8: out_dir/restored.json and its arrays."""
  c = config({'fsdp': -1})
  state, meta = checkpoints.restore_state(restore_dir, program(c).abstract_state())
  p = flat(state.params)
  np.savez(os.path.join(out_dir, 'restored_params.npz'), **p)
  np.savez(os.path.join(out_dir, 'restored_ema.npz'), **flat(state.ema_params))
  big = leaves(state.params)[BIG]
  json.dump({'step': int(state.step), 'data_position': meta['data_position'],
             'big_fraction': shard_fraction(big), 'big_spec': str(big.sharding.spec)},
            open(os.path.join(out_dir, 'restored.json'), 'w'))


def main(out_dir, restore_dir=None):
  os.makedirs(out_dir, exist_ok=True)
  result = {'devices': jax.device_count()}
  _, dp, result['loss_data'] = train({'data': -1})
  ref, ref_ema = flat(dp.params), flat(dp.ema_params)
  for name, axes in (('fsdp', {'fsdp': -1}), ('hybrid', {'data': 2, 'fsdp': 2, 'model': 2})):
    c, state, result[f'loss_{name}'] = train(axes)
    params = flat(state.params)
    result[f'max_diff_{name}'] = max(float(np.max(np.abs(params[k] - ref[k]))) for k in ref)
    arrays = leaves(state.params)
    result[f'big_fraction_{name}'] = shard_fraction(arrays[BIG])
    result[f'big_spec_{name}'] = str(arrays[BIG].sharding.spec)
    momentum = [v for k, v in leaves(state.opt_state).items() if k.endswith(BIG)]
    result[f'momentum_fraction_{name}'] = shard_fraction(momentum[0])
    ema = leaves(state.ema_params)
    result[f'ema_same_shardings_{name}'] = all(ema[k].sharding == v.sharding for k, v in arrays.items())
    result[f'ema_fraction_{name}'] = shard_fraction(ema[BIG])
    result[f'max_diff_ema_{name}'] = max(float(np.max(np.abs(v - ref_ema[k]))) for k, v in flat(ema).items())
    if name == 'fsdp':
      result['sharded'] = sum(shard_fraction(v) < 1 for v in arrays.values())
      result['replicated'] = sum(shard_fraction(v) == 1 for v in arrays.values())
      mngr = checkpoints.manager(os.path.join(out_dir, 'fsdp8'), async_save=True)
      checkpoints.save_state(mngr, state, data_position=STEPS, config=run_spec.resolve(c).config_values, wait=False)
      mngr.wait_until_finished()
      np.savez(os.path.join(out_dir, 'fsdp8_params.npz'), **params)
      np.savez(os.path.join(out_dir, 'fsdp8_ema.npz'), **flat(state.ema_params))
  json.dump(result, open(os.path.join(out_dir, 'result.json'), 'w'))
  if restore_dir:
    restore(out_dir, restore_dir)


if __name__ == '__main__':
  main(*sys.argv[1:])
