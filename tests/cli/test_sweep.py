"""`vvt sweep` and `vvt results` as a user runs them: a 2-trial miniature sweep end to end (train, evaluate,
aggregate), re-run (nothing retrained), an interrupted trial resumed, a failed trial recorded; bad input as
one line; `--dry-run` of every study in experiments/."""
import csv
import glob
import os
import subprocess
import sys

import pytest

from tests.cli.test_commands import env
from tests.conftest import REPO

EXPERIMENTS = sorted(p for p in glob.glob(str(REPO / 'experiments' / '*.py'))
                     if os.path.basename(p) not in ('__init__.py', 'common.py'))

STUDY = '''
from configs import common
from vvt.studies import sweep


def get_config(arg=None):
  c = common.synthetic_config('divided', {data!r}, hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_train_steps, c.batch_size, c.log_every_steps = 6, 4, 3
  c.checkpoint.every_steps, c.schedule.warmup_steps, c.eval.batch_size = 3, 1, 8
  return c


def get_sweep(arg=None):
  {body}
'''


def study(tmp_path, data, body='return sweep.axis("model.attention", ["space", "divided"])', name='study.py'):
  path = tmp_path / name
  path.write_text(STUDY.format(data=str(data), body=body))
  return str(path)


def vvt_in_process(capsys, *args):
  """`vvt ARGS` through the CLI's `main(argv)` in this process, from the repository as `vvt` runs: for refusals
  and dry runs, where a separate process proves nothing more. A CompletedProcess, as `vvt` gives."""
  from tests.command_output import main_in_repo
  capsys.readouterr()
  rc = main_in_repo(args)
  captured = capsys.readouterr()
  return subprocess.CompletedProcess(args, rc, captured.out, captured.err)


def one_line_error(res, command, message, code=2):
  lines = [l for l in res.stderr.splitlines() if l.strip()]
  assert res.returncode == code, res.stdout[-2000:] + res.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith(f'vvt {command}: error: ') and message in lines[0], lines


def mtimes(folder):
  return {p: os.path.getmtime(p) for p in glob.glob(os.path.join(folder, '**', '*'), recursive=True)
          if os.path.isfile(p) and not p.endswith(('trial.json', 'train.log', 'model_summary.json'))}


def vvt_env(monkeypatch) -> None:
  """This process's environment made the one `vvt` subprocesses get (`env()`): for a sweep run through
  `main(argv)` here, whose trials are still processes of their own and inherit it."""
  for name, value in env().items():
    monkeypatch.setenv(name, value)


def test_a_two_trial_sweep_end_to_end_then_rerun_and_resume(tiny_data, tmp_path, capsys, monkeypatch):
  """The sweeps and `vvt results` through `main(argv)` in the test process with the environment `vvt` gets (the
  sweep worker's process proves nothing more; its trials, when it trains one, are still processes)."""
  vvt_env(monkeypatch)
  spec, out = study(tmp_path, tiny_data), str(tmp_path / 'sweep')
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', out, '--parallel', '2')
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  assert '(1/2) finished attention=space in' in res.stdout and '(2/2) finished attention=divided' in res.stdout
  rows = list(csv.DictReader(open(os.path.join(out, 'results.csv'))))
  assert [(r['trial'], r['status'], r['attention'], r['step']) for r in rows] == [
      ('attention=space', 'finished', 'space', '6'), ('attention=divided', 'finished', 'divided', '6')]
  for r in rows:
    assert 0 <= float(r['video_top1']) <= 1 and 0 <= float(r['clip_top1']) <= 1
    assert float(r['params_m']) > 0 and float(r['gflops']) > 0 and float(r['steps_per_sec']) > 0
  assert '2 of 2 trials finished' in open(os.path.join(out, 'results.md')).read()
  assert os.path.getsize(os.path.join(out, 'results.png')) > 10_000
  before = mtimes(out + '/attention=space') | mtimes(out + '/attention=divided')

  # Re-run: both trials are finished, nothing is retrained or rewritten.
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', out)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.count('finished before, kept') == 2 and 'starting' not in res.stdout
  assert mtimes(out + '/attention=space') | mtimes(out + '/attention=divided') == before

  # An interrupted trial (its final evaluation missing) is resumed from its checkpoint; the other is kept.
  trial = out + '/attention=divided'
  for p in glob.glob(trial + '/checkpoints/eval_6_*') + [trial + '/training_curves.png']:
    os.remove(p)
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', out)
  assert res.returncode == 0, res.stderr[-3000:]
  assert '(1/2) attention=space: finished before, kept' in res.stdout
  assert '(2/2) resuming attention=divided' in res.stdout and '(2/2) finished attention=divided' in res.stdout
  assert '[train] resumed from' in open(out + '/attention=divided/train.log').read()
  assert mtimes(out + '/attention=space') == {p: t for p, t in before.items() if '/attention=space/' in p}

  res = vvt_in_process(capsys, 'results', out, '--no_summary')
  assert res.returncode == 0 and '| divided | 1/1 |' in res.stdout, res.stderr


