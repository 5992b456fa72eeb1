"""`vvt memory`: the real train step compiled for a real TPU topology (libtpu, deviceless) or forced CPU
devices on this CPU machine, nothing executed; exit 0 if it fits, 3 if not, 2 for bad input."""
import json
import os
import subprocess
import sys

import pytest

from tests.cli.test_commands import IN_ONE_PROCESS
from tests.conftest import REPO

TINY = 'tests/train/tiny_config.py:unused'  # the steps read no files
# One 1.3G-parameter layer (two 2048 x 327680 MLP kernels): params + AdamW state + gradients ~21 GiB per core
# replicated (> 16 GiB of a v3 core), ~2.8 GiB per core over fsdp=8. One layer and a narrow hidden size keep the two
# deviceless compiles short (libtpu took 50 s for the FSDP plan with 8192 x 65536 kernels).
WIDE = ('--config.model.hidden_size=2048', '--config.model.mlp_dim=327680', '--config.model.num_heads=8',
        '--config.model.num_layers=1')


def _env():
  e = dict(os.environ)
  e.pop('JAX_PLATFORMS', None)  # the command sets up its own backend
  e.pop('JAX_COMPILATION_CACHE_DIR', None)  # deviceless TPU executables are not for the tests' CPU cache
  e['XLA_FLAGS'] = ' '.join(f for f in e.get('XLA_FLAGS', '').split() if 'device_count' not in f)
  e['PYTHONPATH'] = str(REPO) + os.pathsep + e.get('PYTHONPATH', '')
  return e


def _report(stdout):
  lines = stdout.strip().splitlines()
  return json.loads(lines[-1]) if lines and lines[-1].startswith('{') else None


def memory(*args, timeout=600):
  """`vvt memory ARGS` in a process of its own -> (CompletedProcess, the JSON report or None)."""
  proc = subprocess.run([sys.executable, '-m', 'vvt', 'memory', *args], cwd=REPO, env=_env(),
                        capture_output=True, text=True, timeout=timeout)
  return proc, _report(proc.stdout)


WIDE_FITS = ('--config', TINY, '--topology', 'v3-8', *WIDE, "--config.mesh.axes={'fsdp': -1}",
             '--config.model.remat=True')
SPLASH = ('--config', TINY, '--topology', 'v3-8', "--config.mesh.axes={'data': 4, 'model': 2}",
          '--config.model.attention_impl=splash')
BATCH_16 = ('--config', TINY, '--topology', 'v3-8', '--config.batch_size=16')
BAD_INPUT = [
    (('--topology', 'v9-32'), "unknown TPU generation 'v9'"),
    (('--topology', 'tpu-pod'), "unknown topology 'tpu-pod'"),
    (('--topology', 'v3-8', "--config.mesh.axes={'data': 3, 'model': -1}", '--config.batch_size=24',
      '--config.eval.batch_size=24'),
     'mesh.axes (data=3, model=-1): the fixed axes (3 devices) do not divide the 8 devices'),
    (('--topology', 'v3-8', '--config.batch_size=12'),
     'batch_size/accumulation_steps=12 is not divisible by the 8 batch shards'),
    (('--topology', 'v3-8', "--config.mesh.rules=(('attention/qkv', 'replicate'),)"),
     "mesh.rules[0] 'attention/qkv' matches no parameter"),
]


@pytest.fixture(scope='module')
def in_one_process():
  """{'wide' | 'wide fsdp' | 'splash' | bad input index: (CompletedProcess, report)} of `vvt memory` commands run
  in one process through the CLI's `main(argv)` (`test_commands.IN_ONE_PROCESS`), the refusals first: each is
  checked on its own, the process's start and libtpu's are paid once (the native filter of `vvt`'s console entry
  is not installed here: the process's own stderr is not read). The commands compile for the same v3-8 topology;
  the one whose process stderr is checked (libtpu kept quiet) and the forced CPU devices (set before JAX starts)
  keep processes of their own."""
  named = [*range(len(BAD_INPUT)), 'wide', 'wide fsdp', 'splash', 'batch 16', 'batch 16 in 2']
  argv = [['memory', '--config', TINY, *args] for args, _ in BAD_INPUT] + [
      ['memory', '--config', TINY, '--topology', 'v3-8', *WIDE], ['memory', *WIDE_FITS], ['memory', *SPLASH],
      ['memory', *BATCH_16], ['memory', *BATCH_16, '--config.optimizer.accumulation_steps=2']]
  res = subprocess.run([sys.executable, '-c', IN_ONE_PROCESS, json.dumps(argv)], cwd=REPO, env=_env(),
                       capture_output=True, text=True, timeout=900)
  assert res.returncode == 0, res.stderr[-3000:]
  results = json.loads(res.stdout.splitlines()[-1])
  return {name: (subprocess.CompletedProcess(args, r['rc'], r['stdout'], r['stderr']), _report(r['stdout']))
          for name, args, r in zip(named, argv, results, strict=True)}


