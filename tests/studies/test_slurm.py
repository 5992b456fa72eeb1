"""`vvt sweep --launch slurm` and `vvt data convert` as SLURM job arrays, on a real one-node SLURM (slurm_cluster):
a 3-trial miniature study with throttle 2 (the fewest trials that show it: a third waits) tabulated by
`vvt results`; a trial stopped by the time-limit signal and by `scontrol requeue`, requeued and resumed to the
parameters of an uninterrupted run; a conversion by a 3-task array equal to one process's; bad input as one line."""
import csv
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import av
import numpy as np

from tests.cli.test_commands import env as vvt_env
from tests.cli.test_sweep_workers import processes_using
from tests.conftest import REPO

STUDY = '''
from configs import common
from vvt.studies import sweep


def get_config(arg=None):
  c = common.synthetic_config('divided', {data!r}, hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_train_steps, c.batch_size, c.log_every_steps = {steps}, 4, {log}
  c.checkpoint.every_steps, c.schedule.warmup_steps, c.eval.batch_size = 1000, 1, 8
  c.loss.mixup_alpha, c.model.dropout_rate = 0.4, 0.1   # randomness a resumed run must replay
  return c


def get_sweep(arg=None):
  {body}
'''
FOUR = 'return sweep.product(sweep.axis("model.attention", ["space", "divided"]), sweep.seeds(2))'
# One model over three seeds: the trials share one program, so XLA compiles it once for the three (the tests'
# compilation cache, tests/conftest.py).
THREE = 'return sweep.product(sweep.axis("model.attention", ["space"]), sweep.seeds(3))'


def study(tmp_path, data, body=FOUR, steps=4, log=2, name='study.py'):
  path = tmp_path / name
  path.write_text(STUDY.format(data=str(data), body=body, steps=steps, log=log))
  return str(path)


def sbatch(cluster, script) -> str:
  """Submits a script of a test's own from the repository with the tests' environment; its job id."""
  res = subprocess.run(['sbatch', '--parsable', str(script)], cwd=REPO, env=cluster.env(vvt_env()),
                       capture_output=True, text=True, timeout=60)
  assert res.returncode == 0, res.stderr
  return res.stdout.strip()


def submitted(res) -> str:
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  return re.search(r'submitted job (\d+)', res.stdout).group(1)


def wait_text(path, pattern, timeout=600, start=0, poll_s=0.2):
  """The file's text once `pattern` (a regex) occurs after character `start`."""
  end = time.time() + timeout
  while time.time() < end:
    text = open(path, errors='replace').read() if os.path.exists(path) else ''
    if re.search(pattern, text[start:]):
      return text
    time.sleep(poll_s)
  raise AssertionError(f'{pattern!r} not in {path} after {timeout} s:\n{text[-3000:]}')


def error_line(res, message, code):
  lines = [l for l in res.stderr.splitlines() if l.startswith('vvt ')]
  assert res.returncode == code, res.stdout[-2000:] + res.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith('vvt sweep: error: ') and message in lines[0], res.stderr
  assert res.stderr.strip().splitlines()[-1] == lines[0]


def _spans(outs):
  """[(start, end)] seconds of each task's attempt, from the script's `[slurm] DATE TIME` lines."""
  def t(line):
    return time.mktime(time.strptime(' '.join(line.split()[1:3]), '%Y-%m-%d %H:%M:%S'))
  out = []
  for path in outs:
    lines = [l for l in open(path).read().splitlines() if l.startswith('[slurm] ')]
    out.append((t(lines[0]), t(lines[-1])))
  return out


