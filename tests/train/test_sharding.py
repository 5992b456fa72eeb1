"""The same run on 8 forced host devices equals the 1-device run: batch sharded over `data`, params
sharded over `fsdp` (FSDP) and `model` (tensor parallelism); sharded checkpoints restore on any mesh."""
import json
import subprocess

import chex
import fsdp_run
import jax
import numpy as np
import pytest
import train_helpers as common

from tests.command_output import HANG_S
from vvt.config import run_spec
from vvt.train import checkpoints
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import optimizers
from vvt.train import sharding

HELPER = str(common.REPO / 'tests' / 'train' / 'shard_run.py')


def _runs(tiny_data, *runs):
  """Trains the tiny config once per (workdir, num_devices, accum) in one subprocess of 8 host devices (the runs one
  after another, each on its own mesh); their results, in order."""
  proc = subprocess.run([common.PY, HELPER, str(tiny_data), *(f'{wd}:{n}:{accum}' for wd, n, accum in runs)],
                        cwd=common.REPO, env=common.env(devices=8), capture_output=True,
                        text=True, timeout=HANG_S)
  assert proc.returncode == 0, proc.stderr[-4000:]
  lines = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')]
  assert len(lines) == len(runs), proc.stdout[-4000:]
  return [json.loads(line[len('RESULT '):]) for line in lines]


def test_eight_devices_equal_one_device(tiny_data, tmp_path):
  one, eight = _runs(tiny_data, (tmp_path / 'one', 1, 1), (tmp_path / 'eight', 8, 2))
  assert one['devices'] == eight['devices'] == 8
  for k in ('video_top1', 'clip_top1', 'num_views'):
    assert one[k] == eight[k], k
  p1, _ = checkpoints.load_params(str(tmp_path / 'one'), 4)
  p8, _ = checkpoints.load_params(str(tmp_path / 'eight'), 4)
  # 4 AdamW steps, one program on 1 device and one on 8 (other sums, micro-batches): measured > 10x below
  chex.assert_trees_all_close(p1, p8, rtol=2e-4, atol=2e-5)
  l1 = [json.loads(l) for l in open(tmp_path / 'one' / 'metrics.jsonl')]
  l8 = [json.loads(l) for l in open(tmp_path / 'eight' / 'metrics.jsonl')]
  for a, b in zip(l1, l8, strict=True):
    if a['kind'] == 'train':
      np.testing.assert_allclose(a['loss'], b['loss'], rtol=1e-4)


# ----------------------------------------------------------------------------- FSDP and model sharding

FSDP_HELPER = str(common.REPO / 'tests' / 'train' / 'fsdp_run.py')


def _fsdp_run(*args):
  proc = subprocess.run([common.PY, FSDP_HELPER, *map(str, args)], cwd=common.REPO,
                        env=common.env(devices=8), capture_output=True, text=True, timeout=HANG_S)
  assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope='module')
def fsdp_out(tmp_path_factory):
  """fsdp_run.py's results: data=8, fsdp=8 and data=2 x fsdp=2 x model=2 from one init and batches; then, in the
  same process, the training state this process saves on its one device (`one/`, its params in `one_params.npz`)
  restored onto fsdp=8."""
  out = tmp_path_factory.mktemp('fsdp')
  run = run_spec.resolve(fsdp_run.config({'data': -1}))
  sched = optimizers.make_schedule(run.schedule, 10, 10)
  tx = optimizers.make_optimizer(run.optimizer, sched)
  module = model_state.build_model(run.model)
  state = jax.jit(model_state.init_fn(module, model_state.ClipShape.of(run), tx))(jax.random.PRNGKey(1))  # no EMA
  state = state.replace(step=state.step + 5)
  checkpoints.save_state(checkpoints.manager(str(out / 'one')), state, data_position=5)
  np.savez(out / 'one_params.npz', **fsdp_run.flat(state.params))
  _fsdp_run(out, out / 'one')
  return out