def test_a_failed_trial_is_recorded_and_results_say_what_is_missing(tiny_data, tmp_path, capsys, monkeypatch):
  """`vvt sweep` and `vvt results` through `main(argv)` here; the failing trial is a process of its own."""
  vvt_env(monkeypatch)
  bad = tmp_path / 'bad'
  bad.mkdir()
  (bad / 'train-00000-of-00001.tfrecord').write_bytes(b'not a tfrecord' * 100)
  spec = study(tmp_path, tiny_data, body=f'return [{{"dataset.train_files": "{bad}/train-*-of-*.tfrecord"}}]')
  out = str(tmp_path / 'sweep')
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', out)
  assert res.returncode == 1 and 'FAILED train_files=' in res.stdout, res.stdout[-3000:] + res.stderr[-2000:]
  assert 'vvt sweep: 1 of 1 trials failed' in res.stderr
  md = open(os.path.join(out, 'results.md')).read()
  assert '0 of 1 trials finished' in md and '| failed |' in md
  res = vvt_in_process(capsys, 'results', out, '--no_summary')
  one_line_error(res, 'results', 'no finished trial in', code=1)
  assert '## Missing trials' in res.stdout


def test_launch_print_gives_one_train_command_per_trial(tiny_data, tmp_path, capsys):
  spec = study(tmp_path, tiny_data)
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', 'gs://bucket/sweep', '--launch', 'print',
            '--config.batch_size=2')
  assert res.returncode == 0, res.stderr
  lines = res.stdout.splitlines()
  assert lines == [f'vvt train --config {spec} --config.batch_size=2 --config.model.attention={a} '
                   f'--workdir gs://bucket/sweep/attention={a}' for a in ('space', 'divided')]
  # the fields a multi-host slice needs are named (stderr: the commands stay the whole of stdout)
  assert '--config.distributed.initialize=True' in res.stderr and 'one sweep worker' in res.stderr


def test_launch_print_gives_the_distributed_fields_to_every_command(tiny_data, tmp_path, capsys):
  spec = study(tmp_path, tiny_data)
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', 'gs://bucket/sweep', '--launch', 'print',
            '--config.distributed.initialize=True', '--config.distributed.coordinator_address=host0:1234',
            '--config.distributed.num_processes=4', '--config.distributed.heartbeat_timeout_seconds=300')
  assert res.returncode == 0, res.stderr
  fields = ('--config.distributed.initialize=True --config.distributed.coordinator_address=host0:1234 '
            '--config.distributed.num_processes=4 --config.distributed.heartbeat_timeout_seconds=300')
  assert res.stdout.splitlines() == [f'vvt train --config {spec} --config.model.attention={a} {fields} '
                                     f'--workdir gs://bucket/sweep/attention={a}' for a in ('space', 'divided')]
  assert not res.stderr.strip()


