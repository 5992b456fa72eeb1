"""A multi-process JAX job as one sweep worker (`vvt.studies.slice`), as a TPU slice runs it: two "slices" of two CPU
processes each (jax.distributed on 127.0.0.1, ports of their own) work on one sweep, and every trial is trained
exactly once, by both processes of one slice; a process of a slice killed mid-trial ends that slice's trial, its claim
is released, and another slice, waiting on the sweep, resumes the trial from its checkpoint.

What each slice does is decided by the claims, not by timing: the second slice starts once the first holds its trial
(`--only`), so it trains the other one; the leases (60 s, renewed every 2 s) and the waits are hang guards only."""
import json
import re
import signal
import socket
import time

from tests.cli.test_sweep import study
from tests.cli.test_sweep_workers import SEP
from tests.cli.test_sweep_workers import finish
from tests.cli.test_sweep_workers import processes_using
from tests.cli.test_sweep_workers import start
from tests.cli.test_sweep_workers import train_steps
from vvt.studies import claims
from vvt.train import coordinator

HANG_S = 1800  # far above a slice's trial on 2 loaded cores


def _free_ports(n: int = 1) -> int:
  """A port P with P .. P+n-1 free here."""
  for _ in range(100):
    with socket.socket() as a:
      a.bind(('', 0))
      port = a.getsockname()[1]
      if port + n > 65536 or any(coordinator.port_problem(p) for p in range(port + 1, port + n)):
        continue
    return port
  raise AssertionError(f'no {n} free ports in a row')


def _slice(*args, port=None):
  """The two processes of one slice, each `vvt sweep ARGS` with its distributed.* fields, the sweep's coordinator
  on `port` of 127.0.0.1 (default: a free one)."""
  port = _free_ports() if port is None else port
  return [start('sweep', *args, '--lease_s', '60', '--renew_s', '2', '--no_summary',
                '--config.distributed.initialize=True', f'--config.distributed.coordinator_address=127.0.0.1:{port}',
                '--config.distributed.num_processes=2', f'--config.distributed.process_id={p}') for p in range(2)]


def _trainers(trial) -> str:
  """The address of a trial's trainers' coordinator, from its command line in the trial's log."""
  return re.findall(r'--config.distributed.coordinator_address=(\S+)', (trial / 'train.log').read_text())[-1]


def _wait(ready, procs, what):
  """Waits until `ready()` (the slice's processes still running), at most HANG_S."""
  deadline = time.time() + HANG_S
  while time.time() < deadline:
    if ready():
      return
    for p in procs:
      assert p.poll() is None, p.communicate()[0][-3000:]
    time.sleep(0.02)
  raise AssertionError(f'{what} not after {HANG_S} s')


def _held(trial):
  record = claims.read(str(trial))
  return bool(record) and record['state'] in claims.LIVE


def _trained_by(output: str) -> list[str]:
  """The trials a process other than 0 trained, from its output."""
  return re.findall(r'\) (\S+): process 1 of 2 trains it with process 0', output)


def test_two_slices_of_two_processes_train_every_trial_exactly_once_each_on_both_processes(tiny_data, tmp_path):
  """The slices' coordinators are on adjacent ports of one host: the second's on the port below the first's, so that
  trainers meeting beside their sweep's coordinator (port + 1) would meet at the first slice's."""
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(2)'), tmp_path / 'sweep'
  port = _free_ports(2) + 1
  first = _slice('--config', spec, '--workdir', str(out), '--only', '^seed=0$', port=port)
  _wait(lambda: _held(out / 'seed=0'), first, 'the first slice\'s claim')
  second = _slice(str(out), port=port - 1)  # joins the sweep (its config from sweep.json): seed=1 is free
  outputs = [[finish(p, HANG_S) for p in procs] for procs in (first, second)]
  assert [_trained_by(o[1]) for o in outputs] == [['seed=0'], ['seed=1']], outputs
  assert not any('coordination_service' in o for pair in outputs for o in pair), outputs
  used = {_trainers(out / 'seed=0'), _trainers(out / 'seed=1')}
  assert len(used) == 2 and not used & {f'127.0.0.1:{p}' for p in (port - 1, port)}, used
  for name, (procs, (leader, _)) in zip(('seed=0', 'seed=1'), zip((first, second), outputs, strict=True), strict=True):
    trial = out / name
    state = json.loads((trial / 'state.json').read_text())
    assert (state['status'], state['attempts'], state['requeues'], state['processes']) == ('finished', 1, 0, 2)
    assert state['pid'] == procs[0].pid  # claimed by process 0 of the slice whose process 1 trained it
    assert f'starting {name} (attempt 1' in leader
    log, log1 = (trial / 'train.log').read_text(), (trial / 'train.process-1.log').read_text()
    assert log.count(SEP) == 1 and log1.count(SEP) == 1 and '[train] resumed' not in log, log[-2000:]
    assert 'on 2 device(s) / 2 process(es)' in log and '--config.distributed.process_id=1' in log1
    assert train_steps(trial) == [3, 6]  # one trainer wrote the metrics: process 0's
    record = json.loads((trial / 'trial.json').read_text())
    assert (record['status'], record['processes'], record['returncode']) == ('finished', 2, 0)
  sweep_record = json.loads((out / 'sweep.json').read_text())
  assert not any(k.startswith('distributed.') for k, _ in sweep_record['base_overrides'])  # each process's own
  assert 'seed=0: finished on' in outputs[1][0] and '2 of 2 trials finished' in outputs[1][0]
  for _, follower in outputs:
    assert 'process 1 of 2 of one worker' in follower and '[results]' not in follower


