"""Claims on a sweep's trials (vvt.studies.claims): of workers racing for one trial exactly one wins; an owner's
renewals keep it; an expired lease is taken over and its old owner loses; a lost claim stops the owner's trial
(vvt.studies.runner); finished, failed, released and requeued SLURM claims. Every test runs on a local
directory and on an in-memory GCS bucket that enforces generation preconditions as GCS does.

Whether a lease runs out is never left to the machine's speed: the tests of expiry move the claims' clock
(`clock`) themselves, and wait for the renewing thread with far-off guards only; the other leases are long."""
import json
import subprocess
import sys
import threading
import time

import pytest

from vvt.studies import claims
from vvt.studies import runner
from vvt.studies import sweep as sweep_lib


class PreconditionFailed(Exception):
  code = 412


class NotFound(Exception):
  code = 404


class FakeBucket:
  """GCS objects with generations, in memory: reads and writes honour `if_generation_match` (0: must not exist)
  atomically, like the service. `lose_answers`: that many writes land but answer 412 (a retried request)."""
  name = 'bucket'

  def __init__(self):
    self.objects = {}
    self.lock = threading.Lock()
    self.generation = 1_700_000_000_000_000
    self.lose_answers = 0
    self.down = False  # every request fails (a network partition)
    self.refused = 0  # requests failed while down

  def get_blob(self, key):
    if self.down:
      self.refused += 1
      raise ConnectionError('unreachable')
    with self.lock:
      obj = self.objects.get(key)
    return None if obj is None else FakeBlob(self, key, obj[1])

  def blob(self, key):
    return FakeBlob(self, key, None)


class FakeBlob:

  def __init__(self, bucket, key, generation):
    self.bucket, self.name, self.generation = bucket, key, generation

  def download_as_bytes(self, if_generation_match=None):
    with self.bucket.lock:
      obj = self.bucket.objects.get(self.name)
      if obj is None:
        raise NotFound(self.name)
      if if_generation_match is not None and obj[1] != if_generation_match:
        raise PreconditionFailed(self.name)
      return obj[0]

  def upload_from_string(self, data, content_type=None, if_generation_match=None):
    assert content_type == 'application/json'
    if self.bucket.down:
      self.bucket.refused += 1
      raise ConnectionError('unreachable')
    with self.bucket.lock:
      obj = self.bucket.objects.get(self.name)
      if if_generation_match is not None and (obj[1] if obj else 0) != if_generation_match:
        raise PreconditionFailed(self.name)
      self.bucket.generation += 7
      self.bucket.objects[self.name] = (data.encode() if isinstance(data, str) else data, self.bucket.generation)
      self.generation = self.bucket.generation
      if self.bucket.lose_answers:
        self.bucket.lose_answers -= 1
        raise PreconditionFailed(f'{self.name} (the retry of a request that landed)')


@pytest.fixture(params=['local', 'gcs'])
def store(request, tmp_path):
  if request.param == 'local':
    return claims.LocalStore(str(tmp_path / 'trial'))
  return claims.GcsStore('gs://bucket/sweep/trial', FakeBucket())


class Clock:
  """The claims' clock (`time.time()` in vvt.studies.claims), moved only by the test."""

  def __init__(self):
    self.now = time.time()

  def time(self):
    return self.now

  def __getattr__(self, name):  # sleep, strftime, localtime: the real ones
    return getattr(time, name)


@pytest.fixture
def clock(monkeypatch):
  c = Clock()
  monkeypatch.setattr(claims, 'time', c)
  return c


GUARD_S = 60  # a hang guard: the renewing thread answers within a few of its 0.01-0.1 s periods


def wait_until(condition, what):
  deadline = time.time() + GUARD_S
  while not condition():
    assert time.time() < deadline, f'no {what} in {GUARD_S} s'
    time.sleep(0.01)


def worker(name, **slurm):
  return claims.Worker(f'token-{name}', f'host-{name}', 100 + len(name), slurm)


def take(store, who, lease_s=claims.LEASE_S, **kwargs):
  return claims.take('unused', 'trial', who, lease_s, store=store, **kwargs)


