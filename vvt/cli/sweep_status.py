"""`vvt sweep --status DIR`: the state of every trial of a sweep, as its workers left it.

  vvt sweep --status runs/schemes

One line per trial: pending (not started, or interrupted: resumes), claimed (a worker took it: host, pid,
since; the trainer is starting), running, finished, failed (the last error line) or lease expired (its
worker stopped renewing: it died or was killed; the next worker takes it over), with the step reached, the
attempts and requeues, and the SLURM job of the worker. Reads DIR/sweep.json and each trial's claim
(`vvt.studies.claims`); runs nothing, writes nothing.
"""
from vvt import fileio
from vvt.cli import common

STATES = ('pending', 'claimed', 'running', 'finished', 'failed', 'lease expired')


def _slurm(claim: dict) -> str:
  s = claim.get('slurm') or {}
  if s.get('array_job_id'):
    return f'{s["array_job_id"]}_{s.get("array_task_id", "")}'
  return s.get('job_id') or '—'


def trial_line(name: str, state: dict) -> dict:
  """{column: text} of one trial for the status table."""
  from vvt.studies import claims
  claim = state.get('claim') or {}
  shown = state['status'] if state['status'] in STATES else 'pending'
  detail = state['detail'] or ''
  if shown == 'finished':
    detail = ''
  elif shown == 'pending' and state['status'] == 'partial':
    detail = f'{detail}: resumes from its checkpoint'
  if claim:  # the worker has its own columns
    who = claims.holder(claim)
    detail = detail.replace(f'{who}, ', '').replace(f', on {who}', '').replace(f'{who} ', '')
  worker = f'{claim["host"]} pid {claim["pid"]}' if claim.get('host') else '—'
  return {'trial': name, 'state': shown, 'step': '—' if state['step'] is None else str(state['step']),
          'attempts': str(claim.get('attempts', 0)), 'requeues': str(claim.get('requeues', 0)),
          'worker': worker, 'since': claims.clock_text(claim['since']) if claim.get('since') else '—',
          'slurm': _slurm(claim) if claim else '—', 'detail': detail}


def table(sweep_dir: str) -> list[dict]:
  """[{column: text}] for every trial of the sweep in `sweep_dir`, in sweep order."""
  from vvt.studies import results
  listed, _ = results.sweep_trials(sweep_dir)
  return [trial_line(name, results.trial_state(fileio.join(sweep_dir, name))) for name, _ in listed]


def print_status(sweep_dir: str, out=print) -> int:
  """Prints the status table and a count per state; UsageError for a directory without a sweep."""
  from vvt.studies import results
  if not fileio.exists(sweep_dir):
    raise common.UsageError(f'no such sweep directory: {sweep_dir}')
  try:
    rows = table(sweep_dir)
  except FileNotFoundError as e:
    raise common.UsageError(str(e)) from None
  if not rows:
    raise common.UsageError(f'{sweep_dir} holds no trials: no {results.SWEEP_FILE} and no run directories')
  spec = (results.read_json(fileio.join(sweep_dir, results.SWEEP_FILE)) or {}).get('config', '')
  counts = {s: sum(r['state'] == s for r in rows) for s in STATES}
  out(f'[sweep] {sweep_dir}' + (f': sweep of {spec}' if spec else '') + f', {len(rows)} trial{"s" * (len(rows) != 1)}: '
      + ', '.join(f'{n} {s}' for s, n in counts.items() if n))
  columns = ('trial', 'state', 'step', 'attempts', 'requeues', 'worker', 'since', 'slurm', 'detail')
  width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns}
  out('  '.join(f'{c:<{width[c]}}' for c in columns).rstrip())
  for r in rows:
    out('  '.join(f'{r[c]:<{width[c]}}' for c in columns).rstrip())
  return 0
