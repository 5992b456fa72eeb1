"""Claims on a sweep's trials: which worker trains a trial, under a lease that its owner renews.

Any number of `vvt sweep` workers (processes on one host or many, the sweep directory local, on a shared
filesystem or on GCS) take trials one at a time. A trial's claim is one record with a *generation*, written
only by compare-and-swap: a write names the generation it replaces (0: none yet) and fails if another
writer got there first. So exactly one worker wins a free trial, and an owner's renewal fails as soon as
someone else has taken the trial over.

  record: {trial, status, token, host, pid, since, lease_until, lease_s, attempts, requeues, slurm, processes, error}
  status: claimed (taken, the trainer starting) | running | finished | failed | released (stopped by its
          owner: Ctrl-C, SIGTERM) ; read back, a claimed / running record past `lease_until` is
          `lease expired` (its host died, or the worker was killed) and may be taken over.

The owner renews its lease every `renew_s` (a `Leases` thread) while the trial runs, and gives it up by
itself once its own lease has run out without a renewal (it cannot know whether another worker took over).
A worker that finds a live claim leaves the trial alone; an expired one it takes over (`requeues` + 1) and
the trainer resumes the trial from its checkpoints. A SLURM array task that was requeued takes over its own
earlier claim at once (SLURM runs one copy of an array task at a time).

Where the claim lives (TRIAL = SWEEP/<trial>):
  local / shared filesystem  TRIAL/claims/<generation>.json: a new file per write, created exclusively
                             (a hard link of a complete temporary file: it fails if the name exists, like
                             O_CREAT|O_EXCL, and a reader never sees half a record); the newest is the claim,
                             the two newest are kept.
  gs://bucket/...            the object TRIAL/state.json, written with `if_generation_match` (0 to create,
                             the owner's generation to renew); needs the `gcs` extra (google-cloud-storage).
Either way TRIAL/state.json holds the current record for people and tools to read (on GCS it is the claim).
Nothing here imports JAX.
"""
from __future__ import annotations

import dataclasses
import errno
import json
import os
import socket
import threading
import time
from typing import Callable, Optional
import uuid

from vvt import fileio

LEASE_S = 180.0   # a claim not renewed for this long is expired (its worker is taken for dead)
CLAIMS_DIR = 'claims'
STATE_FILE = 'state.json'
LIVE = ('claimed', 'running')
DONE = ('finished', 'failed', 'released')
EXPIRED = 'lease expired'
_KEEP = 2
_SLURM = {'job_id': 'SLURM_JOB_ID', 'array_job_id': 'SLURM_ARRAY_JOB_ID',
          'array_task_id': 'SLURM_ARRAY_TASK_ID', 'restart_count': 'SLURM_RESTART_COUNT'}


def default_renew_s(lease_s: float) -> float:
  """How often an owner renews: a sixth of the lease (at least 0.2 s)."""
  return max(0.2, lease_s / 6)


def clock_text(t: Optional[float]) -> str:
  return time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t)) if t else '?'


# ----------------------------------------------------------------------------- stores


_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV)


def _create_exclusive(tmp: str, path: str) -> bool:
  """Creates `path` with the contents of `tmp` unless it exists: a hard link, or on a filesystem without
  them O_CREAT|O_EXCL and a copy (a reader that meets the half-written file reads it again)."""
  try:
    os.link(tmp, path)
    return True
  except FileExistsError:
    return False
  except OSError as e:
    if e.errno not in _NO_LINKS:
      raise
  try:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
  except FileExistsError:
    return False
  with os.fdopen(fd, 'w') as f, open(tmp) as src:
    f.write(src.read())
    f.flush()
    os.fsync(f.fileno())
  return True