def test_a_three_trial_study_as_a_job_array_with_throttle_2(slurm, tiny_data, tmp_path, capsys, monkeypatch):
  """The submissions, dry runs and `vvt results` through the CLI's `main(argv)` in the test process with the
  cluster's environment (the trials themselves run as SLURM's processes)."""
  _cluster_env(slurm, monkeypatch)
  vvt = lambda _cluster, *args: _in_process(capsys, monkeypatch, args, None)  # noqa: E731
  spec, out = study(tmp_path, tiny_data, body=THREE), str(tmp_path / 'sweep')
  res = vvt(slurm, 'sweep', '--config', spec, '--workdir', out, '--launch', 'slurm', '--parallel', '2',
            '--slurm.partition=debug', '--slurm.time=10:00', '--slurm.extra=--comment=vvt-test')
  job = submitted(res)
  assert 'array 0-2%2 (3 of 3 trials, 2 at a time' in res.stdout and f'squeue -r -j {job}' in res.stdout
  assert f'{out}/slurm/{job}_<task>.out' in res.stdout
  assert slurm.job_field(job, 'ArrayTaskThrottle') == '2' and slurm.job_field(job, 'Comment') == 'vvt-test'
  res = vvt(slurm, 'sweep', '--config', spec, '--workdir', out, '--launch', 'slurm', '--dry-run')
  assert res.returncode == 0 and 'are still in the SLURM queue, not submitted again' in res.stdout, res.stderr
  assert 'nothing to submit' in res.stdout and '#SBATCH' not in res.stdout   # each trial is in the queue once
  slurm.wait_for(job, timeout=1800)  # a hang guard: 3 trials, 2 at a time
  names = [t['name'] for t in json.load(open(f'{out}/sweep.json'))['trials']]
  assert names == ['attention=space,seed=0', 'attention=space,seed=1', 'attention=space,seed=2']
  outs = [f'{out}/slurm/{job}_{i}.out' for i in range(3)]
  for name, path in zip(names, outs, strict=True):
    assert '[slurm] ' in open(path).read() and f'trial {name} exited 0' in open(path).read()
  spans = _spans(outs)
  assert max(sum(1 for a, b in spans if a <= s < b) for s, _ in spans) <= 2   # never more than 2 at once

  res = vvt(slurm, 'results', out, '--no_summary')
  assert res.returncode == 0, res.stderr[-2000:]
  rows = list(csv.DictReader(open(f'{out}/results.csv')))
  assert [(r['trial'], r['status'], r['step']) for r in rows] == [(n, 'finished', '4') for n in names]
  assert all(0 <= float(r['video_top1']) <= 1 for r in rows)

  # Re-submitting submits nothing; with one trial's final evaluation gone, only that trial (task 2).
  res = vvt(slurm, 'sweep', '--config', spec, '--workdir', out, '--launch', 'slurm')
  assert res.returncode == 0 and 'all 3 trials' in res.stdout and 'nothing to submit' in res.stdout, res.stderr
  assert 'still in the SLURM queue' not in res.stdout
  for p in glob.glob(f'{out}/{names[2]}/checkpoints/eval_4_*'):
    os.remove(p)
  res = vvt(slurm, 'sweep', '--config', spec, '--workdir', out, '--launch', 'slurm', '--dry-run')
  assert res.returncode == 0 and '#SBATCH --array=2\n' in res.stdout, res.stderr
  assert f'  2) trial={names[2]};' in res.stdout and '  0) ' not in res.stdout


