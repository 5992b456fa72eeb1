"""One video list converted by many workers on any hosts: `vvt data convert --worker I/N` (or a SLURM array).

Shard s belongs to worker s % N. Worker I decodes only the rows of its shards and writes those shards and its own
manifest, OUTPUT.manifest.worker-<I>-of-<N>.json (the manifest's fields over its rows and shards, `worker: [I, N]`,
rewritten after each shard), so re-running a worker keeps its finished shards as a one-machine re-run does. The
worker that finishes while every worker's manifest is complete assembles OUTPUT.manifest.json: every row in list
order with its status, every shard, the failures and the totals over all workers, i.e. what one machine writes for
the same list and options (the shards' bytes are the same too). `vvt data convert ... --assemble` does that step
on its own and names the workers still missing. Under a SLURM job array the worker defaults to the task's place in
the array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) of SLURM_ARRAY_TASK_COUNT.
"""
import json
import os
import re

from vvt import fileio

Worker = tuple  # (index, count)


def parse_worker(text: str) -> Worker:
  """'I/N' -> (I, N), 0 <= I < N; ValueError naming --worker otherwise."""
  m = re.fullmatch(r'\s*(\d+)\s*/\s*(\d+)\s*', text or '')
  if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
    raise ValueError(f'--worker {text!r}: expected I/N with 0 <= I < N, e.g. 0/4')
  return int(m.group(1)), int(m.group(2))


def from_slurm(environ=None):
  """(I, N) of a SLURM array task (its place in the array, the array's size), or None outside an array."""
  environ = os.environ if environ is None else environ
  if 'SLURM_ARRAY_TASK_ID' not in environ:
    return None
  task, count = int(environ['SLURM_ARRAY_TASK_ID']), int(environ.get('SLURM_ARRAY_TASK_COUNT', 1))
  first, last = int(environ.get('SLURM_ARRAY_TASK_MIN', 0)), int(environ.get('SLURM_ARRAY_TASK_MAX', count - 1))
  if last - first + 1 != count:
    raise ValueError(f'SLURM array {first}-{last} holds {count} tasks: a conversion array must be one range '
                     '(--array=0-N), or give --worker I/N')
  return task - first, count


def checked_worker(worker, num_shards: int):
  """None for one machine (no worker, or N = 1), else (I, N) checked against the shards."""
  if worker is None or worker[1] == 1:
    return None
  index, count = worker
  if not 0 <= index < count:
    raise ValueError(f'--worker {index}/{count}: the index must be in 0..{count - 1}')
  if count > num_shards:
    raise ValueError(f'--worker {index}/{count}: more workers than shards ({num_shards}); use --shards >= {count}')
  return tuple(worker)


def shards_of(worker, num_shards: int) -> set:
  """The shards worker (I, N) writes: s % N == I (all of them for one machine)."""
  if not worker:
    return set(range(num_shards))
  return {s for s in range(num_shards) if s % worker[1] == worker[0]}


def manifest_path(output: str, worker=None) -> str:
  """OUTPUT.manifest.json, or a worker's OUTPUT.manifest.worker-<I>-of-<N>.json."""
  if not worker:
    return f'{output}.manifest.json'
  return f'{output}.manifest.worker-{worker[0]:05d}-of-{worker[1]:05d}.json'


def _read(path: str):
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except FileNotFoundError:
    return None
  except ValueError as e:
    raise ValueError(f'{path}: not valid JSON ({e}); re-run that worker') from None


def worker_count(output: str) -> int:
  """N of the worker manifests next to OUTPUT (for --assemble); ValueError if none or several N."""
  folder, base = os.path.split(os.path.abspath(output))
  pattern = re.compile(re.escape(base) + r'\.manifest\.worker-\d+-of-(\d+)\.json$')
  counts = {int(m.group(1)) for m in map(pattern.match, os.listdir(folder or '.')) if m}
  if len(counts) != 1:
    raise ValueError(f'{output}: ' + ('no worker manifests (run the workers with --worker I/N first)' if not counts
                                      else f'worker manifests of {sorted(counts)} workers; remove the old ones'))
  return counts.pop()


def _totals(videos, shards) -> dict:
  ok = [v for v in videos if v.get('status') == 'ok']
  return {'videos': len(videos), 'ok': len(ok),
          'failed': sum(1 for v in videos if v.get('status') in ('failed', 'partial')),
          'partial': sum(1 for v in videos if v.get('status') == 'partial'),
          'existing': sum(sh['videos'] for sh in shards if sh.get('status') == 'existing'),
          'frames': int(sum(v.get('frames') or 0 for v in ok))}


def assemble(output: str, count: int) -> dict:
  """OUTPUT.manifest.json from the N complete worker manifests (written atomically); the manifest.
  ValueError naming the workers that are missing or not finished, or options that differ between workers."""
  parts = {i: _read(manifest_path(output, (i, count))) for i in range(count)}
  missing = [f'{i}/{count}' for i, m in parts.items() if not (m and m.get('complete'))]
  if missing:
    raise ValueError(f'{output}: worker(s) {", ".join(missing)} not finished (their manifests are missing or '
                     'incomplete): run them, then assemble')
  first = parts[0]
  for i, m in parts.items():
    for key in ('input', 'options', 'pattern'):
      if m.get(key) != first.get(key):
        raise ValueError(f'{manifest_path(output, (i, count))}: {key} differs from worker 0\'s; re-run the '
                         'workers with the same arguments')
  videos = sorted((v for m in parts.values() for v in m['videos']), key=lambda v: v['index'])
  shards = sorted((sh for m in parts.values() for sh in m['shards']), key=lambda sh: sh['file'])
  manifest = {k: v for k, v in first.items() if k != 'worker'}
  manifest.update(
      path=manifest_path(output), complete=True, totals=_totals(videos, shards), shards=shards, videos=videos,
      failures=[{'index': v['index'], 'path': v['path'], 'status': v['status'], 'reason': v.get('reason')}
                for v in videos if v.get('status') in ('failed', 'partial')])
  fileio.atomic_write(manifest_path(output), lambda f: json.dump(manifest, f, indent=1))
  return manifest


def assemble_if_complete(output: str, count: int):
  """The assembled manifest if every worker has finished (this one being the last), else None."""
  for i in range(count):
    m = _read(manifest_path(output, (i, count)))
    if not (m and m.get('complete')):
      return None
  return assemble(output, count)
