"""Helpers shared by the training tests."""
import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
PY = sys.executable
TINY = str(REPO / 'tests' / 'train' / 'tiny_config.py')
TRAIN_CLIPS, TEST_CLIPS = 48, 10
# The shared finished run of the reliability tests (tests/reliability/conftest.py: trained_8_steps).
ARGS_8_STEPS = ['--config.num_train_steps=8', '--config.checkpoint.every_steps=4', '--config.log_every_steps=4']


def write_tiny_dataset(out_dir):
  from vvt.config import schema
  from vvt.data.writing import synthetic
  out_dir = str(out_dir)
  if not os.path.exists(os.path.join(out_dir, 'manifest.json')):
    synthetic.write_synthetic(out_dir, num_classes=schema.SYNTHETIC['num_classes'], train_clips=TRAIN_CLIPS,
                              test_clips=TEST_CLIPS, num_frames=16, frame_size=64,
                              seed=1, train_shards=2, test_shards=1)
  return out_dir


def tiny_config(data_dir, attention='divided'):
  sys.path.insert(0, str(REPO / 'tests' / 'train'))
  import tiny_config as tc
  return tc.get_config(f'{data_dir},{attention}')


def env(devices=None):
  e = dict(os.environ)
  e['JAX_PLATFORMS'] = 'cpu'
  e['TF_CPP_MIN_LOG_LEVEL'] = '3'
  e['PYTHONPATH'] = str(REPO) + os.pathsep + e.get('PYTHONPATH', '')
  flags = [f for f in e.get('XLA_FLAGS', '').split() if 'device_count' not in f]
  if devices:
    flags.append(f'--xla_force_host_platform_device_count={devices}')
  e['XLA_FLAGS'] = ' '.join(flags)
  return e


def vvt(*args, devices=None, timeout=600, check=True):
  """Runs `python -m vvt.cli ARGS` in a subprocess; returns CompletedProcess."""
  proc = subprocess.run([PY, '-m', 'vvt.cli', *args], cwd=REPO, env=env(devices),
                        capture_output=True, text=True, timeout=timeout)
  if check and proc.returncode != 0:
    raise AssertionError(f'vvt {" ".join(args)} failed ({proc.returncode}):\n'
                         f'{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}')
  return proc


def vvt_main(*args):
  """`vvt ARGS` in this process (`tests.command_output.main_in_repo`), its output to pytest's capture: for runs
  whose files a test reads. Fails the test unless it exits 0."""
  from tests.command_output import main_in_repo
  rc = main_in_repo(args)
  assert rc == 0, f'vvt {" ".join(args)} exited {rc}'
