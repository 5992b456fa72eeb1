"""A multi-process JAX job as one sweep worker (`vvt.studies.slice`), as a TPU slice runs it: two "slices" of two CPU
processes each (jax.distributed on 127.0.0.1, ports of their own) work on one sweep, and every trial is trained
exactly once, by both processes of one slice; a process of a slice killed mid-trial ends that slice's trial, its claim
is released, and a slice started later resumes the trial from its checkpoint."""
import json
import re
import signal
import socket
import time

from tests.cli.test_sweep import study
from tests.cli.test_sweep_workers import SEP, finish, processes_using, start, train_steps
from vvt.studies import claims


def _free_port_pair() -> int:
  """A port P with P and P+1 free here (the sweep's coordinator and the trainers' of one slice)."""
  for _ in range(100):
    with socket.socket() as a:
      a.bind(('', 0))
      port = a.getsockname()[1]
      if port >= 65535:
        continue
      with socket.socket() as b:
        try:
          b.bind(('', port + 1))
        except OSError:
          continue
    return port
  raise AssertionError('no two free ports in a row')


def _slice(port: int, *args):
  """The two processes of one slice, each `vvt sweep ARGS` with its distributed.* fields."""
  return [start('sweep', *args, '--config.distributed.initialize=True',
                f'--config.distributed.coordinator_address=127.0.0.1:{port}',
                '--config.distributed.num_processes=2', f'--config.distributed.process_id={p}') for p in range(2)]


def _trained_by(output: str) -> list[str]:
  """The trials a process other than 0 trained, from its output."""
  return re.findall(r'\) (\S+): process 1 of 2 trains it with process 0', output)


def test_two_slices_of_two_processes_train_every_trial_exactly_once_each_on_both_processes(tiny_data, tmp_path):
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(3)'), tmp_path / 'sweep'
  slices = [_slice(_free_port_pair(), '--config', spec, '--workdir', str(out), '--lease_s', '60', '--no_summary')
            for _ in range(2)]
  outputs = [[finish(p) for p in procs] for procs in slices]
  leaders = {procs[0].pid: i for i, procs in enumerate(slices)}
  followed = [_trained_by(o[1]) for o in outputs]
  assert sorted(followed[0] + followed[1]) == ['seed=0', 'seed=1', 'seed=2'], outputs
  assert all(followed), outputs  # both slices trained
  for name in ('seed=0', 'seed=1', 'seed=2'):
    trial = out / name
    state = json.loads((trial / 'state.json').read_text())
    assert (state['status'], state['attempts'], state['requeues'], state['processes']) == ('finished', 1, 0, 2)
    assert name in followed[leaders[state['pid']]]  # process 1 of the slice whose process 0 claimed it
    log, log1 = (trial / 'train.log').read_text(), (trial / 'train.process-1.log').read_text()
    assert log.count(SEP) == 1 and log1.count(SEP) == 1 and '[train] resumed' not in log, log[-2000:]
    assert re.search(r'on 2 device\(s\) / 2 process\(es\)', log) and '--config.distributed.process_id=1' in log1
    assert train_steps(trial) == [3, 6]
    record = json.loads((trial / 'trial.json').read_text())
    assert (record['status'], record['processes'], record['returncode']) == ('finished', 2, 0)
  sweep_record = json.loads((out / 'sweep.json').read_text())
  assert not any(k.startswith('distributed.') for k, _ in sweep_record['base_overrides'])  # this process's, not the sweep's
  for leader, follower in outputs:
    assert '3 of 3 trials finished' in leader
    assert 'process 1 of 2 of one worker' in follower and 'results' not in follower


def _wait_for_checkpoint(trial, procs, timeout=300):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if any(p.name.isdigit() for p in (trial / 'checkpoints').glob('[0-9]*')):
      return
    for p in procs:
      assert p.poll() is None, p.communicate()[0][-3000:]
    time.sleep(0.02)
  raise AssertionError(f'no checkpoint in {trial} after {timeout} s')


def test_a_process_killed_mid_trial_releases_the_trial_and_another_slice_resumes_it(tiny_data, tmp_path):
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(1)'), tmp_path / 'sweep'
  trial = out / 'seed=0'
  first = _slice(_free_port_pair(), '--config', spec, '--workdir', str(out), '--lease_s', '60', '--no_summary',
                 '--config.checkpoint.every_steps=2', '--config.log_every_steps=2',
                 '--config.distributed.heartbeat_timeout_seconds=10')
  _wait_for_checkpoint(trial, first)
  first[1].send_signal(signal.SIGKILL)  # process 1 of the slice, as a host that goes down
  first[1].communicate()
  text = first[0].communicate(timeout=600)[0]
  assert first[0].returncode == 1, text[-3000:]
  lines = [l for l in text.splitlines() if l.startswith('vvt sweep: error:')]
  assert len(lines) == 1 and 'process 1 of 2 was lost' in lines[0], text[-3000:]
  assert 'trial seed=0 released for another worker' in lines[0]
  assert not processes_using(str(trial))  # no trainer of the slice left behind
  held = claims.read(str(trial))
  assert held['state'] == 'released' and 'process 1 of 2 was lost' in held['error']
  assert not (trial / 'training_curves.png').exists(), 'the trial finished before its process was killed'

  # Another slice joins the sweep (its config from sweep.json) and resumes the trial at once (no lease to wait for).
  second = _slice(_free_port_pair(), str(out), '--lease_s', '60', '--no_summary')
  text = [finish(p) for p in second][0]
  assert 'resuming seed=0 (attempt 2' in text, text
  log = (trial / 'train.log').read_text()
  assert log.count(SEP) == 2
  resumed = [l for l in log.split(SEP)[2].splitlines() if l.startswith('[train] resumed from')]
  assert len(resumed) == 1 and '(step 0,' not in resumed[0], log[-3000:]
  steps = train_steps(trial)
  assert steps == sorted(set(steps)) and steps[-1] == 6, steps  # one record per step, to the end
  state = json.loads((trial / 'state.json').read_text())
  assert (state['status'], state['attempts'], state['requeues'], state['processes']) == ('finished', 2, 1, 2)
  assert (trial / 'train.process-1.log').read_text().count(SEP) == 2