@pytest.mark.parametrize('body,args,message', [
    ('return sweep.axis("model.stochastic_dept", [0.1])', [],
     "trial 'stochastic_dept=0.1': --config.model.stochastic_dept: unknown config field"),
    ('return sweep.axis("seed", [1])', ['--config.bacth_size=3'], 'did you mean --config.batch_size'),
    ('return [{"seed": 1}, {"seed": 1}]', [], "trials 0 and 1 have the same name 'seed=1'"),
    ('return []', [], 'the sweep has no trials'),
    ('return sweep.axis("seed", [1])', ['--only', 'nothing'], "--only 'nothing' matches none of the 1 trials"),
    ('return sweep.axis("seed", [1])', ['--parallel', '0'], '--parallel must be >= 1'),
])
def test_bad_sweeps_are_one_line_errors(tiny_data, tmp_path, capsys, body, args, message):
  res = vvt_in_process(capsys, 'sweep', '--config', study(tmp_path, tiny_data, body=body),
                       '--workdir', str(tmp_path / 's'), '--dry-run', *args)
  one_line_error(res, 'sweep', message)
  assert not (tmp_path / 's').exists()


def test_a_file_without_a_sweep_and_bad_results_directories(tmp_path, capsys):
  res = vvt_in_process(capsys, 'sweep', '--config', 'configs/synthetic.py', '--workdir', str(tmp_path / 's'),
                       '--dry-run')
  one_line_error(res, 'sweep', 'configs/synthetic.py defines no sweep: add get_sweep(arg=None)')
  one_line_error(vvt_in_process(capsys, 'results', str(tmp_path / 'nope')), 'results', 'no such sweep directory')
  one_line_error(vvt_in_process(capsys, 'results', str(tmp_path)), 'results', 'holds no trials')


def test_a_sweep_directory_of_another_study_is_refused(tiny_data, tmp_path, capsys):
  out = tmp_path / 'sweep'
  out.mkdir()
  (out / 'sweep.json').write_text('{"config": "experiments/other.py", "trials": []}')
  res = vvt_in_process(capsys, 'sweep', '--config', study(tmp_path, tiny_data), '--workdir', str(out))
  one_line_error(res, 'sweep', 'holds a sweep of \'experiments/other.py\'')


def _settings(path):
  text = open(path).read()
  settings = [s for s in ('k400', 'ssv2', 'epic') if f"'{s}'" in text]
  return [f'{path}:{s}' for s in settings] + [f'{path}:mini', path]


@pytest.mark.parametrize('spec', [s for p in EXPERIMENTS for s in _settings(os.path.relpath(p, REPO))])
def test_every_study_expands_in_a_dry_run(spec, tmp_path, capsys):
  res = vvt_in_process(capsys, 'sweep', '--config', spec, '--workdir', str(tmp_path / 's'), '--dry-run')
  assert res.returncode == 0, res.stderr
  assert f'trials of {spec} (valid configs)' in res.stdout


def test_every_trial_schedule_is_checked_before_any_trial_starts(tiny_data, tmp_path, capsys):
  """A warmup in epochs is known in steps only with the training set's size: a trial whose warmup does not fit its
  steps is refused, naming it, before any trial trains (here 10 epochs of 6 steps > the 6 steps of the run)."""
  from vvt.cli import main as vvt_main
  spec = study(tmp_path, tiny_data, body='return sweep.axis("schedule.warmup_epochs", [0.1, 10.0])')
  out = tmp_path / 'sweep'
  rc = vvt_main(['sweep', '--config', spec, '--workdir', str(out), '--config.schedule.warmup_steps=-1',
                 '--config.schedule.name=cosine'])
  lines = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
  assert rc == 2 and lines == ["vvt sweep: error: trial 'warmup_epochs=10': schedule: warmup of 60 steps does "
                               'not fit in 6 training steps'], lines
  assert not out.exists()