class LocalStore:
  """A trial's claim on a filesystem: TRIAL/claims/<generation>.json, each created exclusively."""

  def __init__(self, workdir: str):
    self.workdir = workdir
    self.folder = os.path.join(workdir, CLAIMS_DIR)

  def _generations(self) -> list[int]:
    try:
      names = os.listdir(self.folder)
    except FileNotFoundError:
      return []
    return sorted(int(n[:-5]) for n in names if n.endswith('.json') and n[:-5].isdigit())

  def _path(self, generation: int) -> str:
    return os.path.join(self.folder, f'{generation:012d}.json')

  def read(self) -> Optional[tuple[dict, int]]:
    """(record, generation) of the newest claim, or None."""
    for _ in range(20):
      gens = self._generations()
      if not gens:
        return None
      try:
        with open(self._path(gens[-1])) as f:
          return json.load(f), gens[-1]
      except FileNotFoundError:  # superseded and removed between listing and reading: list again
        continue
      except ValueError:  # being written (a filesystem without hard links): read again
        time.sleep(0.05)
    raise OSError(f'{self.folder}: the claim changes too fast to be read')

  def write(self, record: dict, if_generation_match: int) -> Optional[int]:
    """Writes generation `if_generation_match + 1`; None if that exists or a newer one does."""
    os.makedirs(self.folder, exist_ok=True)
    gen = if_generation_match + 1
    tmp = os.path.join(self.folder, f'.{uuid.uuid4().hex}.tmp')
    with open(tmp, 'w') as f:
      json.dump(record, f, indent=2)
      f.flush()
      os.fsync(f.fileno())
    try:
      if not _create_exclusive(tmp, self._path(gen)):
        return None
    finally:
      os.unlink(tmp)
    if self._generations()[-1] != gen:  # written after a newer generation had replaced `gen`: we lost
      os.unlink(self._path(gen))
      return None
    for old in self._generations()[:-_KEEP]:
      try:
        os.unlink(self._path(old))
      except FileNotFoundError:
        pass
    return gen

  def mirror(self, record: dict) -> None:
    """TRIAL/state.json: the current record, for people and tools (the claim is TRIAL/claims/)."""
    fileio.atomic_write(os.path.join(self.workdir, STATE_FILE), lambda f: json.dump(record, f, indent=2))


def _precondition_failed(e: BaseException) -> bool:
  return getattr(e, 'code', None) == 412


def _not_found(e: BaseException) -> bool:
  return getattr(e, 'code', None) == 404


def gcs_bucket(name: str):
  """The google-cloud-storage bucket `name` (the `gcs` extra)."""
  try:
    from google.cloud import storage
  except ImportError:
    raise ImportError('a sweep on gs:// needs google-cloud-storage: pip install "vvt[gcs]"') from None
  return storage.Client().bucket(name)


class GcsStore:
  """A trial's claim on GCS: the object TRIAL/state.json, written with generation-match preconditions."""

  def __init__(self, workdir: str, bucket=None):
    rest = workdir.split('://', 1)[1]
    name, _, prefix = rest.partition('/')
    self.bucket = bucket if bucket is not None else gcs_bucket(name)
    self.key = '/'.join(p for p in (prefix.strip('/'), STATE_FILE) if p)

  def read(self) -> Optional[tuple[dict, int]]:
    for _ in range(20):
      blob = self.bucket.get_blob(self.key)
      if blob is None:
        return None
      try:
        data = blob.download_as_bytes(if_generation_match=blob.generation)
      except Exception as e:
        if _precondition_failed(e) or _not_found(e):  # replaced between the two requests: read again
          continue
        raise
      return json.loads(data), int(blob.generation)
    raise OSError(f'gs://{self.bucket.name}/{self.key}: the claim changes too fast to be read')

  def write(self, record: dict, if_generation_match: int) -> Optional[int]:
    blob = self.bucket.blob(self.key)
    try:
      blob.upload_from_string(json.dumps(record, indent=2), content_type='application/json',
                              if_generation_match=if_generation_match)
    except Exception as e:
      if _precondition_failed(e):
        return None
      raise
    return int(blob.generation)

  def mirror(self, record: dict) -> None:
    del record  # the claim object is TRIAL/state.json itself


_GCS_BUCKETS: dict = {}


def store_for(workdir: str):
  """The claim store of the trial directory `workdir` (a path, or a gs:// URL)."""
  if workdir.startswith('gs://'):
    name = workdir[5:].split('/', 1)[0]
    if name not in _GCS_BUCKETS:
      _GCS_BUCKETS[name] = gcs_bucket(name)
    return GcsStore(workdir, _GCS_BUCKETS[name])
  if fileio.is_url(workdir):
    raise ValueError(f'{workdir}: claims on a sweep directory work on a filesystem or gs:// only')
  return LocalStore(workdir)


# ----------------------------------------------------------------------------- a worker and its claims


def slurm_ids(environ=None) -> dict:
  """The SLURM job of this process ({} outside SLURM): job_id, array_job_id, array_task_id, restart_count."""
  environ = os.environ if environ is None else environ
  return {k: environ[v] for k, v in _SLURM.items() if environ.get(v)}


