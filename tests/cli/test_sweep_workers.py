"""Many `vvt sweep` workers on one sweep directory, as users and job arrays run them: two workers train every
trial exactly once; a worker killed with SIGKILL mid-trial leaves no trainer behind and, once its lease has
expired, a worker that joins (`vvt sweep DIR --trial 0`) takes the trial over and resumes it from its
checkpoint; `vvt sweep --status` and `vvt results` show every state; bad input as one line.

No outcome depends on the machine's speed: the leases of live workers are far longer than any renewal can be late
on a busy machine, and the one lease that must run out (the killed worker's) is ended by the test, at a moment it
chooses; the deadlines are hang guards."""
import functools
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

from tests.cli.test_commands import env
from tests.cli.test_sweep import one_line_error
from tests.cli.test_sweep import study
from tests.cli.test_sweep import vvt_in_process
from tests.conftest import REPO
from vvt.studies import claims

SEP = '===== vvt sweep:'
GUARD_S = 60  # a hang guard for what takes a second or two
HANG_S = 1800  # a hang guard for a worker's run: far above its trials on 2 loaded cores


class Output:
  """The merged stdout/stderr of a `start`ed process, read line by line as it comes."""

  def __init__(self, proc):
    self.proc, self.lines = proc, []
    self._reader = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
    self._reader.start()

  def wait_for(self, text, timeout=HANG_S):
    deadline = time.time() + timeout
    while not any(text in l for l in self.lines):
      assert self.proc.poll() is None and time.time() < deadline, ''.join(self.lines)[-4000:]
      time.sleep(0.05)

  def finish(self, timeout=HANG_S):
    self.proc.wait(timeout=timeout)
    self._reader.join(GUARD_S)
    out = ''.join(self.lines)
    assert self.proc.returncode == 0, out[-4000:]
    return out