def test_requeued_trial_saves_resumes_and_equals_an_uninterrupted_run(slurm, tiny_data, tmp_path, capsys,
                                                                     monkeypatch):
  """The submission through `main(argv)` in the test process with the cluster's environment; the trial's attempts
  and the uninterrupted reference run are processes of their own."""
  _cluster_env(slurm, monkeypatch)
  steps = 40  # each attempt is stopped (SIGSTOP) at a logged step: the steps after it are a margin, not a timing
  spec, out = study(tmp_path, tiny_data, body='return sweep.axis("seed", [3])', steps=steps, log=5), tmp_path / 'sw'
  job = submitted(_in_process(capsys, monkeypatch, ['sweep', '--config', spec, '--workdir', str(out), '--launch',
                                                    'slurm'], None))
  task, log, train_log = f'{job}_0', f'{out}/slurm/{job}_0.out', out / 'seed=3' / 'train.log'
  reference = subprocess.Popen(
      [sys.executable, '-m', 'vvt', 'train', '--config', spec, '--config.seed=3', '--workdir', str(tmp_path / 'ref')],
      cwd=REPO, env=vvt_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

  # The time-limit signal (what --signal=B:TERM@S sends: SIGTERM to the batch shell only) -> save, self-requeue.
  trainer = _stopped_mid_run(train_log, r'\[train\] step \d+/', steps)
  slurm.run('scancel', '--batch', '--signal=TERM', task)
  _continue_once_signalled(trainer)
  text = wait_text(log, r'requeueing ' + task)
  assert 'time limit near' in text and len(re.findall(r'checkpoint saved at step \d+', train_log.read_text())) == 1
  slurm.release_requeued(task)

  # A requeue from outside while it runs again: SLURM signals the trainer; it saves and the task is requeued.
  trainer = _stopped_mid_run(train_log, r'attempt 2 on [\s\S]*\[train\] resumed from[\s\S]*\[train\] step \d+/', steps)
  mark = len(open(log).read())
  slurm.run('scontrol', 'requeue', task)
  _continue_once_signalled(trainer)
  wait_text(str(train_log), r'checkpoint saved at step \d+[\s\S]*checkpoint saved at step \d+')
  assert 'from outside' in wait_text(log, 'from outside', start=mark)[mark:]
  slurm.release_requeued(task)
  slurm.wait_for(job, timeout=1200)

  text = open(log).read()
  assert '(restart 2)' in text and text.count('[train] resumed from') == 2 and 'trial seed=3 exited 0' in text
  from vvt.cli import sweep_status
  row = sweep_status.table(str(out))[0]   # the trial's claim, as `vvt sweep --status` shows it
  assert (row['state'], row['attempts'], row['slurm']) == ('finished', '3', task), row
  assert reference.wait(timeout=1200) == 0, reference.stderr.read()[-3000:]
  import chex

  from vvt.train import checkpoints
  p_ref, _ = checkpoints.load_params(str(tmp_path / 'ref'), steps)
  p_req, _ = checkpoints.load_params(str(out / 'seed=3'), steps)
  chex.assert_trees_all_close(p_ref, p_req, rtol=1e-6, atol=1e-7)  # one program with itself (exact resume)


def _stopped_mid_run(train_log, pattern, steps) -> int:
  """Stops (SIGSTOP) the trial's trainer once `pattern` (a regex) is in its log, and checks it had not finished
  its `steps`: a signal then sent finds it mid-run, whatever the machine's speed (no more steps run until it is
  continued). The trainer's pid: of the processes whose command line names the trial's workdir (the trainer and
  the stderr filter it forks, `vvt.cli.native_stderr`), the one whose parent is not among them."""
  wait_text(train_log, pattern, poll_s=0.02)
  pids = processes_using(f'--workdir {train_log.parent}')
  parents = {pid: int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1]) for pid in pids}
  trainers = [pid for pid in pids if parents[pid] not in pids]
  assert len(trainers) == 1, parents
  os.kill(trainers[0], signal.SIGSTOP)
  last = re.findall(r'\[train\] step (\d+)/', train_log.read_text())[-1]
  assert int(last) < steps, f'the trainer ran its {steps} steps before it was stopped'
  return trainers[0]


def _continue_once_signalled(pid, timeout=120):
  """Continues (SIGCONT) a stopped trainer once a SIGTERM is pending for it, or once it runs again (SLURM continues
  the processes of a task it requeues as it signals them)."""
  term = 1 << (signal.SIGTERM - 1)
  end = time.time() + timeout
  while time.time() < end:
    status = dict(l.split(':', 1) for l in open(f'/proc/{pid}/status').read().splitlines() if ':' in l)
    if (int(status['ShdPnd'], 16) | int(status['SigPnd'], 16)) & term or not status['State'].strip().startswith('T'):
      os.kill(pid, signal.SIGCONT)
      return
    time.sleep(0.02)
  os.kill(pid, signal.SIGCONT)
  raise AssertionError(f'no SIGTERM reached the trainer (pid {pid}) in {timeout} s')


def _video(path, colour, frames):
  with av.open(path, 'w') as container:
    stream = container.add_stream('mpeg4', rate=10)
    stream.height, stream.width, stream.pix_fmt = 40, 56, 'yuv420p'
    for t in range(frames):
      frame = np.full((40, 56, 3), colour, np.uint8)
      frame[:2, :2] = t
      for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format='rgb24')):
        container.mux(packet)
    for packet in stream.encode():
      container.mux(packet)


