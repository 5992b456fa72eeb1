"""A tiny run through the real CLI: train, files, multi-view eval, eval --step, params-only checkpoints."""
import json
import math
import os

import train_helpers as common

from tests.cli.test_sweep import vvt_in_process
from vvt.cli import train as cli
from vvt.train import checkpoints


def _eval_json(workdir, step, split='test'):
  with open(checkpoints.eval_results_path(str(workdir), step, split)) as f:
    return json.load(f)


def test_train_then_evaluate(tiny_data, tmp_path, capsys):
  """One real training run (the CLI's `main(argv)` in this process: its files and output are what is read), then
  every check on it (one run, not one per test)."""
  wd = tmp_path / 'run'
  proc = vvt_in_process(capsys, 'train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd),
                        '--config.profile.steps=6,7')
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  trained = (wd, proc)
  check_train_outputs(trained)
  check_profile_and_performance(trained)
  check_eval_reproduces_final_results(trained, tiny_data, capsys)
  check_eval_missing_step_lists_existing_steps(trained, tiny_data, capsys)
  check_params_only_checkpoint(trained, tiny_data, tmp_path)


def check_train_outputs(trained):
  wd, proc = trained
  assert checkpoints.all_steps(str(wd)) == [4, 8, 12]
  assert 'ETA' in proc.stdout and 'clips/s' in proc.stdout
  assert '[done] step 12: video_top1 =' in proc.stdout
  recs = [json.loads(l) for l in open(wd / 'metrics.jsonl')]
  train = [r for r in recs if r['kind'] == 'train']
  assert [r['step'] for r in train] == [4, 8, 12]
  for r in train:
    assert math.isfinite(r['loss']) and 0 <= r['accuracy'] <= 1
    assert r['learning_rate'] > 0 and r['clips_per_sec'] > 0 or r['step'] == 4
  res = _eval_json(wd, 12)
  assert res['num_videos'] == common.TEST_CLIPS
  # 1 temporal clip x 3 spatial crops, every video exactly once
  assert res['num_views'] == 3 * common.TEST_CLIPS
  assert res['views_per_video_min'] == res['views_per_video_max'] == 3
  assert 0 <= res['video_top1'] <= 1 and 'video_top5' not in res  # top-k only for k < 4 classes
  assert [r for r in recs if r['kind'] == 'eval'][-1]['video_top1'] == res['video_top1']
  png = wd / 'training_curves.png'
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and png.stat().st_size > 5000
  assert any(f.startswith('events') for _, _, fs in os.walk(wd / 'tensorboard') for f in fs)
  assert json.load(open(wd / 'config.json'))['batch_size'] == 8


def check_profile_and_performance(trained):
  """profile.steps=6,7: one jax.profiler trace in the workdir; every train row has TFLOP/s per device, MFU (on a
  CPU against a matmul rate measured at the start, which the log names) and the share of time waiting for input."""
  wd, proc = trained
  runs = sorted((wd / 'tensorboard' / 'plugins' / 'profile').iterdir())
  assert len(runs) == 1
  files = sorted(f.name for f in runs[0].iterdir())
  assert 'perfetto_trace.json.gz' in files and any(f.endswith('.xplane.pb') for f in files), files
  assert all((runs[0] / f).stat().st_size > 0 for f in files)
  assert 'profile of steps 6-7' in proc.stdout and 'mfu against: no published CPU peak: measured' in proc.stdout
  train = [json.loads(l) for l in open(wd / 'metrics.jsonl') if '"train"' in l]
  for r in train:
    assert r['tflops_per_device'] > 0 and r['mfu'] > 0 and 0 <= r['input_wait_fraction'] <= 1, r


def check_eval_reproduces_final_results(trained, tiny_data, capsys):
  wd, _ = trained
  final = _eval_json(wd, 12)
  assert cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd)]) == 0
  again = _eval_json(wd, 12)
  for k in ('video_top1', 'clip_top1', 'num_views', 'video_mean_class_accuracy'):
    assert again[k] == final[k], k
  assert cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd),
                        '--step', '8', '--config.eval.average=softmax']) == 0
  r8 = _eval_json(wd, 8)
  assert r8['average'] == 'softmax' and r8['num_views'] == 3 * common.TEST_CLIPS
  assert 'step 8' in capsys.readouterr().out


def check_eval_missing_step_lists_existing_steps(trained, tiny_data, capsys):
  wd, _ = trained
  rc = cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd),
                      '--step', '7'])
  err = capsys.readouterr().err
  assert rc == 1
  assert 'no checkpoint for step 7' in err and 'existing steps: 4, 8, 12' in err
  rc = cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir',
                      str(wd) + '_nothing_here'])
  assert rc == 1 and 'no checkpoint in' in capsys.readouterr().err


def check_params_only_checkpoint(trained, tiny_data, tmp_path):
  wd, _ = trained
  params, step = checkpoints.load_params(str(wd))
  assert step == 12
  conv = tmp_path / 'converted'
  checkpoints.save_params(str(conv), params, step=0)
  assert checkpoints.read_meta(str(conv), 0)['kind'] == 'params'
  loaded, s = checkpoints.load_params(str(conv))
  assert s == 0
  assert cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(conv)]) == 0
  assert _eval_json(conv, 0)['video_top1'] == _eval_json(wd, 12)['video_top1']
  assert _eval_json(conv, 0)['clip_top1'] == _eval_json(wd, 12)['clip_top1']