def test_a_schedule_in_steps_is_checked_without_reading_the_training_set(tmp_path):
  """The training set is counted only for a schedule in epochs (num_epochs, warmup_epochs, decay_epochs): a
  schedule in steps is checked even when the data cannot be read (here it does not exist), and a schedule in
  epochs on unreadable data is left to its trial, as before."""
  from configs import common as configs_common
  from vvt.cli import sweep as sweep_cli
  from vvt.config import run_spec
  from vvt.config.errors import ConfigError
  from vvt.train import program

  def config(**schedule):
    c = configs_common.synthetic_config('divided', str(tmp_path / 'no_data'))
    c.num_train_steps, c.schedule.name = 6, 'cosine'
    c.schedule.update(schedule)
    return c
  counts = lambda c: program.counts_epochs(int(c.num_train_steps), run_spec.ScheduleSpec.of(c.schedule))
  assert not counts(config(warmup_steps=1))
  assert not counts(config(warmup_steps=-1, warmup_epochs=0.0))
  assert counts(config(warmup_steps=-1, warmup_epochs=0.5))
  assert counts(config(warmup_steps=1, decay_epochs=(1.0,)))
  in_epochs = config(warmup_steps=1)
  in_epochs.num_train_steps = 0
  assert counts(in_epochs)
  with pytest.raises(ConfigError, match="trial 'a': schedule: warmup of 6 steps does not fit in 6 training steps"):
    sweep_cli.check_schedules({'a': config(warmup_steps=6), 'b': config(warmup_steps=5)})
  sweep_cli.check_schedules({'c': config(warmup_steps=-1, warmup_epochs=10.0)})  # unreadable: left to the trial


def test_a_schedule_in_epochs_counts_local_tfrecords_without_tensorflow(tmp_path):
  """A schedule in epochs counts the training set's local TFRecords from their record headers: a fresh process
  checking the trials' schedules imports no TensorFlow, and the epoch it finds is the training set's (20 records
  in batches of 8: 3 steps, so a warmup of 2 epochs is 6 steps, too long for a run of 6; 1 epoch fits)."""
  import tensorflow as tf
  for name, n in (('train-00000-of-00002.tfrecord', 12), ('train-00001-of-00002.tfrecord', 8)):
    with tf.io.TFRecordWriter(str(tmp_path / name)) as w:
      for _ in range(n):
        w.write(b'not parsed')
  code = f"""
import sys
from configs import common
from vvt.cli import sweep
from vvt.config.errors import ConfigError
def config(warmup_epochs):
  c = common.synthetic_config('divided', {str(tmp_path)!r})
  c.num_train_steps, c.batch_size, c.schedule.warmup_steps, c.schedule.warmup_epochs = 6, 8, -1, warmup_epochs
  return c
sweep.check_schedules({{'fits': config(1.0)}})
try:
  sweep.check_schedules({{'long': config(2.0)}})
except ConfigError as e:
  print(e)
print('tensorflow imported:', 'tensorflow' in sys.modules)
"""
  res = subprocess.run([sys.executable, '-c', code], cwd=REPO, env=env(), capture_output=True, text=True,
                       timeout=300)
  assert res.returncode == 0, res.stderr[-3000:]
  assert res.stdout.splitlines()[-2:] == [
      "trial 'long': schedule: warmup of 6 steps does not fit in 6 training steps", 'tensorflow imported: False'
  ], res.stdout
  from configs import common as configs_common
  from vvt.data import pipeline
  from vvt.data import train_size
  from vvt.data.spec import DataSpec
  spec = DataSpec.of(configs_common.synthetic_config('divided', str(tmp_path)).dataset)
  assert train_size.num_videos(spec, 'train') == pipeline.num_videos(spec, 'train') == 20


def test_trials_left_out_by_only_are_not_missing(tmp_path):
  from vvt.studies import results
  from vvt.studies import runner
  from vvt.studies import sweep as sweep_lib
  trials = sweep_lib.trials(sweep_lib.axis('seed', [0, 1]))
  runner.write_sweep_record(str(tmp_path), 'study.py', [], trials)
  table = results.collect(str(tmp_path), with_summary=False, selected={'seed=0'})
  assert [(r['trial'], r['status']) for r in table.rows] == [('seed=0', 'not started'), ('seed=1', 'not selected')]
  assert [r['trial'] for r in table.missing] == ['seed=0']
  assert 'Missing: 1 (listed below). Not selected by --only: 1.' in results.markdown(table)
  assert [r['status'] for r in results.collect(str(tmp_path), with_summary=False).missing] == ['not started'] * 2