def test_data_convert_as_a_3_task_array_equals_one_process(slurm, tmp_path, capsys, monkeypatch):
  """The one-process conversion through `main(argv)` in the test process (`--workers 1` decodes in it); the array's
  three tasks are SLURM's processes."""
  lines = ['path,label']
  for i in range(7):
    _video(str(tmp_path / f'v{i}.mp4'), (30 * i, 200 - 20 * i, 90), 6 + i)
    lines.append(f'v{i}.mp4,{["a", "b", "c"][i % 3]}')
  lines += ['missing.mp4,a', 'v1.mp4,nope']
  (tmp_path / 'videos.csv').write_text('\n'.join(lines) + '\n')
  (tmp_path / 'classes.txt').write_text('a\nb\nc\n')
  args = ['data', 'convert', '--input', str(tmp_path / 'videos.csv'), '--classes', str(tmp_path / 'classes.txt'),
          '--shards', '5', '--short-side', '32', '--workers', '1', '--no-progress']
  one = _in_process(capsys, monkeypatch, [*args, '--output', str(tmp_path / 'one' / 'train')], None)
  assert one.returncode == 1 and '2 of 9 videos failed or were partial' in one.stderr, one.stderr[-2000:]
  script = tmp_path / 'convert.sbatch'
  script.write_text('#!/bin/bash\n#SBATCH --array=0-2\n'
                    f'#SBATCH --output={tmp_path}/convert-%a.out\n'
                    f'{sys.executable} -m vvt {" ".join(args)} --output {tmp_path}/many/train\n')
  job = sbatch(slurm, script)
  slurm.wait_for(job, timeout=900)
  for i in range(3):
    assert f'[convert] worker {i}/3 (SLURM array task)' in open(f'{tmp_path}/convert-{i}.out').read()
  a = json.load(open(tmp_path / 'one' / 'train.manifest.json'))
  b = json.load(open(tmp_path / 'many' / 'train.manifest.json'))
  assert b['totals'] == a['totals'] == {'videos': 9, 'ok': 7, 'failed': 2, 'partial': 0, 'existing': 0,
                                        'frames': sum(range(6, 13))}
  for key in ('videos', 'failures', 'shards', 'options', 'complete'):
    assert b[key] == a[key], key
  for s in range(5):
    name = f'train.tfrecord-{s:05d}-of-00005'
    assert open(tmp_path / 'many' / name, 'rb').read() == open(tmp_path / 'one' / name, 'rb').read(), name


def test_bad_input_is_one_line_and_loses_nothing(slurm, tiny_data, tmp_path, capsys, monkeypatch):
  """Through the CLI's `main(argv)` in the test process, with the cluster's environment (a separate process proves
  nothing more: the messages, exit codes and files are the command's)."""
  _cluster_env(slurm, monkeypatch)
  vvt = lambda _cluster, *args, path=None: _in_process(capsys, monkeypatch, args, path)  # noqa: E731
  spec, out = study(tmp_path, tiny_data), tmp_path / 'sweep'
  base = ['sweep', '--config', spec, '--workdir', str(out), '--launch', 'slurm']
  error_line(vvt(slurm, *base, '--slurm.gpu=1'), 'unknown option --slurm.gpu (known: --slurm.partition', 2)
  error_line(vvt(slurm, *base, '--slurm.nodes=two'), '--slurm.nodes=two: not an integer', 2)
  assert not out.exists()

  res = vvt(slurm, *base, path=os.path.dirname(sys.executable))
  error_line(res, 'sbatch not found on PATH', 1)
  assert (out / 'sweep.json').exists() and (out / 'slurm' / 'job.sbatch').exists()

  res = vvt(slurm, *base, '--slurm.partition=nosuch')
  error_line(res, f'sbatch refused {out}/slurm/job.sbatch: sbatch: error: invalid partition specified: nosuch', 1)
  assert '--partition=nosuch' in (out / 'slurm' / 'job.sbatch').read_text()
  assert not (out / 'slurm' / 'jobs.jsonl').exists()

  other = tmp_path / 'other'
  other.mkdir()
  record = '{"config": "experiments/other.py", "trials": []}'
  (other / 'sweep.json').write_text(record)
  res = vvt(slurm, 'sweep', '--config', spec, '--workdir', str(other), '--launch', 'slurm')
  error_line(res, "holds a sweep of 'experiments/other.py'", 2)
  assert (other / 'sweep.json').read_text() == record and os.listdir(other) == ['sweep.json']


