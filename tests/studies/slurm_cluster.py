"""A real single-node SLURM for the tests: `munged`, `slurmctld` and `slurmd` on localhost, as root, with their own
configuration, state, sockets, logs and ports in a temporary folder (nothing under /etc or /run is used).

  with SlurmCluster(folder) as cluster:      # the daemons run; `sinfo` shows the node idle
    subprocess.run(['sbatch', ...], env=cluster.env())
    cluster.wait_for(job_id)                 # until the job (every array task) has left the queue

No systemd and no cgroups: `proctrack/linuxproc`, `task/none`, no accounting (`squeue` and `scontrol show job`
instead of `sacct`). The daemons are stopped by the pids in their pid files, never by name. A requeued task gets a
begin time about 120 s later; `release_requeued` brings it forward (`StartTime=now+2`) to keep a test short.
"""
from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time

BINARIES = ('munged', 'slurmctld', 'slurmd', 'sbatch', 'squeue', 'scontrol', 'sinfo')
INSTALL = 'apt-get install -y slurm-wlm munge'


class SlurmError(RuntimeError):
  """The test cluster could not start (or a job did not end in time): one line saying why."""


def missing_binaries() -> list[str]:
  """The SLURM / munge programs not on PATH (the daemons live in /usr/sbin)."""
  path = os.environ.get('PATH', '') + ':/usr/sbin:/sbin'
  return [b for b in BINARIES if shutil.which(b, path=path) is None]


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _conf(folder: str, munge_socket: str, ctld_port: int, slurmd_port: int, cpus: int) -> str:
  return '\n'.join([
      'ClusterName=vvttest', 'SlurmctldHost=localhost', f'SlurmctldPort={ctld_port}', f'SlurmdPort={slurmd_port}',
      'SlurmUser=root', 'SlurmdUser=root', 'AuthType=auth/munge', f'AuthInfo=socket={munge_socket}',
      'CredType=cred/munge', f'StateSaveLocation={folder}/state', f'SlurmdSpoolDir={folder}/spool/%n',
      f'SlurmctldPidFile={folder}/slurmctld.pid', f'SlurmdPidFile={folder}/slurmd.pid',
      f'SlurmctldLogFile={folder}/slurmctld.log', f'SlurmdLogFile={folder}/slurmd.log',
      'ProctrackType=proctrack/linuxproc', 'TaskPlugin=task/none', 'MpiDefault=none', 'ReturnToService=2',
      'SelectType=select/cons_tres', 'SelectTypeParameters=CR_Core', 'AccountingStorageType=accounting_storage/none',
      'JobCompType=jobcomp/none', 'JobAcctGatherType=jobacct_gather/none', 'SchedulerType=sched/backfill',
      'SchedulerParameters=sched_interval=1', 'MessageTimeout=20', 'KillWait=30', 'MinJobAge=2',
      'InactiveLimit=0', 'SlurmctldTimeout=30', 'SlurmdTimeout=30',
      f'NodeName=localhost NodeHostname=localhost CPUs={cpus} RealMemory=2000 State=UNKNOWN',
      'PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP', ''])