def test_a_process_killed_mid_trial_releases_the_trial_and_another_slice_resumes_it(tiny_data, tmp_path):
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(1)'), tmp_path / 'sweep'
  trial = out / 'seed=0'
  first = _slice('--config', spec, '--workdir', str(out), '--config.checkpoint.every_steps=2',
                 '--config.log_every_steps=2', '--config.distributed.heartbeat_timeout_seconds=10')
  _wait(lambda: any(p.name.isdigit() for p in (trial / 'checkpoints').glob('[0-9]*')), first, 'a checkpoint')
  trainers = _trainers(trial)
  second = _slice(str(out))  # waits on the sweep: its only trial is held
  first[1].send_signal(signal.SIGKILL)  # process 1 of the first slice, as a host that goes down
  first[1].communicate()
  text = first[0].communicate(timeout=HANG_S)[0]
  assert first[0].returncode == 1, text[-3000:]
  lines = [line for line in text.splitlines() if line.startswith('vvt sweep: error:')]
  assert len(lines) == 1 and 'process 1 of 2 was lost' in lines[0], text[-3000:]
  assert 'trial seed=0 released for another worker' in lines[0]
  assert not processes_using(trainers)  # no trainer of the first slice left behind
  held = claims.read(str(trial))
  assert held['state'] == 'released' or held['pid'] != first[0].pid  # released, or taken by the waiting slice
  assert not (trial / 'training_curves.png').exists(), 'the trial finished before its process was killed'

  # The waiting slice takes the released trial at once (no lease to wait for) and resumes it.
  text = [finish(p, HANG_S) for p in second][0]
  assert 'resuming seed=0 (attempt 2' in text, text
  log = (trial / 'train.log').read_text()
  assert log.count(SEP) == 2
  resumed = [line for line in log.split(SEP)[2].splitlines() if line.startswith('[train] resumed from')]
  assert len(resumed) == 1 and '(step 0,' not in resumed[0], log[-3000:]
  steps = train_steps(trial)
  assert steps == sorted(set(steps)) and steps[-1] == 6, steps  # one record per step, to the end
  state = json.loads((trial / 'state.json').read_text())
  assert (state['status'], state['attempts'], state['requeues'], state['processes']) == ('finished', 2, 1, 2)
  assert state['previous']['status'] == 'released'
  assert (trial / 'train.process-1.log').read_text().count(SEP) == 2


def test_a_slice_takes_no_parallel_and_slurm_no_distributed_fields(tiny_data, tmp_path, capsys):
  from tests.cli.test_sweep_xpk import error_line
  spec, out = study(tmp_path, tiny_data), tmp_path / 'sweep'
  dist = ['--config.distributed.initialize=True', '--config.distributed.num_processes=2']
  error_line(capsys, ['--config', spec, '--workdir', str(out), *dist, '--parallel', '2'],
             'a multi-process worker trains one trial at a time on all its processes: no --parallel')
  error_line(capsys, ['--config', spec, '--workdir', str(out), *dist, '--launch', 'slurm', '--dry-run'],
             '--launch slurm sets up jax.distributed from SLURM\'s environment')
  assert not out.exists()


def test_a_slice_whose_coordinator_port_is_in_use_says_so_in_one_line_and_writes_nothing(tiny_data, tmp_path, capsys):
  from tests.cli.test_sweep_xpk import error_line
  spec, out = study(tmp_path, tiny_data), tmp_path / 'sweep'
  with socket.socket() as other:  # another job's coordinator
    other.bind(('127.0.0.1', 0))
    other.listen()
    port = other.getsockname()[1]
    error_line(capsys, ['--config', spec, '--workdir', str(out), '--config.distributed.initialize=True',
                        f'--config.distributed.coordinator_address=127.0.0.1:{port}',
                        '--config.distributed.num_processes=2', '--config.distributed.process_id=0'],
               f'process 0 cannot start the coordinator on port {port} of this host (Address already in use')
  assert not out.exists()