def _cluster_env(cluster, monkeypatch) -> None:
  """This process's environment made the one the subprocess tests give `vvt` (what sbatch passes to the jobs)."""
  wanted = cluster.env(vvt_env())
  for name in set(os.environ) - set(wanted):
    monkeypatch.delenv(name)
  for name, value in wanted.items():
    monkeypatch.setenv(name, value)


def _in_process(capsys, monkeypatch, args, path):
  """`vvt ARGS` in this process (tests.cli.test_sweep.vvt_in_process), with PATH set to `path` if given."""
  from tests.cli.test_sweep import vvt_in_process
  with monkeypatch.context() as m:
    if path is not None:
      m.setenv('PATH', path)
    return vvt_in_process(capsys, *args)


def test_a_sigterm_passed_on_twice_is_one_request():
  """SLURM signals every process of a task while the sweep worker passes its SIGTERM on to the trainer: the
  trainer still saves (a second SIGTERM within REPEAT_S is the same request; a later one exits at once)."""
  import signal

  from vvt.train import signals
  previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
  try:
    with signals.StopSignals(log=lambda *a: None) as stop:
      stop.deferred = True
      os.kill(os.getpid(), signal.SIGTERM)
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(0.1)
      assert stop.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is not stop._handle  # noqa: SLF001
  finally:  # the run's handlers stay after a signal (a later one exits at once): not in the test process
    for sig, handler in previous.items():
      signal.signal(sig, handler)


def test_array_spec_and_options():
  from vvt.studies import launch
  from vvt.studies import slurm as slurm_lib
  assert launch.array_spec([5, 0, 1, 2, 7, 8]) == '0-2,5,7-8'
  assert launch.array_spec([3], throttle=2) == '3%2'
  opts, rest = slurm_lib.split_options(['--slurm.nodes', '2', '--x', '--slurm.extra=--exclusive',
                                        '--slurm.extra=--constraint=a100'])
  assert (opts.nodes, opts.extra, rest) == (2, ('--exclusive', '--constraint=a100'), ['--x'])


def test_multi_node_script_and_jax_distributed_from_srun(slurm, tiny_data, tmp_path, capsys, monkeypatch):
  """A trial on several nodes runs `vvt train` under srun; each task of the step initialises jax.distributed
  from SLURM's environment with no distributed.* field (here 2 tasks on the one node). The dry run through
  `main(argv)` in the test process; the step's tasks are SLURM's processes."""
  _cluster_env(slurm, monkeypatch)
  spec = study(tmp_path, tiny_data)
  res = _in_process(capsys, monkeypatch, ['sweep', '--config', spec, '--workdir', str(tmp_path / 'sw'), '--launch',
                                          'slurm', '--dry-run', '--slurm.nodes=2', '--slurm.gpus=8'], None)
  assert res.returncode == 0, res.stderr[-2000:]
  assert '#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n' in res.stdout and '--gpus-per-node=8' in res.stdout
  assert 'srun --ntasks-per-node=1 --kill-on-bad-exit=1 "${cmd[@]}" &' in res.stdout
  assert re.search(r'  0\) trial=\S+; cmd=\(\S+ -m vvt train --config ', res.stdout)
  assert not (tmp_path / 'sw').exists()

  probe = ('from vvt.config import run_spec, schema; from vvt.train import mesh; import jax; '
           'mesh.maybe_initialize_distributed(run_spec.DistributedSpec.of(schema.get_base_config().distributed)); '
           'print("PROCESS", jax.process_index(), "OF", jax.process_count(), flush=True)')
  script = tmp_path / 'srun.sbatch'
  script.write_text(f'#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --output={tmp_path}/srun.out\n'
                    f'srun {sys.executable} -c {json.dumps(probe)}\n')
  job = sbatch(slurm, script)
  slurm.wait_for(job, timeout=600)
  text = open(tmp_path / 'srun.out').read()
  assert sorted(re.findall(r'PROCESS \d OF \d', text)) == ['PROCESS 0 OF 2', 'PROCESS 1 OF 2'], text[-3000:]
