"""The localisation task: point targets, losses, decoding, and a tiny ActionFormer that learns synthetic events."""
import contextlib
import io
import json
import os
import signal
import subprocess

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import common
from tests.cli.test_sweep import one_line_error
from tests.cli.test_sweep import vvt_in_process
from vvt.config import loader
from vvt.tasks import localization
from vvt.tasks import localization_options
from vvt.tasks import registry
from vvt.train import checkpoints

TINY = dict(max_seq_len=64, embed_dim=32, num_heads=2, window=9, levels=3, stem_layers=1, head_layers=2,
            regression_ranges=((0, 4), (4, 8), (8, 10000)), protocol='thumos14', crop_ratio=(0.9, 1.0))


def _config(**options):
  c = common.synthetic_config('divided', 'data/synthetic', hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_classes = 2
  c.task.name = 'localization'
  c.task.localization.update(dict(TINY, **options))
  return c


def test_point_targets_follow_center_sampling_and_the_regression_ranges():
  pts = jnp.asarray(localization.points_of(16, 3, ((0, 4), (4, 8), (8, 10000))))
  targets = jax.jit(localization.point_targets, static_argnums=(3, 4))  # one compile, not one per op
  cls, reg = targets(pts, jnp.array([[4.0, 8.0], [0.0, 0.0]]), jnp.array([1, -1]), 2, 1.5)
  cls, reg = np.asarray(cls), np.asarray(reg)
  positive = np.flatnonzero(cls.sum(1))
  # level 0 (stride 1): steps 5..7 are within 1.5 of the centre 6 and inside (4, 8); their largest distance
  # to a boundary (2..3) is in (0, 4); level 1 (stride 2): steps 4, 6, 8 within 3 of 6, inside: 6 (reach 2 < 4: no)
  assert pts[positive, 0].tolist() == [5.0, 6.0, 7.0] and cls[positive, 1].tolist() == [1.0] * 3
  np.testing.assert_allclose(reg[positive], [[1, 3], [2, 2], [3, 1]])


def test_the_diou_loss_is_zero_on_the_target_and_grows_with_the_shift():
  target = jnp.array([[2.0, 2.0]])
  diou = jax.jit(localization.diou_loss)
  assert float(diou(target, target)[0]) == pytest.approx(0.0, abs=1e-6)
  near, far = (float(diou(jnp.array([[2.0 + d, 2.0 - d]]), target)[0]) for d in (0.5, 1.5))
  assert 0 < near < far


def test_bad_options_are_one_line_each_naming_the_field():
  c = _config(max_seq_len=62, protocol='coco', nms='greedy', regression_ranges=((0, 4), (4, 8)), window=0)
  problems = registry.check_options(c)
  assert any(p.startswith('task.localization.max_seq_len=62 must be a multiple of 2^(levels - 1) = 4')
             for p in problems)
  assert any(p.startswith("task.localization.protocol must be one of 'thumos14', 'activitynet'") for p in problems)
  assert any(p.startswith("task.localization.nms must be one of 'soft'") for p in problems)
  assert 'task.localization.regression_ranges has 2 ranges for 3 pyramid levels' in problems
  assert 'task.localization.window must be a positive int, got 0' in problems
  assert all('\n' not in p for p in problems)
  assert registry.check_options(_config()) == []
  assert [p.split(':')[0] for p in localization_options.start_problems(_config())] == [
      'task.localization.sequences is not set', 'task.localization.annotations is not set']


TINY_ARGS = ['--config.task.localization.max_seq_len=64', '--config.task.localization.embed_dim=16',
             '--config.task.localization.num_heads=2', '--config.task.localization.window=9',
             '--config.task.localization.levels=3', '--config.task.localization.stem_layers=1',
             '--config.task.localization.head_layers=1',
             '--config.task.localization.regression_ranges=((0,4),(4,8),(8,10000))',
             '--config.num_epochs=0', '--config.num_train_steps=60', '--config.schedule.base_lr=5e-3',
             '--config.schedule.warmup_epochs=0', '--config.schedule.warmup_steps=6',
             '--config.checkpoint.every_steps=20', '--config.checkpoint.keep=2']


def _vvt(*args) -> subprocess.CompletedProcess:
  """`vvt ARGS` in this process (`vvt.cli.main`), its stdout and stderr captured."""
  from vvt.cli import main
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    rc = main(list(args))
  return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


@pytest.fixture(scope='module')
def tiny_run(tmp_path_factory):
  """(data folder, workdir) of a tiny localisation run through `vvt train`: 9 training videos of 64 steps, 60
  steps, a checkpoint every 20."""
  from vvt.data import write_synthetic_sequences
  root = tmp_path_factory.mktemp('loc')
  data, work = str(root / 'data'), str(root / 'run')
  write_synthetic_sequences(data, videos=12, length=64, dim=16, classes=2, seed=0)
  res = _vvt('train', '--config', f'configs/localization.py:{data}', '--workdir', work, *TINY_ARGS)
  assert res.returncode == 0, res.stderr[-3000:]
  return data, work, res


def test_a_tiny_actionformer_learns_synthetic_events_through_vvt_train(tiny_run):
  _, work, res = tiny_run
  done = res.stdout.strip().splitlines()[-1]
  assert done.startswith('[done] average_map = ') and 'over tIoU 0.3, 0.4, 0.5, 0.6, 0.7 (thumos14) on 3 ' \
      'validation videos' in done, done
  result = json.loads(open(os.path.join(work, 'localization_validation_thumos14.json')).read())
  assert result['thresholds'] == [0.3, 0.4, 0.5, 0.6, 0.7] and result['protocol'] == 'thumos14'
  assert result['map@0.5'] > 0.7 and result['average_map'] > 0.6, result
  csv_lines = open(os.path.join(work, 'localization_validation_thumos14_classes.csv')).read().splitlines()
  assert csv_lines[0] == 'class,segments,ap@0.3,ap@0.4,ap@0.5,ap@0.6,ap@0.7,average'
  assert [l.split(',')[0] for l in csv_lines[1:]] == ['action_0', 'action_1']
  with open(os.path.join(work, 'localization_validation_thumos14_segments.png'), 'rb') as f:
    assert f.read(8) == b'\x89PNG\r\n\x1a\n'
  from vvt.convert import export
  head, meta = export.from_safetensors(os.path.join(work, 'localization_head.safetensors'))
  assert head['cls_out']['kernel'].shape == (3, 16, 2) and meta['task'] == 'localization'
  assert json.loads(open(os.path.join(work, 'config.json')).read())['task']['name'] == 'localization'
  assert checkpoints.all_steps(work) == [40, 60]  # every 20 steps, the 2 newest kept


def _overrides() -> list:
  return [tuple(a[len('--config.'):].split('=', 1)) for a in TINY_ARGS]


def _params(work, step=None):
  return jax.device_get(checkpoints.load_params(work, step)[0])


def test_a_run_stopped_by_sigterm_resumes_to_the_uninterrupted_result(tiny_run, tmp_path):
  from vvt.train import localization_run
  from vvt.train.signals import Interrupted
  data, work, _ = tiny_run
  resumed = str(tmp_path / 'resumed')
  run = loader.load_run(f'configs/localization.py:{data}', _overrides(), files=())

  def log(line):  # the first training log line (step 30): a SIGTERM, as a preempted machine gets
    if line.startswith('[train] step 30/'):
      os.kill(os.getpid(), signal.SIGTERM)
  handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    with pytest.raises(Interrupted, match='checkpoint saved at step 30 .* the same command resumes'):
      localization_run.train_and_evaluate(run, resumed, log=log)
  finally:
    for s, h in handlers.items():
      signal.signal(s, h)
  assert checkpoints.all_steps(resumed) == [20, 30]
  assert not os.path.exists(os.path.join(resumed, 'localization_validation_thumos14.json'))
  res = _vvt('train', '--workdir', resumed)  # its own config.json
  assert res.returncode == 0 and 'resumed from' in res.stdout, res.stderr[-3000:]
  chex.assert_trees_all_close(_params(resumed), _params(work), rtol=1e-5, atol=1e-6)
  name = 'localization_validation_thumos14.json'
  a, b = (json.loads(open(os.path.join(w, name)).read()) for w in (work, resumed))
  assert {k: a[k] for k in ('average_map', 'map@0.5', 'loss')} == pytest.approx(
      {k: b[k] for k in ('average_map', 'map@0.5', 'loss')}, rel=1e-4)


def test_vvt_eval_of_a_localisation_run_evaluates_its_latest_checkpoint_again(tiny_run, tmp_path):
  _, work, _ = tiny_run
  name = 'localization_validation_thumos14.json'
  trained = json.loads(open(os.path.join(work, name)).read())
  os.remove(os.path.join(work, name))
  res = _vvt('eval', '--workdir', work)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.strip().splitlines()[-1].startswith(f'[done] average_map = {trained["average_map"]:.4f}')
  again = json.loads(open(os.path.join(work, name)).read())
  assert again['step'] == 60 and again['average_map'] == pytest.approx(trained['average_map'], abs=1e-6)
  missing = _vvt('eval', '--workdir', work, '--step', '7')
  assert missing.returncode != 0 and 'no checkpoint for step 7' in missing.stderr


def test_eight_devices_give_the_one_device_run(tiny_run, tmp_path):
  from tests.train import train_helpers
  data, _, _ = tiny_run
  fields = [f'{k}={v}' for k, v in _overrides()] + ['batch_size=8']
  proc = subprocess.run([train_helpers.PY, str(train_helpers.REPO / 'tests' / 'tasks' / 'localization_shard_run.py'),
                         data, str(tmp_path), '8', *fields], cwd=train_helpers.REPO,
                        env=train_helpers.env(devices=8), capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "[train] mesh {'data': 1, " in proc.stdout and "[train] mesh {'data': 8, " in proc.stdout, proc.stdout
  assert "batches of 8 split over ('data', 'fsdp')" in proc.stdout
  # 8 AdamW steps, one program on 1 device and one summing over 8: measured 4e-7 apart, but for the attention key
  # biases, whose gradient is zero (a bias on every key shifts a query's logits alike) and whose rounding noise
  # Adam scales to steps of the lr's size: they are left out
  one, eight = (_without_key_biases(_params(str(tmp_path / n))) for n in ('one', 'eight'))
  assert len(one) > 20
  chex.assert_trees_all_close(one, eight, rtol=1e-4, atol=1e-5)


def _without_key_biases(params) -> dict:
  flat = jax.tree_util.tree_flatten_with_path(params)[0]
  return {jax.tree_util.keystr(p): x for p, x in flat if "['key']['bias']" not in jax.tree_util.keystr(p)}


def test_refusals_of_a_localisation_run(tmp_path, capsys):
  from vvt.data import write_synthetic_sequences
  data = str(tmp_path / 'data')
  write_synthetic_sequences(data, videos=4, length=64, dim=16, classes=2)
  np.save(os.path.join(data, 'sequences', 'synthetic_0001.npy'), np.zeros((64, 8), np.float32))
  config = f'configs/localization.py:{data}'
  bad_width = vvt_in_process(capsys, 'train', '--config', config, '--workdir', str(tmp_path / 'w'), *TINY_ARGS)
  one_line_error(bad_width, 'train', 'synthetic_0001.npy: a sequence of shape (64, 8), the index says (windows, '
                 '16)')
  assert not os.path.exists(tmp_path / 'w' / 'localization_validation_thumos14.json')
  assert not os.path.exists(tmp_path / 'w' / 'checkpoints')
  bad_option = vvt_in_process(capsys, 'localize', '--config', config, '--workdir', str(tmp_path / 'w'),
                              '--config.task.localization.nms=greedy')
  one_line_error(bad_option, 'localize', "task.localization.nms must be one of 'soft', 'hard', 'none', got 'greedy'")
  init = vvt_in_process(capsys, 'train', '--config', config, '--workdir', str(tmp_path / 'w'), '--init', data)
  one_line_error(init, 'train', f'--init {data}: a run on feature sequences trains its head from scratch')
  with open(os.path.join(data, 'annotations.json'), 'w') as f:
    f.write('{"database": {"synthetic_0000": {"subset": "training"}}}')
  bad_annotation = vvt_in_process(capsys, 'train', '--config', config, '--workdir', str(tmp_path / 'w'))
  one_line_error(bad_annotation, 'train', 'task.localization.annotations: ')
  assert 'synthetic_0000' in bad_annotation.stderr and 'no duration' in bad_annotation.stderr


def test_the_configs_class_names_keep_their_order_as_the_heads_outputs(tmp_path):
  """A localisation run whose config names its classes reads the annotations with that list, in its order (the
  order of the head's outputs, the results' classes); without one the annotations' labels, sorted. A label the
  list lacks is refused naming the file and the video."""
  from vvt.data import AnnotationError
  from vvt.data import write_synthetic_sequences
  from vvt.train import localization_run
  data = str(tmp_path / 'data')
  write_synthetic_sequences(data, videos=4, length=64, dim=16, classes=2)
  config = f'configs/localization.py:{data}'
  given = loader.load_run(config, [('num_classes', '2'), ('class_names', "('action_1', 'action_0')")], files=())
  assert localization_run.read_sets(given, log=None)[2] == ['action_1', 'action_0']
  assert localization_run.read_sets(loader.load_run(config, files=()), log=None)[2] == ['action_0', 'action_1']
  lacking = loader.load_run(config, [('num_classes', '2'), ('class_names', "('action_1', 'other')")], files=())
  with pytest.raises(AnnotationError, match=r"annotations\.json: video synthetic_\d+: label 'action_0' is not in "
                                            r'the label list \(2 labels\)'):
    localization_run.read_sets(lacking, log=None)


def test_two_processes_split_the_evaluation_and_give_the_one_process_results(tmp_path):
  """Two processes (jax.distributed on 127.0.0.1) train one run and evaluate it, each scoring its share of the
  test videos: both hold the results of all of them, those of one process evaluating the same checkpoint."""
  import socket

  from tests.train import train_helpers
  from vvt.data import write_synthetic_sequences
  from vvt.train import localization_run
  data, work = str(tmp_path / 'data'), str(tmp_path / 'run')
  write_synthetic_sequences(data, videos=12, length=64, dim=16, classes=2, seed=0)
  fields = [(k, v) for k, v in _overrides() if not k.startswith(('num_train_steps', 'checkpoint.'))]
  fields += [('num_train_steps', '8'), ('checkpoint.every_steps', '8')]
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  helper = str(train_helpers.REPO / 'tests' / 'tasks' / 'localization_two_process_run.py')
  procs = [subprocess.Popen([train_helpers.PY, helper, data, work, str(port), str(i), *[f'{k}={v}' for k, v in fields]],
                            cwd=train_helpers.REPO, env=train_helpers.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True) for i in range(2)]
  results = [_result_of(p) for p in procs]
  assert sorted(r['process'] for r in results) == [0, 1] and all(r['processes'] == 2 for r in results)
  assert all(r['eval_processes'] == 2 and r['steps'] == 8 and r['num_videos'] == 3 for r in results), results
  assert results[0]['average_map'] == results[1]['average_map']
  one = localization_run.evaluate_checkpoint(loader.load_run(f'configs/localization.py:{data}', fields, files=()),
                                             work, log=lambda *a: None)
  assert one['eval_processes'] == 1 and one['num_videos'] == 3
  assert one['average_map'] == pytest.approx(results[0]['average_map'], abs=1e-6)
  assert one['map@0.5'] == pytest.approx(results[0]['map@0.5'], abs=1e-6)


def _result_of(proc: subprocess.Popen) -> dict:
  """The `RESULT {json}` line of a helper process that exited 0 (else the test fails with its stderr)."""
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-4000:]
  return json.loads([line for line in out.splitlines() if line.startswith('RESULT ')][-1][len('RESULT '):])
