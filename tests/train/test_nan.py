"""A NaN / inf loss stops the run naming the step and leaves the last good checkpoint."""
import jax
import numpy as np
import pytest
import train_helpers as common

from vvt.config import run_spec
from vvt.train import checkpoints
from vvt.train import trainer


def test_non_finite_loss_stops_with_the_step_and_keeps_good_checkpoints(tiny_data, tmp_path):
  c = common.tiny_config(tiny_data)
  c.optimizer.name = 'sgd'
  c.optimizer.grad_clip_norm = 0.0
  c.schedule.name = 'constant'
  # lr 0 for the first update, then an absurd one: parameters blow up at update 2.
  c.schedule.warmup_steps = 2
  c.schedule.base_lr = 1e38
  c.checkpoint.every_steps = 1
  c.num_train_steps = 8
  with pytest.raises(trainer.NonFiniteLossError, match=r'at step \d+') as err:
    trainer.train_and_evaluate(run_spec.resolve(c), str(tmp_path), log=lambda *a, **k: None)
  msg = str(err.value)
  bad_step = int(msg.split(' at step ')[1].split()[0])
  assert bad_step >= 2
  steps = checkpoints.all_steps(str(tmp_path))
  assert steps and max(steps) < bad_step
  assert f'last good checkpoint is step {max(steps)}' in msg
  for s in steps:
    params, _ = checkpoints.load_params(str(tmp_path), s)
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(params))