class SlurmCluster:
  """The three daemons of a one-node cluster in `folder` (see the module doc)."""

  def __init__(self, folder: str, cpus: int | None = None):
    self.folder = os.path.abspath(folder)
    self.cpus = cpus or max(2, os.cpu_count() or 2)
    self.conf = os.path.join(self.folder, 'slurm.conf')
    self.munge_dir = os.path.join(self.folder, 'munge')
    self.munge_socket = os.path.join(self.munge_dir, 'munge.socket')
    self.pid_files = [os.path.join(self.folder, n) for n in ('slurmd.pid', 'slurmctld.pid')] + [
        os.path.join(self.munge_dir, 'munged.pid')]

  def env(self, base: dict | None = None) -> dict:
    """An environment for sbatch / squeue / scontrol that talks to this cluster."""
    e = dict(os.environ if base is None else base)
    e['SLURM_CONF'] = self.conf
    e['PATH'] = e.get('PATH', '') + ':/usr/sbin:/sbin'
    return e

  def run(self, *argv, check=True) -> subprocess.CompletedProcess:
    res = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=60)
    if check and res.returncode:
      raise SlurmError(f'{" ".join(argv)}: {(res.stderr or res.stdout).strip()}')
    return res

  # ------------------------------------------------------------------------- daemons

  def _start_munge(self) -> None:
    os.makedirs(self.munge_dir, exist_ok=True)
    key = os.path.join(self.munge_dir, 'munge.key')
    with open(key, 'wb') as f:
      f.write(os.urandom(1024))
    os.chmod(key, 0o400)
    os.chmod(self.munge_dir, 0o700)
    argv = ['munged', '-f', f'--socket={self.munge_socket}', f'--key-file={key}',
            f'--pid-file={self.munge_dir}/munged.pid', f'--log-file={self.munge_dir}/munged.log',
            f'--seed-file={self.munge_dir}/munged.seed']
    self._daemon(argv, self.munge_socket)

  def _daemon(self, argv, ready_file) -> None:
    res = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=60)
    if res.returncode:
      raise SlurmError(f'{argv[0]} did not start: {(res.stderr or res.stdout).strip()[-500:]}')
    self._wait(lambda: os.path.exists(ready_file), 120, f'{argv[0]} did not start ({ready_file} missing)')

  def _wait(self, ready, timeout, message) -> None:
    end = time.time() + timeout
    while time.time() < end:
      if ready():
        return
      time.sleep(0.2)
    raise SlurmError(f'{message}; logs in {self.folder}')

  def _node_state(self) -> str:
    res = self.run('sinfo', '-h', '-n', 'localhost', '-o', '%T', check=False)
    return res.stdout.strip() if res.returncode == 0 else ''

  def start(self) -> 'SlurmCluster':
    missing = missing_binaries()
    if missing:
      raise SlurmError(f'SLURM is not installed ({", ".join(missing)} not found): run `{INSTALL}` as root')
    if os.geteuid() != 0:
      raise SlurmError('the SLURM test cluster runs its daemons as root; run the tests as root')
    for sub in ('state', 'spool'):
      os.makedirs(os.path.join(self.folder, sub), exist_ok=True)
    self._start_munge()
    with open(self.conf, 'w') as f:
      f.write(_conf(self.folder, self.munge_socket, _free_port(), _free_port(), self.cpus))
    self._daemon(['slurmctld', '-f', self.conf], self.pid_files[1])
    self._daemon(['slurmd', '-f', self.conf, '-N', 'localhost'], self.pid_files[0])
    self._wait(lambda: self._node_state().rstrip('*') == 'idle', 120, 'the SLURM node did not become idle')
    return self

  def stop(self) -> None:
    """Cancels what is left and stops slurmd, slurmctld and munged by their pids."""
    if os.path.exists(self.pid_files[1]):
      self.run('scancel', '--user', pwd.getpwuid(os.geteuid()).pw_name, check=False)
    for pid_file in self.pid_files:
      try:
        pid = int(open(pid_file).read().strip())
      except (OSError, ValueError):
        continue
      try:
        os.kill(pid, signal.SIGTERM)
      except ProcessLookupError:
        continue
      end = time.time() + 15
      while time.time() < end and _alive(pid):
        time.sleep(0.1)
      if _alive(pid):
        os.kill(pid, signal.SIGKILL)

  def __enter__(self):
    try:
      return self.start()
    except BaseException:
      self.stop()
      raise

  def __exit__(self, *exc):
    self.stop()

  # ------------------------------------------------------------------------- jobs

  def queue(self, job_id: str) -> dict[str, str]:
    """{array task or job id: state} of the job's entries still in the queue."""
    res = self.run('squeue', '-h', '-r', '-j', str(job_id), '-o', '%i %T', check=False)
    out = {}
    for line in res.stdout.splitlines():
      if line.strip():
        task, state = line.split()
        out[task] = state
    return out

  def wait_for(self, job_id: str, timeout: float = 300, until=None) -> None:
    """Waits until the job has left the queue (or `until(queue)` is true); SlurmError after `timeout` s."""
    end = time.time() + timeout
    while time.time() < end:
      q = self.queue(job_id)
      if (until(q) if until else not q):
        return
      time.sleep(0.5)
    raise SlurmError(f'job {job_id} still queued after {timeout:.0f} s: {self.queue(job_id)}')

  def release_requeued(self, task: str, timeout: float = 120) -> None:
    """Starts a requeued task soon instead of after the begin time SLURM gives it (about 120 s). Waits until the
    task is PENDING (its old instance has ended), then sets its start 2 s later: slurmd refuses a task whose new
    credential is not younger than the revocation of the old one (same second) and fails it for good."""
    self.wait_for(task, timeout, until=lambda q: q.get(task) == 'PENDING')
    self.run('scontrol', 'update', f'JobId={task}', 'StartTime=now+2')

  def job_field(self, task: str, field: str) -> str:
    res = self.run('scontrol', 'show', 'job', task, check=False)
    m = re.search(rf'\b{field}=(\S*)', res.stdout)
    return m.group(1) if m else ''


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  try:  # a zombie child of this process counts as gone
    with open(f'/proc/{pid}/stat') as f:
      return f.read().split(')')[-1].split()[0] != 'Z'
  except OSError:
    return False