def test_of_workers_racing_for_a_trial_exactly_one_wins(store, tmp_path):
  for round_ in range(6):
    trial_store = (claims.LocalStore(str(tmp_path / f'trial{round_}')) if isinstance(store, claims.LocalStore)
                   else claims.GcsStore(f'gs://bucket/sweep/trial{round_}', store.bucket))
    barrier, won = threading.Barrier(8), []

    def go(i, trial_store=trial_store, barrier=barrier, won=won):
      barrier.wait()
      out = take(trial_store, worker(f'w{i}'))
      if out.claim:
        won.append(out.claim)
      else:
        assert out.status == 'claimed' and out.record['token'].startswith('token-w')

    threads = [threading.Thread(target=go, args=(i,)) for i in range(8)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    assert len(won) == 1
    record = claims.read('unused', trial_store)
    assert record['token'] == won[0].record['token'] and record['state'] == 'claimed'
    assert record['attempts'] == 1 and record['requeues'] == 0


def test_an_owner_renews_its_lease_and_keeps_the_trial(store, clock):
  owner = take(store, worker('a'), lease_s=1.0).claim
  leases = claims.Leases(renew_s=0.01)
  leases.add(owner)
  first_until = owner.record['lease_until']
  try:
    for _ in range(8):  # 2 s of the claims' clock: twice the lease
      clock.now += 0.25
      wait_until(lambda: owner.record['lease_until'] >= clock.now + 1.0, 'renewal')
      out = take(store, worker('b'), lease_s=1.0)
      assert out.claim is None and out.status == 'claimed', out
  finally:
    leases.stop()
  assert owner.lost is None and owner.record['lease_until'] > first_until + 1.0
  assert claims.read('unused', store)['token'] == 'token-a'


def test_an_expired_lease_is_taken_over_and_its_owner_loses_the_claim(store, clock):
  owner = take(store, worker('a'), lease_s=1.0).claim
  assert claims.set_status(owner, 'running')
  assert take(store, worker('b'), lease_s=1.0).status == 'running'  # live: left alone
  clock.now += 1.05
  assert claims.read('unused', store)['state'] == claims.EXPIRED
  out = take(store, worker('b'), lease_s=5)
  assert out.claim and out.record['host'] == 'host-b'
  assert (out.record['attempts'], out.record['requeues']) == (2, 1)
  assert out.record['previous'] == {'status': 'running', 'host': 'host-a', 'pid': 101}
  assert not claims.renew(owner) and 'lease ran out' in owner.lost
  assert not claims.set_status(owner, 'finished')
  assert claims.read('unused', store)['token'] == 'token-b'


def test_a_lost_claim_is_reported_to_its_owner_at_the_next_renewal(store, clock):
  owner = take(store, worker('a'), lease_s=5).claim
  lost = []
  leases = claims.Leases(renew_s=0.1, on_lost=lost.append)
  leases.add(owner)
  try:
    record, gen = store.read()  # another worker writes over the owner's claim (a clock far ahead, say)
    assert store.write({**record, 'token': 'token-b', 'host': 'host-b', 'pid': 7}, gen)
    wait_until(lambda: lost, 'report of the lost claim')
  finally:
    leases.stop()
  assert lost == [owner] and owner.lost == 'another worker holds it now: host-b pid 7'
  assert not claims.set_status(owner, 'finished') and claims.read('unused', store)['token'] == 'token-b'


def test_finished_failed_and_released_claims(store):
  a = take(store, worker('a')).claim
  assert claims.set_status(a, 'failed', 'vvt train: error: bad data')
  assert claims.read('unused', store)['state'] == 'failed'
  out = take(store, worker('b'), retry_failed_before=time.time() - 10)  # failed since b started: left alone
  assert out.claim is None and out.status == 'failed' and out.record['error'] == 'vvt train: error: bad data'
  assert take(store, worker('b')).claim is None  # and never retried without retry_failed_before
  b = take(store, worker('b'), retry_failed_before=time.time() + 1).claim  # an earlier run's failure: retried
  assert b and (b.record['attempts'], b.record['requeues']) == (2, 0)
  assert claims.set_status(b, 'released', 'interrupted')  # Ctrl-C / SIGTERM: free for the next worker
  c = take(store, worker('c')).claim
  assert c and (c.record['attempts'], c.record['requeues']) == (3, 1)
  assert claims.set_status(c, 'finished') and c.record['lease_until'] is None
  out = take(store, worker('d'), lease_s=0.01)
  assert out.claim is None and out.status == 'finished'
  time.sleep(0.05)
  assert take(store, worker('d')).claim is None  # a finished trial has no lease to expire
  assert take(store, worker('d'), retake_finished=True).claim  # its final evaluation was deleted: train again


def test_a_requeued_slurm_array_task_takes_its_own_claim_at_once(store):
  first = worker('a', array_job_id='77', array_task_id='3', job_id='80')
  take(store, first, lease_s=60)
  other_task = worker('b', array_job_id='77', array_task_id='4', job_id='81', restart_count='1')
  assert take(store, other_task).claim is None
  requeued = claims.Worker('token-a2', 'host-c', 5, {'array_job_id': '77', 'array_task_id': '3', 'job_id': '80',
                                                      'restart_count': '1'})
  out = take(store, requeued)
  assert out.claim and out.record['requeues'] == 1 and out.record['slurm']['restart_count'] == '1'
  assert claims.holder(out.record) == 'host-c pid 5 (SLURM job 77_3)'


def test_a_write_that_landed_but_answered_412_is_won(tmp_path):
  bucket = FakeBucket()
  bucket.lose_answers = 1
  store = claims.GcsStore('gs://bucket/sweep/trial', bucket)
  out = take(store, worker('a'))
  assert out.claim and claims.read('unused', store)['token'] == 'token-a'
  bucket.lose_answers = 1
  assert claims.renew(out.claim) and out.claim.lost is None


def test_a_gs_sweep_keeps_each_claim_in_the_trial_s_state_json(monkeypatch):
  bucket = FakeBucket()
  monkeypatch.setattr(claims, 'gcs_bucket', lambda name: bucket if name == 'bucket' else None)
  monkeypatch.setattr(claims, '_GCS_BUCKETS', {})
  out = claims.take('gs://bucket/runs/s/attention=space', 'attention=space', worker('a'))
  assert out.claim and list(bucket.objects) == ['runs/s/attention=space/state.json']
  data, generation = bucket.objects['runs/s/attention=space/state.json']
  assert json.loads(data)['trial'] == 'attention=space' and out.claim.generation == generation
  assert claims.read('gs://bucket/runs/s/attention=space')['state'] == 'claimed'
  assert claims.take('gs://bucket/runs/s/attention=space', 'attention=space', worker('b')).claim is None


def test_a_gs_sweep_without_google_cloud_storage_says_what_to_install(monkeypatch):
  monkeypatch.setitem(sys.modules, 'google.cloud.storage', None)
  monkeypatch.setitem(sys.modules, 'google.cloud', None)
  monkeypatch.setattr(claims, '_GCS_BUCKETS', {})
  with pytest.raises(ImportError, match=r'needs google-cloud-storage: pip install "vvt\[gcs\]"'):
    claims.store_for('gs://some-bucket/s/t')


def test_the_local_claim_keeps_its_two_newest_generations(tmp_path):
  store = claims.LocalStore(str(tmp_path / 'trial'))
  claim = take(store, worker('a')).claim
  for _ in range(5):
    assert claims.renew(claim)
  assert sorted((tmp_path / 'trial' / 'claims').iterdir())[-1].name == f'{claim.generation:012d}.json'
  assert len(list((tmp_path / 'trial' / 'claims').iterdir())) == 2
  state = json.loads((tmp_path / 'trial' / 'state.json').read_text())
  assert state == claim.record
  assert store.write({'stale': True}, claim.generation - 1) is None  # an old generation never wins


def test_a_worker_stops_a_trial_whose_claim_it_lost(tmp_path):
  sweep_dir = str(tmp_path)
  trial = sweep_lib.Trial('seed=0', {'seed': 0})
  claim = claims.take(str(tmp_path / 'seed=0'), 'seed=0', worker('a')).claim
  said = []
  w = runner._Worker([trial], 'study.py', [], sweep_dir, 1, said.append, {}, 5.0, 0.5)
  log_path = tmp_path / 'train.log'
  log = open(log_path, 'a')
  proc = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], stdout=log)
  r = runner._Running(trial, 1, proc, log, str(log_path), time.time(), claim)
  w.running.append(r)
  leases = claims.Leases(renew_s=0.1)
  leases.add(claim)
  try:
    record, gen = claim.store.read()
    claim.store.write({**record, 'token': 'token-b', 'host': 'host-b', 'pid': 7}, gen)
    wait_until(lambda: claim.lost is not None, 'report of the lost claim')
    runner._poll(w, r, leases)
  finally:
    leases.stop()
  assert proc.returncode == -9 and w.running == [] and w.todo == [(1, trial)]
  assert said == ['[sweep] (1/1) stopped seed=0 here: lost its claim, another worker holds it now: host-b pid 7 '
                  f'(elapsed {said[0].rsplit("elapsed ", 1)[1]}']


