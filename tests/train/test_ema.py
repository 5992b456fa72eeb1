"""The EMA of the params (optimizer.ema_decay): decay 0 gives the params, the update follows its formula, off
means no EMA in the state; a run resumed from a checkpoint without EMA starts it from the params; the final
evaluation reports raw and EMA params; `vvt eval` and `vvt export` read the EMA params unless --raw_params."""
import dataclasses
import json

import chex
import jax
import numpy as np
import pytest
import train_helpers as common

from vvt.cli import convert as convert_cli
from vvt.cli import train as train_cli
from vvt.config import run_spec
from vvt.convert import export
from vvt.train import checkpoints
from vvt.train import ema
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import optimizers
from vvt.train import steps
from vvt.train import trainer
from vvt.train.program import build_program


def _batch(n=4, seed=0):
  rng = np.random.default_rng(seed)
  return {'inputs': rng.integers(0, 256, size=(n, 8, 32, 32, 3)).astype(np.uint8),
          'label': rng.integers(0, 4, size=(n,)).astype(np.int32), 'mask': np.ones(n, np.float32)}


def test_ema_with_decay_zero_is_the_params_and_otherwise_follows_its_formula():
  c = common.tiny_config('unused')  # the steps read no files
  c.optimizer.name = 'adamw'
  c.schedule.update(name='constant', warmup_steps=0, base_lr=1e-2)
  run = run_spec.resolve(c)
  mesh = mesh_lib.make_mesh()
  sched = optimizers.make_schedule(run.schedule, 10, 10)
  tx = optimizers.make_optimizer(run.optimizer, sched)
  module = model_state.build_model(run.model)
  state0 = jax.jit(model_state.init_fn(module, model_state.ClipShape.of(run), tx, ema=True))(jax.random.PRNGKey(0))
  chex.assert_trees_all_equal(state0.ema_params, state0.params)  # ema_0 = params_0
  settings = dataclasses.replace(steps.TrainSettings.of(run), ema_decay=0.0)
  step = jax.jit(steps.train_step_fn(module, tx, sched, settings, mesh))
  state1, _, _ = step(state0, mesh_lib.global_batch(_batch(seed=1), mesh, 4))
  state2, _, _ = step(state1, mesh_lib.global_batch(_batch(seed=2), mesh, 4))
  moved = [float(np.abs(a - b).max())
           for a, b in zip(jax.tree.leaves(state2.params), jax.tree.leaves(state0.params), strict=True)]
  assert max(moved) > 1e-3  # the params did move
  chex.assert_trees_all_equal(state1.ema_params, state1.params)  # decay 0: exactly the params
  chex.assert_trees_all_equal(state2.ema_params, state2.params)
  # decay 0.5 over the same params: ema_2 = 0.5 ema_1 + 0.5 p_2, ema_1 = 0.5 p_0 + 0.5 p_1
  ema2 = ema.update(ema.update(ema.init(state0.params), state1.params, 0.5), state2.params, 0.5)
  want = jax.tree.map(lambda p0, p1, p2: 0.25 * p0 + 0.25 * p1 + 0.5 * p2, state0.params, state1.params,
                      state2.params)
  chex.assert_trees_all_close(ema2, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize('decay,kept', [(0.0, False), (None, False), (0.99, True)])
def test_the_state_keeps_an_ema_sharded_like_the_params_only_when_asked(decay, kept):
  c = common.tiny_config('unused')
  c.optimizer.ema_decay = decay
  program = build_program(run_spec.resolve(c), mesh_lib.make_mesh(), num_train_videos=48)
  abstract = program.abstract_state()
  shardings = program.training.shardings
  if not kept:
    assert abstract.ema_params is None and shardings.ema_params is None
    return
  assert jax.tree.structure(abstract.ema_params) == jax.tree.structure(abstract.params)
  assert jax.tree.leaves(shardings.ema_params) == jax.tree.leaves(shardings.params)
  state = program.init_state(jax.random.PRNGKey(0))
  chex.assert_trees_all_equal(state.ema_params, state.params)


def _results(wd, step, split='test'):
  with open(checkpoints.eval_results_path(str(wd), step, split)) as f:
    return json.load(f)


def test_a_run_without_ema_resumed_with_it_reports_raw_and_ema_and_eval_export_pick_ema(tiny_data, tmp_path, capsys):
  """Steps 1-2 without EMA (a checkpoint as older runs wrote them), 3-4 with ema_decay=0.5: the EMA starts from
  the restored params, the final evaluation reports both, `vvt eval` / `vvt export` read the EMA params by
  default and the raw ones with --raw_params."""
  wd = tmp_path / 'run'
  c = common.tiny_config(tiny_data)
  c.num_train_steps, c.checkpoint.every_steps, c.log_every_steps = 4, 2, 2
  c.optimizer.name, c.schedule.base_lr = 'adamw', 1e-2
  res = trainer.train_and_evaluate(run_spec.resolve(c), str(wd), log=lambda *a: None, stop_after_step=2)
  assert res['stopped_early'] and not checkpoints.has_ema(str(wd), 2)
  c.optimizer.ema_decay = 0.5
  lines = []
  res = trainer.train_and_evaluate(run_spec.resolve(c), str(wd), log=lines.append, allow_config_change=True)
  assert any('checkpoint step 2 has no EMA params: the EMA starts from its params' in l for l in lines), lines
  assert checkpoints.has_ema(str(wd), 4)
  raw, _ = checkpoints.load_params(str(wd), 4)
  ema, _ = checkpoints.load_params(str(wd), 4, item='ema')
  assert max(float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(raw), jax.tree.leaves(ema), strict=True)) > 1e-4

  final, final_raw = _results(wd, 4), _results(wd, 4, 'test_raw')
  assert final['weights'] == 'ema' and final_raw['weights'] == 'raw'
  assert final['split'] == final_raw['split'] == 'test'  # the data split: test_raw only names the file
  assert res['weights'] == 'ema' and res['raw_video_top1'] == final_raw['video_top1']
  assert final['raw_clip_top1'] == final_raw['clip_top1'] and final['video_top1'] == res['video_top1']
  evals = [json.loads(l) for l in open(wd / 'metrics.jsonl') if '"eval"' in l]
  assert evals[-1]['video_top1'] == final['video_top1'] and evals[-1]['raw_video_top1'] == final_raw['video_top1']
  assert any(l.startswith('[eval] raw params') for l in lines) and any(l.startswith('[eval] ema params')
                                                                         for l in lines)

  # vvt eval: the EMA params (the same results), --raw_params the raw ones (written under test_raw)
  (wd / 'checkpoints' / 'eval_4_test.json').unlink()
  (wd / 'checkpoints' / 'eval_4_test_raw.json').unlink()
  assert train_cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd)]) == 0
  assert '(ema params)' in capsys.readouterr().out
  again = _results(wd, 4)
  assert again['weights'] == 'ema' and again['clip_top1'] == final['clip_top1']
  assert again['video_top1'] == final['video_top1']
  assert train_cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), '--raw_params']) == 0
  again_raw = _results(wd, 4, 'test_raw')
  assert again_raw['weights'] == 'raw' and again_raw['clip_top1'] == final_raw['clip_top1']
  assert _results(wd, 4)['weights'] == 'ema'  # not overwritten
  assert train_cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd), '--step', '2']) == 0
  assert _results(wd, 2)['weights'] == 'params'  # a step without EMA: its only params

  # vvt export: EMA by default, raw with --raw_params, both named in the file's metadata
  for flags, want, name in (([], ema, 'ema'), (['--raw_params'], raw, 'raw')):
    out = tmp_path / f'{name}.safetensors'
    assert convert_cli.export_main(['--workdir', str(wd), '--output', str(out), *flags]) == 0
    params, metadata = export.from_safetensors(str(out))
    assert metadata['weights'] == name
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(want), strict=True):
      np.testing.assert_array_equal(a, np.asarray(b))
