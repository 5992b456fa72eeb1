"""`vvt sweep --launch xpk`: one `xpk workload create` per unfinished trial (printed by --dry-run, run with an `xpk`
stand-in on PATH, recorded in SWEEP/xpk/), the `xpk batch` array script that kjob's SLURM mode accepts (one final
`srun`, no scontrol / sinfo / ...; its command run as kjob runs it), and bad options as one line (exit 2)."""
import json
import os
import shlex
import stat
import subprocess

import pytest

from tests.cli.test_sweep import study
from vvt.studies import xpk

TPU = ['--launch', 'xpk', '--xpk.cluster=vvt-v4', '--xpk.tpu_type=v4-32', '--xpk.docker_image=gcr.io/p/vvt:1',
       '--xpk.project=p', '--xpk.zone=us-central2-b']


def sweep(capsys, *argv):
  """`vvt sweep ARGV` in this process: (exit code, stdout, stderr)."""
  from vvt.cli import main
  rc = main(['sweep', *argv])
  out = capsys.readouterr()
  return rc, out.out, out.err


def error_line(capsys, argv, message, code=2):
  rc, out, err = sweep(capsys, *argv)
  lines = [l for l in err.splitlines() if l.strip()]
  assert rc == code and len(lines) == 1 and lines[0].startswith('vvt sweep: error: '), (rc, out, err)
  assert message in lines[0], lines[0]


def _final(trial):
  """A finished trial's files: its last training step, the final evaluation there, the curves."""
  (trial / 'checkpoints').mkdir(parents=True)
  (trial / 'metrics.jsonl').write_text(json.dumps({'kind': 'train', 'step': 6, 'loss': 1.0}) + '\n')
  (trial / 'checkpoints' / 'eval_6_test.json').write_text(json.dumps({'video_top1': 0.5, 'clip_top1': 0.4}))
  (trial / 'training_curves.png').write_bytes(b'png')


def test_dry_run_prints_one_workload_per_unfinished_trial(tiny_data, tmp_path, capsys):
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(3)'), tmp_path / 'tsf'
  rc, text, err = sweep(capsys, '--config', spec, '--workdir', str(out), *TPU, '--xpk.priority=high',
                        '--xpk.env=XLA_FLAGS=--xla_dump_to=/tmp/d', '--xpk.extra=--spot',
                        '--config.distributed.heartbeat_timeout_seconds=300', '--dry-run')
  assert rc == 0, err
  lines = text.splitlines()
  assert lines[0] == f'# vvt sweep --launch xpk: {spec}, 3 of 3 trials -> {out}'
  commands = [shlex.split(l) for l in lines if not l.startswith('#')]
  assert len(commands) == 3
  for i, argv in enumerate(commands):
    assert argv[:3] == ['xpk', 'workload', 'create']
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert argv[-2] == '--command' and '--spot' in argv
    assert flags['--cluster'] == 'vvt-v4' and flags['--workload'] == f'vvt-tsf-{i}'
    assert (flags['--tpu-type'], flags['--num-slices'], flags['--docker-image']) == ('v4-32', '1', 'gcr.io/p/vvt:1')
    assert (flags['--project'], flags['--zone'], flags['--priority'], flags['--max-restarts']) == (
        'p', 'us-central2-b', 'high', '3')
    assert flags['--env'] == 'XLA_FLAGS=--xla_dump_to=/tmp/d'
    # every host of the slice runs the same sweep worker; together they are one (process 0 claims trial i)
    assert shlex.split(argv[-1]) == ['exec', 'python3', '-m', 'vvt', 'sweep', str(out), '--trial', str(i),
                                     '--lease_s', '180', '--config.distributed.initialize=True',
                                     '--config.distributed.heartbeat_timeout_seconds=300']
  assert not out.exists()  # a dry run writes nothing

  # A finished trial is not launched again; the second launch of a sweep names its workloads apart.
  _final(out / 'seed=0')
  (out / 'xpk').mkdir()
  (out / 'xpk' / 'launches.jsonl').write_text('{"mode": "workload"}\n')
  rc, text, _ = sweep(capsys, '--config', spec, '--workdir', str(out), *TPU, '--dry-run')
  names = [dict(zip(a[3::2], a[4::2], strict=False))['--workload']
           for a in map(shlex.split, text.splitlines()) if a[0] == 'xpk']
  assert rc == 0 and names == ['vvt-tsf-r2-1', 'vvt-tsf-r2-2'], text