def test_a_config_compiled_for_a_tpu_v3_8_fits_and_reports_memory_and_flops():
  proc, r = memory('--config', TINY, '--topology', 'v3-8')
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert r['topology'] == 'v3-8' and r['devices'] == 8 and r['batch_size'] == 8
  assert r['mesh'] == {'data': 8, 'fsdp': 1, 'model': 1}
  assert r['fits'] is True and 0 < r['per_device_bytes'] < r['device_memory_bytes'] == 16 * 2 ** 30
  assert r['params_bytes'] == 4 * r['num_params']  # replicated float32
  assert r['flops_per_step'] == 8 * r['flops_per_device'] > 0
  for label in ('params', 'optimiser state', 'temporaries', 'total', 'FLOPs per step', 'at peak'):
    assert label in proc.stdout
  # the step's FLOPs beside the plan, against a v3 TensorCore's bf16 peak (float32 dots run as one bf16 pass)
  assert r['peak_tflops_per_device'] == 61.5
  assert r['min_step_seconds'] == pytest.approx(r['flops_per_device'] / 61.5e12)
  assert 'Traceback' not in proc.stderr and 'TPU_WORKER_HOSTNAMES' not in proc.stderr  # libtpu kept quiet


def test_a_config_that_does_not_fit_exits_3_and_fits_with_fsdp(in_one_process):
  proc, r = in_one_process['wide']
  assert proc.returncode == 3, proc.stderr[-3000:]
  assert r['fits'] is False and r['per_device_bytes'] > r['device_memory_bytes']
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith('vvt memory: does not fit: ') and 'GiB' in last
  assert 'Traceback' not in proc.stderr
  # the same model with its params and AdamW state sharded over fsdp=8: an eighth of them per core
  proc, f = in_one_process['wide fsdp']
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f['fits'] is True and f['mesh'] == {'data': 1, 'fsdp': 8, 'model': 1}
  assert f['params_bytes'] < r['params_bytes'] / 7 and f['opt_state_bytes'] < r['opt_state_bytes'] / 7


def test_splash_attention_compiles_for_a_tpu_mesh_of_data_and_model_axes(in_one_process):
  # The Pallas TPU kernel (Mosaic) is not partitioned by XLA; the model runs it in shard_map over the mesh the
  # step is traced with, and builds for the topology's platform (not the CPU host's, which refuses splash).
  proc, r = in_one_process['splash']
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert r['fits'] is True and r['mesh'] == {'data': 4, 'fsdp': 1, 'model': 2}


def test_an_accumulated_step_counts_the_flops_of_all_its_micro_batches(in_one_process):
  # XLA counts the scan over micro-batches once: without the correction the step of 2 micro-batches of 8 would
  # report half the FLOPs of the same 16 clips in one pass. With it, the optimiser's update is counted twice: 2%
  # more for this toy (one clip of 16 tokens per core), nothing to see on a real model.
  (proc, whole), (proc2, split) = in_one_process['batch 16'], in_one_process['batch 16 in 2']
  assert proc.returncode == proc2.returncode == 0, proc2.stderr[-3000:]
  assert split['batch_size'] == whole['batch_size'] == 16
  assert split['flops_per_device'] == pytest.approx(whole['flops_per_device'], rel=0.05)
  assert split['min_step_seconds'] == pytest.approx(whole['min_step_seconds'], rel=0.05)


def test_forced_cpu_devices():
  proc, r = memory('--config', TINY, '--topology', 'cpu:8', "--config.mesh.axes={'data': 2, 'fsdp': 4}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert r['devices'] == 8 and r['mesh'] == {'data': 2, 'fsdp': 4, 'model': 1} and r['fits'] is True


@pytest.mark.parametrize('case', range(len(BAD_INPUT)))
def test_bad_input_is_one_line_exit_2_before_compiling(in_one_process, case):
  message = BAD_INPUT[case][1]
  proc, r = in_one_process[case]
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert r is None and 'compiling' not in proc.stderr and 'Traceback' not in proc.stderr
  err = proc.stderr.strip().splitlines()
  assert err[-1].startswith('vvt memory: error: ') and message in err[-1], err