def test_a_stopped_worker_lets_its_trials_save_and_releases_their_claims(tmp_path):
  trial = sweep_lib.Trial('seed=0', {'seed': 0})
  (tmp_path / 'seed=0').mkdir()
  claim = claims.take(str(tmp_path / 'seed=0'), 'seed=0', worker('a')).claim
  w = runner._Worker([trial], 'study.py', [], str(tmp_path), 1, print, {}, 5.0, 0.5)
  log = open(tmp_path / 'train.log', 'a')
  saver = ('import signal, sys, time\n'
           'signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n'
           'print("ready", flush=True)\n'
           'time.sleep(60)\n')
  proc = subprocess.Popen([sys.executable, '-c', saver], stdout=subprocess.PIPE, text=True)
  assert proc.stdout.readline() == 'ready\n'
  w.running.append(runner._Running(trial, 1, proc, log, str(tmp_path / 'train.log'), time.time(), claim))
  runner._stop_all(w)
  assert proc.returncode == 143  # it got SIGTERM (the trainer saves a checkpoint on it) and was waited for
  record = claims.read(str(tmp_path / 'seed=0'))
  assert (record['state'], record['error'], record['lease_until']) == ('released', 'interrupted', None)
  assert json.loads((tmp_path / 'seed=0' / 'trial.json').read_text())['status'] == 'interrupted'
  with pytest.raises(KeyboardInterrupt) as stopped:
    runner._on_sigterm(15, None)
  assert stopped.value.exit_code == 143