def _xpk_stand_in(folder, answer='', code=0):
  """An `xpk` on PATH that records its arguments (one JSON line per call) and answers `answer`."""
  folder.mkdir(exist_ok=True)
  log = folder / 'calls.jsonl'
  tool = folder / 'xpk'
  tool.write_text(f'#!/bin/sh\nprintf \'%s\\0\' "$@" >> {shlex.quote(str(log))}\nprintf \'\\n\' >> {log}\n'
                  f'echo {shlex.quote(answer)}\nexit {code}\n')
  tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
  return log


def _calls(log):
  return [line.split('\0')[:-1] for line in log.read_text().split('\n') if line]


def test_launch_runs_xpk_per_trial_and_records_the_launch(tiny_data, tmp_path, capsys, monkeypatch):
  spec, out = study(tmp_path, tiny_data), tmp_path / 'sweep'
  log = _xpk_stand_in(tmp_path / 'bin', answer='[XPK] Follow your workload here: https://console...')
  monkeypatch.setenv('PATH', f'{tmp_path / "bin"}{os.pathsep}{os.environ["PATH"]}')
  rc, text, err = sweep(capsys, '--config', spec, '--workdir', str(out), *TPU)
  assert rc == 0, err
  calls = _calls(log)
  assert [c[:7] for c in calls] == [['workload', 'create', '--cluster', 'vvt-v4', '--workload', f'vvt-sweep-{i}',
                                     '--tpu-type'] for i in range(2)]
  assert calls[1][-1] == f'exec python3 -m vvt sweep {out} --trial 1 --lease_s 180 --config.distributed.initialize=True'
  assert '[sweep] created workload vvt-sweep-1: trial 1 (attention=divided)' in text
  assert f'vvt sweep --status {out}' in text
  assert json.loads((out / 'sweep.json').read_text())['config'] == spec  # the workers join from it
  assert (out / 'xpk' / 'launch.sh').read_text().count('xpk workload create') == 2
  launches = [json.loads(l) for l in (out / 'xpk' / 'launches.jsonl').read_text().splitlines()]
  assert launches[0]['workloads'] == {'vvt-sweep-0': 'attention=space', 'vvt-sweep-1': 'attention=divided'}

  # xpk refusing a workload: one line with its own words, exit 1; the launch is recorded as far as it went.
  log = _xpk_stand_in(tmp_path / 'bin', answer='[XPK] Workload vvt-sweep-r2-0 already exists', code=1)
  error_line(capsys, ['--config', spec, '--workdir', str(out), *TPU],
             'xpk refused workload vvt-sweep-r2-0 (trial 0, attention=space): [XPK] Workload vvt-sweep-r2-0 already '
             'exists', code=1)
  assert len((out / 'xpk' / 'launches.jsonl').read_text().splitlines()) == 1


def _run_as_kjob(script: str, task: int, tmp_path) -> str:
  """Runs the script's commands as kjob's SLURM mode does: `srun` and its own options dropped from the last line,
  the array task in SLURM_ARRAY_TASK_ID; the output."""
  lines = script.splitlines()
  last = shlex.split(lines[-1], posix=False)
  assert last[0] == 'srun' and not any(w.startswith('-') for w in last[1:])
  path = tmp_path / 'as_kjob.sh'
  path.write_text('\n'.join([*lines[:-1], ' '.join(last[1:])]) + '\n')
  res = subprocess.run(['bash', str(path)], env={'SLURM_ARRAY_TASK_ID': str(task), 'PATH': os.environ['PATH']},
                       capture_output=True, text=True, timeout=60)
  assert res.returncode == 0, res.stderr
  return res.stdout