@dataclasses.dataclass(frozen=True)
class Worker:
  """Who claims: a token unique to this worker, its host, process and SLURM job; `processes` > 1: process 0 of a
  multi-process job that trains each trial on all its processes (`vvt.studies.slice`)."""
  token: str
  host: str
  pid: int
  slurm: dict
  processes: int = 1

  @classmethod
  def here(cls, processes: int = 1) -> 'Worker':
    return cls(uuid.uuid4().hex, socket.gethostname(), os.getpid(), slurm_ids(), processes)


def status_of(record: Optional[dict], now: Optional[float] = None) -> str:
  """The record's status as read: `lease expired` for a live status past its lease; None -> pending."""
  if not record:
    return 'pending'
  status = record.get('status', 'claimed')
  if status in LIVE and (record.get('lease_until') or 0) <= (time.time() if now is None else now):
    return EXPIRED
  return status


def _requeued_self(record: dict, me: Worker) -> bool:
  """The record's owner is an earlier run of this very SLURM array task (requeued: that run is gone)."""
  theirs, mine = record.get('slurm') or {}, me.slurm
  if not mine.get('array_task_id') or record.get('token') == me.token:
    return False
  same = all(theirs.get(k) == mine.get(k) for k in ('array_job_id', 'array_task_id'))
  return same and int(theirs.get('restart_count', 0)) < int(mine.get('restart_count', 0))


@dataclasses.dataclass
class Claim:
  """A claim this worker holds: its record and generation; `lost` says why it was lost (else None)."""
  store: object
  record: dict
  generation: int
  lease_s: float
  lost: Optional[str] = None
  lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

  @property
  def trial(self) -> str:
    return self.record['trial']


def holder(record: dict) -> str:
  """`host pid 123 (SLURM job 45_6)` of a claim record."""
  slurm = record.get('slurm') or {}
  job = (f'{slurm["array_job_id"]}_{slurm.get("array_task_id", "")}' if slurm.get('array_job_id')
         else slurm.get('job_id'))
  slice_of = f' (process 0 of {record["processes"]})' if record.get('processes', 1) > 1 else ''
  return f'{record.get("host", "?")} pid {record.get("pid", "?")}{slice_of}' + (f' (SLURM job {job})' if job else '')


@dataclasses.dataclass(frozen=True)
class Outcome:
  """What `take` found: a Claim won, or the record and status that kept the trial from this worker."""
  claim: Optional[Claim]
  status: str
  record: Optional[dict]


def _new_record(trial: str, me: Worker, lease_s: float, old: Optional[dict], now: float) -> dict:
  old = old or {}
  taken_over = old.get('status') in (*LIVE, 'released')  # its worker died, was killed or stopped early
  return {'trial': trial, 'status': 'claimed', 'token': me.token, 'host': me.host, 'pid': me.pid,
          'since': now, 'lease_until': now + lease_s, 'lease_s': lease_s,
          'attempts': int(old.get('attempts', 0)) + 1,
          'requeues': int(old.get('requeues', 0)) + (1 if taken_over else 0),
          'slurm': me.slurm, 'processes': me.processes, 'error': None,
          'previous': {k: old.get(k) for k in ('status', 'host', 'pid')} if old else None}


def take(workdir: str, trial: str, me: Worker, lease_s: float = LEASE_S,
         retry_failed_before: Optional[float] = None, retake_finished: bool = False, store=None) -> Outcome:
  """Claims the trial in `workdir` unless a live claim holds it, it finished (unless `retake_finished`:
  its final evaluation is gone), or it failed since `retry_failed_before` (a failure before that, or a
  released claim, is taken again; None: never retried).

  Exactly one of several workers racing for one trial wins (the generation-matched write).
  """
  store = store or store_for(workdir)
  now = time.time()
  current = store.read()
  record, gen = current if current else (None, 0)
  status = status_of(record, now)
  if status in LIVE and not _requeued_self(record, me):
    return Outcome(None, status, record)
  if status == 'finished' and not retake_finished:
    return Outcome(None, status, record)
  failed_at = (record or {}).get('updated') or (record or {}).get('since') or 0
  if status == 'failed' and (retry_failed_before is None or failed_at >= retry_failed_before):
    return Outcome(None, status, record)
  new = _new_record(trial, me, lease_s, record, now)
  won = store.write(new, gen)
  if won is None:
    again = store.read()
    if again and again[0].get('token') == me.token:  # our write landed, its answer did not (a retried request)
      won = again[1]
    else:
      record = again[0] if again else None
      return Outcome(None, status_of(record), record)
  store.mirror(new)
  return Outcome(Claim(store, new, won, lease_s), 'claimed', new)