def test_an_owner_cut_off_from_the_store_gives_the_trial_up_when_its_lease_runs_out(clock):
  bucket = FakeBucket()
  store = claims.GcsStore('gs://bucket/sweep/trial', bucket)
  owner = take(store, worker('a'), lease_s=1.0).claim
  lost = []
  leases = claims.Leases(renew_s=0.01, on_lost=lost.append)
  leases.add(owner)
  try:
    bucket.down = True
    clock.now += 0.5
    refused = bucket.refused
    wait_until(lambda: bucket.refused >= refused + 2, 'renewal')  # one of them tried at the new time
    assert not lost and claims.check(owner)  # renewals fail, the lease still holds
    clock.now += 0.6
    wait_until(lambda: lost, 'report of the lease run out')
  finally:
    leases.stop()
  assert lost == [owner] and not claims.check(owner) and 'lease ran out' in owner.lost
  bucket.down = False
  assert claims.read('unused', store)['state'] == claims.EXPIRED  # and another worker may take it over
  assert take(store, worker('b')).claim


def test_a_worker_tries_a_claim_it_cannot_read_again_later_and_gives_up_the_fifth_time(tmp_path, monkeypatch):
  def unreachable(*args, **kwargs):
    raise ConnectionError('bucket unreachable')

  monkeypatch.setattr(claims, 'take', unreachable)
  trial, said = sweep_lib.Trial('seed=0', {'seed': 0}), []
  w = runner._Worker([trial], 'study.py', [], str(tmp_path), 1, said.append, {}, 5.0, 60.0)
  w.todo.append((1, trial))
  for n in range(4):
    w.next_try.clear()
    runner._fill(w, leases=None)
    assert w.todo == [(1, trial)] and w.next_try['seed=0'] > time.time() and len(said) == n + 1
  assert said[0] == ('[sweep] (1/1) could not read the claim of seed=0 (ConnectionError: bucket unreachable); '
                     'trying again in 60 s')
  w.next_try.clear()
  with pytest.raises(ConnectionError):
    runner._fill(w, leases=None)