def test_batch_script_has_one_final_srun_and_no_other_slurm_command(tiny_data, tmp_path, capsys):
  spec, out = study(tmp_path, tiny_data, body='return sweep.seeds(3)'), tmp_path / 'sweep dir'
  rc, script, err = sweep(capsys, '--config', spec, '--workdir', str(out), '--launch', 'xpk', '--xpk.mode=batch',
                          '--xpk.cluster=gpus', '--xpk.gpus=nvidia.com/gpu:8', '--xpk.cpus=32', '--xpk.mem=200Gi',
                          '--xpk.time=12:00:00', '--xpk.setup=echo setting up', '--xpk.python=echo', '--parallel', '2',
                          '--dry-run')
  assert rc == 0, err
  lines = [l for l in script.splitlines() if l.strip()]
  assert lines[0] == '#!/bin/bash' and lines[-1] == 'srun "${cmd[@]}"'
  assert sum(' srun' in f' {l}' for l in lines) == 1
  for word in ('scontrol', 'sinfo', 'squeue', 'scancel', 'sbatch', 'salloc', 'wait'):
    assert not any(word in l.split() for l in lines), word
  directives = [l.split()[1] for l in lines if l.startswith('#SBATCH')]
  assert directives == ['--job-name=vvt-sweep-dir', '--array=0-2%2', '--cpus-per-task=32',
                        '--gpus-per-task=nvidia.com/gpu:8', '--mem-per-task=200Gi', '--time=12:00:00']
  assert f'# submitted with: xpk batch --cluster gpus \'{out}/xpk/job.sh\'' in lines
  assert xpk.batch_problems(script) == []
  # the task's command, run as kjob runs it: trial 1 of the sweep, the folder's space kept
  assert _run_as_kjob(script, 1, tmp_path).splitlines() == [
      'setting up', f'-m vvt sweep {out} --trial 1 --lease_s 180']
  assert not out.exists()

  error_line(capsys, ['--config', spec, '--workdir', str(out), '--launch', 'xpk', '--xpk.mode=batch',
                      '--xpk.cluster=gpus', '--xpk.setup=scontrol show config', '--dry-run'],
             "--launch xpk: --xpk.setup='scontrol show config': kjob refuses the command 'scontrol'")
  assert xpk.batch_problems('#!/bin/bash\nsrun --nodes=2 python x\n') == [
      'kjob takes the words after srun that begin with "-" for its own options: \'srun --nodes=2 python x\'']
  assert xpk.batch_problems('#!/bin/bash\nsrun a\nsrun b\n')[0].startswith('one srun, as the last command (found 2')


@pytest.mark.parametrize('args,message', [
    (['--xpk.tpu_type=v4-32'], '--launch xpk: missing --xpk.cluster=NAME'),
    (['--xpk.cluster=c'], 'neither --xpk.tpu_type (a TPU slice per trial, e.g. v4-32) nor --xpk.device_type'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.device_type=h100-80gb-8'], 'both --xpk.tpu_type'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.priority=urgent'],
     '--xpk.priority=urgent: one of very-low, low, medium, high, very-high'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.workload_prefix=My_Sweep'],
     '--xpk.workload_prefix=My_Sweep: lowercase letters, digits and "-"'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.workload_prefix=' + 'a' * 39],
     'is longer than xpk\'s 40 characters'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.cpus=8'], '--xpk.cpus is an option of --xpk.mode=batch'),
    (['--xpk.cluster=c', '--xpk.mode=batch', '--xpk.tpu_type=v4-32'],
     '--xpk.tpu_type is an option of --xpk.mode=workload'),
    (['--xpk.cluster=c', '--xpk.mode=batch', '--xpk.gpus=8'], '--xpk.gpus=8: TYPE:N'),
    (['--xpk.cluster=c', '--xpk.mode=queue'], '--xpk.mode=queue: one of workload, batch'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.num_slices=0'], '--xpk.num_slices=0: must be >= 1'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--xpk.env=NOVALUE'], '--xpk.env=NOVALUE: NAME=VALUE'),
    (['--xpk.clutser=c'], 'unknown option --xpk.clutser (known: --xpk.cluster,'),
    (['--xpk.num_slices=two'], '--xpk.num_slices=two: not an integer'),
    (['--xpk.cluster=c', '--xpk.tpu_type=v4-32', '--trial', '0'], '--launch xpk launches the unfinished trials'),
])
def test_bad_xpk_options_are_one_line_errors(tiny_data, tmp_path, capsys, args, message):
  spec, out = study(tmp_path, tiny_data), tmp_path / 'sweep'
  error_line(capsys, ['--config', spec, '--workdir', str(out), '--launch', 'xpk', *args, '--dry-run'], message)
  error_line(capsys, ['--config', spec, '--workdir', str(out), '--xpk.cluster=c', '--dry-run'],
             '--xpk.* options need --launch xpk')
  assert not out.exists()