def start(*args):
  return subprocess.Popen([sys.executable, '-m', 'vvt', *args], cwd=REPO, env=env(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def finish(proc, timeout=HANG_S):
  out, _ = proc.communicate(timeout=timeout)
  assert proc.returncode == 0, out[-4000:]
  return out


def train_steps(trial):
  rows = [json.loads(l) for l in (trial / 'metrics.jsonl').read_text().splitlines() if l.strip()]
  return [r['step'] for r in rows if r.get('kind') == 'train']


def processes_using(text):
  """Pids of live processes whose command line holds `text` (Linux /proc)."""
  pids = []
  for cmdline in pathlib.Path('/proc').glob('[0-9]*/cmdline'):
    try:
      if text in cmdline.read_bytes().replace(b'\0', b' ').decode(errors='replace'):
        pids.append(int(cmdline.parent.name))
    except OSError:
      pass
  return pids


def test_two_workers_on_one_sweep_train_every_trial_exactly_once(tiny_data, tmp_path):
  """Two trials started together: for one worker to train both, the other would have to make no claim during a
  whole trial (the fewest trials that show both workers training; one more trial per worker shows nothing new)."""
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(2)'), tmp_path / 'sweep'
  workers = [start('sweep', '--config', spec, '--workdir', str(out), '--lease_s', '600', '--renew_s', '1',
                   '--no_summary') for _ in range(2)]
  outputs = [finish(w) for w in workers]
  started = [[l for l in o.splitlines() if ' starting seed=' in l] for o in outputs]
  assert sorted(l.split(' starting ')[1].split()[0] for s in started for l in s) == ['seed=0', 'seed=1']
  assert all(started), outputs  # both workers trained
  for name in ('seed=0', 'seed=1'):
    trial = out / name
    log = (trial / 'train.log').read_text()
    assert log.count(SEP) == 1 and '[train] resumed' not in log, log[-2000:]
    assert train_steps(trial) == [3, 6]
    state = json.loads((trial / 'state.json').read_text())
    assert (state['status'], state['attempts'], state['requeues']) == ('finished', 1, 0)
  for o in outputs:
    assert '2 of 2 trials finished' in o


def _wait_for_checkpoint(trial, worker, timeout=300):
  deadline = time.time() + timeout
  while time.time() < deadline:
    steps = [p.name for p in (trial / 'checkpoints').glob('[0-9]*') if p.name.isdigit()]
    if steps:
      return steps
    assert worker.poll() is None, worker.communicate()[0][-3000:]
    time.sleep(0.02)
  raise AssertionError(f'no checkpoint in {trial} after {timeout} s')


def _end_lease(trial):
  """Ends the lease of the trial's claim now, as the clock does once its worker stops renewing: the record with
  `lease_until` now, written over its generation (its worker is dead: nobody else writes it) -> that time."""
  store = claims.store_for(str(trial))
  record, generation = store.read()
  now = time.time()
  assert store.write({**record, 'lease_until': now}, generation)
  return now


def test_a_killed_worker_s_trial_is_taken_over_after_its_lease_and_resumed(tiny_data, tmp_path):
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(1)'), tmp_path / 'sweep'
  trial = out / 'seed=0'
  steps = 30  # the kill comes at the first checkpoint (step 5): 25 steps still to go
  first = start('sweep', '--config', spec, '--workdir', str(out), '--lease_s', '600', '--renew_s', '0.5',
                f'--config.num_train_steps={steps}', '--config.checkpoint.every_steps=5', '--config.log_every_steps=5')
  _wait_for_checkpoint(trial, first)
  first.send_signal(signal.SIGKILL)
  first.communicate()
  deadline = time.time() + GUARD_S  # its trainer dies with it (no second writer of the trial's checkpoints)
  while processes_using(str(trial)) and time.time() < deadline:
    time.sleep(0.1)
  assert not processes_using(str(trial))
  assert not (trial / 'training_curves.png').exists(), 'the trial finished before its worker was killed'
  held = claims.read(str(trial))
  assert held['state'] in claims.LIVE and held['pid'] == first.pid

  # A worker that joins the sweep for this one trial (as a job array task does) waits for the lease, then resumes.
  joining = Output(start('sweep', str(out), '--trial', '0', '--lease_s', '600', '--renew_s', '0.5'))
  joining.wait_for('[sweep] waiting for 1 trial held by other workers: seed=0')
  ended = _end_lease(trial)
  second = joining.finish()
  assert f'taking over (the lease of {held["host"]} pid {first.pid} expired) and resuming seed=0' in second
  log = (trial / 'train.log').read_text()
  assert log.count(SEP) == 2 and 'attempt 2 on' in log
  resumed = [l for l in log.splitlines() if l.startswith('[train] resumed from')]
  assert len(resumed) == 1 and '(step 0,' not in resumed[0], log[-3000:]
  at = int(resumed[0].split('(step ')[1].split(',')[0])
  done = train_steps(trial)
  assert at >= 5 and done == sorted(set(done)) and done[-1] == steps, done  # one record per step, to the end
  second_attempt = log.split(SEP)[2]
  assert f'[train] step {at + 5}/{steps}' in second_attempt and f'[train] step 5/{steps}' not in second_attempt
  state = json.loads((trial / 'state.json').read_text())
  assert (state['status'], state['attempts'], state['requeues']) == ('finished', 2, 1)
  assert state['previous']['pid'] == first.pid and state['since'] >= ended  # not before the lease ran out


def _final(trial, step):
  (trial / 'checkpoints').mkdir(parents=True)
  (trial / 'checkpoints' / f'eval_{step}_test.json').write_text(json.dumps({'video_top1': 0.5, 'clip_top1': 0.4}))
  (trial / 'training_curves.png').write_bytes(b'png')


def _metrics(trial, step):
  trial.mkdir(parents=True, exist_ok=True)
  (trial / 'metrics.jsonl').write_text(json.dumps({'kind': 'train', 'step': step, 'loss': 1.0}) + '\n')


def _sweep_with_every_state(tmp_path):
  """A sweep directory whose trials are in every state a worker leaves them in."""
  out = tmp_path / 'sweep'
  names = ['pending', 'claimed', 'running', 'finished', 'failed', 'expired', 'interrupted']
  out.mkdir()
  (out / 'sweep.json').write_text(json.dumps({'config': 'study.py', 'base_overrides': [], 'trials': [
      {'name': n, 'overrides': {'seed': i}, 'labels': {'seed': i}} for i, n in enumerate(names)]}))
  w = claims.Worker('token-a', 'tpu-vm-3', 4242, {'array_job_id': '77', 'array_task_id': '1', 'job_id': '78'})
  claims.take(str(out / 'claimed'), 'claimed', w, 3600)
  _metrics(out / 'running', 3)
  claims.set_status(claims.take(str(out / 'running'), 'running', w, 3600).claim, 'running')
  _metrics(out / 'finished', 6)
  _final(out / 'finished', 6)
  claims.set_status(claims.take(str(out / 'finished'), 'finished', w, 3600).claim, 'finished')
  _metrics(out / 'failed', 3)
  claims.set_status(claims.take(str(out / 'failed'), 'failed', w, 3600).claim, 'failed',
                    'vvt train: error: train-00000-of-00001.tfrecord: record 3 is damaged')
  _metrics(out / 'expired', 3)
  claims.set_status(claims.take(str(out / 'expired'), 'expired', w, 0.5).claim, 'running')
  _metrics(out / 'interrupted', 3)
  claims.set_status(claims.take(str(out / 'interrupted'), 'interrupted', w, 3600).claim, 'released', 'interrupted')
  time.sleep(0.6)
  return out


def test_status_shows_every_state_of_a_sweep(tmp_path, capsys):
  from vvt.cli import main
  out = _sweep_with_every_state(tmp_path)
  assert main(['sweep', '--status', str(out)]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == (f'[sweep] {out}: sweep of study.py, 7 trials: 2 pending, 1 claimed, 1 running, '
                      '1 finished, 1 failed, 1 lease expired')
  columns = ['trial', 'state', 'step', 'attempts', 'requeues', 'worker', 'since', 'slurm', 'detail']
  assert lines[1].split() == columns
  starts = [lines[1].index(c) for c in columns] + [None]
  rows = {}
  for line in lines[2:]:
    cells = dict(zip(columns, (line[a:b].strip() for a, b in zip(starts, starts[1:], strict=False)), strict=False))
    rows[cells['trial']] = cells
  assert len(rows) == 7
  assert rows['pending'] == {'trial': 'pending', 'state': 'pending', 'step': '—', 'attempts': '0', 'requeues': '0',
                             'worker': '—', 'since': '—', 'slurm': '—', 'detail': ''}
  for name, state in (('claimed', 'claimed'), ('running', 'running'), ('finished', 'finished'),
                      ('failed', 'failed'), ('expired', 'lease expired'), ('interrupted', 'pending')):
    row = rows[name]
    assert row['state'] == state and row['worker'] == 'tpu-vm-3 pid 4242' and row['slurm'] == '77_1', row
    assert row['attempts'] == '1' and row['requeues'] == '0' and row['since'].startswith('20'), row
  assert rows['claimed']['step'] == '—' and rows['running']['step'] == '3' and rows['finished']['step'] == '6'
  assert rows['running']['detail'].startswith('since 20') and 'at step 3, lease until 20' in rows['running']['detail']
  assert rows['finished']['detail'] == ''
  assert rows['failed']['detail'] == 'vvt train: error: train-00000-of-00001.tfrecord: record 3 is damaged (at step 3)'
  assert rows['expired']['detail'].startswith('stopped renewing at 20')
  assert rows['expired']['detail'].endswith('(at step 3); the next worker takes it over')
  assert rows['interrupted']['detail'] == 'interrupted at step 3: resumes from its checkpoint'


def test_results_show_the_state_of_the_trials_not_finished(tmp_path, capsys):
  from vvt.cli import main
  out = _sweep_with_every_state(tmp_path)
  assert main(['results', str(out), '--no_summary']) == 0
  md = capsys.readouterr().out
  missing = md.split('## Missing trials')[1]
  assert '| finished |' not in missing
  for name, state in (('pending', 'not started'), ('claimed', 'claimed'), ('running', 'running'),
                      ('failed', 'failed'), ('expired', 'lease expired'), ('interrupted', 'partial')):
    assert f'| {name} | {state} |' in missing, missing
  assert 'tpu-vm-3 pid 4242 (SLURM job 77_1), since' in missing


def test_a_joining_worker_and_bad_worker_arguments_are_one_line_errors(tiny_data, tmp_path, capsys):
  run = functools.partial(vvt_in_process, capsys)  # refusals: `vvt` in this process
  out = tmp_path / 'sweep'
  one_line_error(run('sweep', str(out)), 'sweep', f'missing --config experiments/FILE.py[:ARG] ({out} holds no')
  one_line_error(run('sweep', '--status', str(out)), 'sweep', f'no such sweep directory: {out}')
  spec = study(tmp_path, tiny_data)
  one_line_error(run('sweep', '--config', spec, str(out), '--trial', '5', '--dry-run'), 'sweep',
                 "--trial '5' is neither a trial name nor an index 0..1 of the 2 trials")
  one_line_error(run('sweep', '--config', spec, str(out), '--lease_s', '4', '--renew_s', '3'), 'sweep',
                 '--renew_s must be > 0 and below half of --lease_s (4 s), got 3')
  one_line_error(run('sweep', '--config', spec, str(out), '--workdir', str(tmp_path / 'other')), 'sweep',
                 'two sweep directories')
  assert not out.exists()


def test_workers_starting_together_write_the_synthetic_data_once(tmp_path):
  from vvt.cli import sweep as sweep_cli
  data, writes = tmp_path / 'synthetic', []

  def write():
    writes.append(1)
    data.mkdir()
    (data / 'manifest.json').write_text('{}')

  (tmp_path / 'synthetic.writing').write_text(str(os.getpid()))  # a live writer: wait for its manifest
  writer = threading.Timer(0.3, write)
  writer.start()
  sweep_cli.write_once(str(data), lambda: writes.append('second'), wait_s=0.05)
  writer.join()
  assert writes == [1]
  (data / 'manifest.json').unlink()
  dead = subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], capture_output=True, text=True)
  (tmp_path / 'synthetic.writing').write_text(dead.stdout.strip())  # a writer that died: the next one writes
  sweep_cli.write_once(str(data), lambda: (data / 'manifest.json').write_text('{}'), wait_s=0.05)
  assert (data / 'manifest.json').exists() and not (tmp_path / 'synthetic.writing').exists()


def test_a_sweep_directory_of_another_study_or_other_overrides_is_refused_and_kept(tiny_data, tmp_path, capsys):
  run = functools.partial(vvt_in_process, capsys)  # refusals: `vvt` in this process
  spec, out = study(tmp_path, tiny_data), tmp_path / 'sweep'
  out.mkdir()
  record = out / 'sweep.json'
  for text, message in (('{"config": "experiments/other.py", "trials": []}', "holds a sweep of 'experiments/other.py'"),
                        ('{"config": "study.py", "trials": [', f'{record} is not a sweep record')):
    record.write_text(text)
    one_line_error(run('sweep', '--config', spec, '--workdir', str(out)), 'sweep', message)
    assert record.read_text() == text and os.listdir(out) == ['sweep.json']
  # A worker of this sweep holds a trial: a worker with other overrides would train other trials under its name.
  text = json.dumps({'config': spec, 'base_overrides': [['num_train_steps', '6']], 'trials': [
      {'name': 'attention=space', 'overrides': {'model.attention': 'space'}, 'labels': {}}]})
  record.write_text(text)
  claims.take(str(out / 'attention=space'), 'attention=space', claims.Worker('t', 'tpu-vm-0', 7, {}), 3600)
  one_line_error(run('sweep', '--config', spec, '--workdir', str(out), '--config.num_train_steps=9'), 'sweep',
                 f'{out} is being run with --config.num_train_steps=6 (trial attention=space on tpu-vm-0 pid 7); '
                 f'join it with the same overrides, or as `vvt sweep {out}`')
  assert record.read_text() == text