def _ran_out(claim: Claim, now: float) -> bool:
  """Whether the owner's live lease has run out by its own clock (then another worker may own the trial)."""
  until = claim.record.get('lease_until')
  if claim.record.get('status') in LIVE and until and now >= until:
    claim.lost = claim.lost or (f'its lease ran out at {clock_text(until)} before it was renewed (another '
                                'worker may have taken the trial over)')
  return claim.lost is not None


def check(claim: Claim, now: Optional[float] = None) -> bool:
  """True while the claim is held: not lost, its lease not run out (a stalled renewal thread, a store that
  did not answer). Sets `claim.lost` otherwise."""
  with claim.lock:
    return not _ran_out(claim, time.time() if now is None else now)


def _write(claim: Claim, changes: dict, now: float) -> bool:
  """Writes the owner's record with `changes` over its generation; False (and `claim.lost`) if lost.

  A store error while renewing is left to the next renewal (the lease decides); a final status is tried
  again a few times, then the error is raised."""
  with claim.lock:
    if _ran_out(claim, now):
      return False
    record = {**claim.record, **changes}
    for attempt in range(4):
      try:
        gen = claim.store.write(record, claim.generation)
      except Exception:
        if changes.get('status') not in DONE:
          return True
        if attempt == 3:
          raise
        time.sleep(0.5 * 2 ** attempt)
        continue
      if gen is not None:
        break
      current = claim.store.read()
      if not current or current[0].get('token') != claim.record['token']:
        claim.lost = f'another worker holds it now: {holder(current[0]) if current else "nobody"}'
        return False
      if current[0] == record:  # our write landed, its answer did not
        gen = current[1]
        break
      claim.generation = current[1]  # an earlier write of ours landed unanswered: write over it
    if gen is None:
      return True
    claim.record, claim.generation = record, gen
    claim.store.mirror(record)
    return True


def renew(claim: Claim, now: Optional[float] = None) -> bool:
  """Extends the owner's lease by `lease_s` from now; False if the claim was lost (see `claim.lost`)."""
  now = time.time() if now is None else now
  return _write(claim, {'lease_until': now + claim.lease_s}, now)


def set_status(claim: Claim, status: str, error: Optional[str] = None) -> bool:
  """Records the trial's status: running (lease renewed too), or finished | failed | released (the claim
  ends: no lease). False if the claim was lost."""
  now = time.time()
  changes = {'status': status, 'error': error, 'updated': now}
  changes['lease_until'] = now + claim.lease_s if status in LIVE else None
  return _write(claim, changes, now)


def read(workdir: str, store=None) -> Optional[dict]:
  """The trial's claim record with its status as read (`lease expired` where it is), or None."""
  current = (store or store_for(workdir)).read()
  if not current:
    return None
  record = dict(current[0])
  record['state'] = status_of(record)
  return record


class Leases:
  """A thread that renews the held claims every `renew_s` until `stop()`; a lost claim gets `lost` set
  and `on_lost(claim)` called (from the thread)."""

  def __init__(self, renew_s: float, on_lost: Callable[[Claim], None] = lambda c: None):
    self.renew_s = renew_s
    self.on_lost = on_lost
    self._claims: dict[str, Claim] = {}
    self._mutex = threading.Lock()
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._loop, name='vvt-leases', daemon=True)
    self._thread.start()

  def add(self, claim: Claim) -> None:
    with self._mutex:
      self._claims[claim.trial] = claim

  def remove(self, claim: Claim) -> None:
    with self._mutex:
      self._claims.pop(claim.trial, None)

  def _loop(self) -> None:
    while not self._stop.wait(self.renew_s):
      with self._mutex:
        held = list(self._claims.values())
      for claim in held:
        try:
          held_still = not claim.lost and renew(claim)
        except Exception:  # a store that does not answer: the lease decides
          held_still = check(claim)
        if not held_still:
          self.remove(claim)
          self.on_lost(claim)

  def stop(self) -> None:
    self._stop.set()
    self._thread.join()
