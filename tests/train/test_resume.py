"""Exact resume: SIGKILL a real training process after a checkpoint, restart it, and
compare with an uninterrupted run (params, eval metrics, logged training metrics); the same with the
fine-tuning options on (EMA of the params, layer-wise lr decay, repeated augmentation).

The killed run is a process (the kill is what is tested); the resumed run and the uninterrupted reference, whose
files and output are what the tests read, run through the CLI's `main(argv)` in the test process."""
import json
import os
import signal
import subprocess
import time

import chex
import jax
import numpy as np
import train_helpers as common

from tests.cli.test_sweep import vvt_in_process
from tests.command_output import HANG_S
from vvt.train import checkpoints

STEPS = 12
ARGS = ['--config.num_train_steps=%d' % STEPS, '--config.checkpoint.every_steps=4',
        '--config.log_every_steps=4',
        # exercise every source of randomness that must be replayed exactly
        '--config.loss.mixup_alpha=0.4', '--config.model.dropout_rate=0.1',
        '--config.model.stochastic_depth=0.1']


FINETUNING = ['--config.optimizer.ema_decay=0.9', '--config.optimizer.layer_decay=0.75',
              '--config.dataset.repeated_augmentation=2']


def _cmd(tiny_data, wd, args):
  return [common.PY, '-m', 'vvt.cli', 'train', '--config', f'{common.TINY}:{tiny_data}',
          '--workdir', str(wd), *args]


def test_killed_and_resumed_run_equals_uninterrupted_run(tiny_data, tmp_path, capsys):
  _kill_resume_and_compare(tiny_data, tmp_path, capsys, ARGS)


def test_killed_and_resumed_finetuning_run_equals_uninterrupted_run(tiny_data, tmp_path, capsys):
  """EMA (0.9), layer decay (0.75) and repeated augmentation (2 copies): the resumed run has the
  uninterrupted run's params and EMA params, raw and EMA evaluations, and training metrics."""
  ref_wd, cut_wd = _kill_resume_and_compare(tiny_data, tmp_path, capsys, ARGS + FINETUNING)
  e_ref, _ = checkpoints.load_params(str(ref_wd), STEPS, item='ema')
  e_cut, _ = checkpoints.load_params(str(cut_wd), STEPS, item='ema')
  chex.assert_trees_all_close(e_ref, e_cut, rtol=1e-6, atol=1e-7)
  r_ref = json.load(open(checkpoints.eval_results_path(str(ref_wd), STEPS, 'test_raw')))
  r_cut = json.load(open(checkpoints.eval_results_path(str(cut_wd), STEPS, 'test_raw')))
  assert r_ref['weights'] == r_cut['weights'] == 'raw'
  for k in ('video_top1', 'clip_top1', 'video_mean_class_accuracy', 'num_views'):
    assert r_ref[k] == r_cut[k], k


def _kill_resume_and_compare(tiny_data, tmp_path, capsys, args):
  ref_wd, cut_wd = tmp_path / 'reference', tmp_path / 'killed'
  # the test process's matmul precision (tests/conftest.py), so that the killed process compiles the programs of
  # the runs in this process
  env = {**common.env(), 'JAX_DEFAULT_MATMUL_PRECISION': jax.config.jax_default_matmul_precision}
  victim = subprocess.Popen(_cmd(tiny_data, cut_wd, args), cwd=common.REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + HANG_S  # a hang guard: the first steps take seconds, minutes on a loaded machine
  ckpt4 = cut_wd / 'checkpoints' / '4'
  while not ckpt4.exists():
    assert victim.poll() is None, 'the training process ended before its step-4 checkpoint'
    assert time.time() < deadline
    time.sleep(0.05)
  os.kill(victim.pid, signal.SIGKILL)
  victim.wait()
  steps_at_kill = checkpoints.all_steps(str(cut_wd))
  assert 4 in steps_at_kill and STEPS not in steps_at_kill, steps_at_kill
  assert not os.path.exists(checkpoints.eval_results_path(str(cut_wd), STEPS, 'test'))

  resumed = vvt_in_process(capsys, 'train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(cut_wd), *args)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f'resumed from {cut_wd}/checkpoints/{steps_at_kill[-1]}' in resumed.stdout
  common.vvt_main('train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(ref_wd), *args)

  p_ref, _ = checkpoints.load_params(str(ref_wd), STEPS)
  p_cut, _ = checkpoints.load_params(str(cut_wd), STEPS)
  # the same programs on the same machine (the runs read the same compiled steps): equal but for the
  # resume itself, which must not change a bit of the state; a tolerance of a few ulps only
  chex.assert_trees_all_close(p_ref, p_cut, rtol=1e-6, atol=1e-7)
  r_ref = json.load(open(checkpoints.eval_results_path(str(ref_wd), STEPS, 'test')))
  r_cut = json.load(open(checkpoints.eval_results_path(str(cut_wd), STEPS, 'test')))
  for k in ('video_top1', 'clip_top1', 'video_mean_class_accuracy', 'num_views'):
    assert r_ref[k] == r_cut[k], k

  def train_records(wd):
    recs = [json.loads(l) for l in open(wd / 'metrics.jsonl')]
    return {r['step']: r for r in recs if r['kind'] == 'train'}
  t_ref, t_cut = train_records(ref_wd), train_records(cut_wd)
  assert sorted(t_ref) == sorted(t_cut) == list(range(4, STEPS + 1, 4))
  for s in t_ref:
    for k in ('loss', 'accuracy', 'learning_rate'):
      np.testing.assert_allclose(t_cut[s][k], t_ref[s][k], rtol=1e-5, err_msg=f'{k}@{s}')
  return ref_wd, cut_wd