def test_fsdp_and_model_sharding_give_the_data_parallel_result(fsdp_out):
  r = json.load(open(fsdp_out / 'result.json'))
  assert r['devices'] == 8
  for name in ('fsdp', 'hybrid'):  # SGD (linear in the gradients): sharded sums differ by rounding, > 10x below
    np.testing.assert_allclose(r[f'loss_{name}'], r['loss_data'], rtol=1e-5, atol=1e-6)
    assert r[f'max_diff_{name}'] < 1e-5, name  # every parameter after 3 SGD-momentum steps
    assert r[f'max_diff_ema_{name}'] < 1e-5, name  # and its EMA


def test_fsdp_really_shards_params_and_optimiser_state(fsdp_out):
  r = json.load(open(fsdp_out / 'result.json'))
  # the MLP's (64, 128) kernel: each device holds 1/8 of it (its largest dimension over fsdp=8),
  # and so does its momentum; with model=2 x fsdp=2 a quarter (units over model, inputs over fsdp)
  assert r['big_fraction_fsdp'] == r['momentum_fraction_fsdp'] == 1 / 8
  assert r['big_spec_fsdp'] == "P(None, 'fsdp')"
  assert r['big_fraction_hybrid'] == r['momentum_fraction_hybrid'] == 1 / 4
  assert r['big_spec_hybrid'] == "P('fsdp', 'model')"
  assert r['sharded'] > 10 and r['replicated'] > 0  # small ones (biases, norms) stay replicated
  # the EMA of the params (optimizer.ema_decay) is sharded exactly like them
  assert r['ema_same_shardings_fsdp'] and r['ema_same_shardings_hybrid']
  assert r['ema_fraction_fsdp'] == 1 / 8 and r['ema_fraction_hybrid'] == 1 / 4


def test_checkpoint_written_on_fsdp8_restores_on_one_device(fsdp_out):
  saved = np.load(fsdp_out / 'fsdp8_params.npz')
  params, step = checkpoints.load_params(str(fsdp_out / 'fsdp8'))  # this process: 1 CPU device
  assert step == 3
  flat = {sharding.path_str(p): x for p, x in jax.tree_util.tree_flatten_with_path(params)[0]}
  assert set(flat) == set(saved.files)
  for k, v in flat.items():
    assert len(v.sharding.device_set) == 1
    np.testing.assert_array_equal(np.asarray(v), saved[k], err_msg=k)
  # the whole training state too, onto this process's 1-device mesh
  run = run_spec.resolve(fsdp_run.config({'data': -1}))
  mesh = mesh_lib.make_mesh(run.mesh)
  sched = optimizers.make_schedule(run.schedule, 10, 10)
  tx = optimizers.make_optimizer(run.optimizer, sched)
  module, clip = model_state.build_model(run.model), model_state.ClipShape.of(run)
  abstract = model_state.abstract_state(module, clip, tx, model_state.state_shardings(module, clip, tx, mesh, run.mesh,
                                                                                      ema=True), ema=True)
  state, meta = checkpoints.restore_state(str(fsdp_out / 'fsdp8'), abstract)
  assert int(state.step) == 3 and meta['data_position'] == 3
  saved_ema = np.load(fsdp_out / 'fsdp8_ema.npz')  # the EMA too, and it is not the params
  for p, x in jax.tree_util.tree_flatten_with_path(state.ema_params)[0]:
    np.testing.assert_array_equal(np.asarray(x), saved_ema[sharding.path_str(p)])
  assert any(not np.array_equal(saved_ema[k], saved[k]) for k in saved.files)


def test_checkpoint_written_on_one_device_restores_on_fsdp8(fsdp_out):
  r = json.load(open(fsdp_out / 'restored.json'))
  assert r['step'] == 5 and r['data_position'] == 5
  assert r['big_fraction'] == 1 / 8 and r['big_spec'] == "P(None, 'fsdp')"
  saved = np.load(fsdp_out / 'one_params.npz')
  restored = np.load(fsdp_out / 'restored_params.npz')
  restored_ema = np.load(fsdp_out / 'restored_ema.npz')  # the run keeps an EMA: it starts at the params
  assert set(restored.files) == set(restored_ema.files) == set(saved.files)
  for k in saved.files:
    np.testing.assert_array_equal(restored[k], saved[k], err_msg=k)
    np.testing.assert_array_equal(restored_ema[k], saved[k], err_msg=k)
