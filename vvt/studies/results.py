"""A sweep's results: every trial's final and best metrics, size and speed, as CSV, Markdown and PNG.

  collect(sweep_dir) -> Table           one row per trial (finished or not), the swept fields, the groups
  write(table) -> {'csv', 'md', 'png'}  SWEEP/results.csv, results.md (groups: mean ± std over seeds;
                                        the missing trials and why), results.png (headline metric per
                                        group with error bars; the training curves of all trials)

A trial is a run directory (`vvt train --workdir`) under the sweep directory. It is *finished* when its
final evaluation is written: the trainer writes `checkpoints/eval_<last step>_<split>.json` and then
`training_curves.png` only at the end of a run (`final_eval_path`). The trials and their overrides come
from SWEEP/sweep.json (written by `vvt sweep`); a directory of runs without one is read too, its swept
fields being the config fields in which the runs differ. Params and GFLOPs per view come from
`vvt.models.summary.summarise` (abstract, nothing allocated) and are cached in TRIAL/model_summary.json.
The sweep directory may be a URL (`gs://bucket/sweep`): files go through `vvt.fileio` / `etils.epath`, and
every file written here is written atomically.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import re
import statistics
from typing import Any, Optional, Sequence

from etils import epath

from vvt import fileio
from vvt.config import paths
from vvt.config import run_file
from vvt.studies import claims
from vvt.tasks import registry
from vvt.train import metrics as metrics_lib

SWEEP_FILE = 'sweep.json'   # the sweep's definition: config spec, base overrides, trials
TRIAL_FILE = 'trial.json'   # one trial's record: overrides, command, status, error, wall time
SUMMARY_FILE = 'model_summary.json'
CSV, MD, PNG = 'results.csv', 'results.md', 'results.png'
HEADLINES = ('video_top1', 'video_top1_action')  # the headline of results that record no `main_metric` (older runs)
_EVAL = re.compile(r'eval_(\d+)_(.+)\.json$')


# ----------------------------------------------------------------------------- one trial


def read_json(path: str, default=None):
  """The JSON value in `path`, or `default` if the file is missing or not JSON."""
  try:
    return json.loads(fileio.read_text(path))
  except (OSError, ValueError):
    return default


def write_json(path: str, value) -> None:
  """Writes JSON atomically (a reader never sees half a file)."""
  fileio.atomic_write_text(path, json.dumps(value, indent=2, default=str))


def _is_dir(path: str) -> bool:
  return epath.Path(path).is_dir()


def eval_files(workdir: str) -> dict[int, list[str]]:
  """{step: [eval_<step>_<split>.json paths]} of a run."""
  out = {}
  checkpoints = epath.Path(fileio.join(workdir, 'checkpoints'))
  for path in (checkpoints.glob('eval_*_*.json') if checkpoints.is_dir() else ()):
    m = _EVAL.search(path.name)
    if m:
      out.setdefault(int(m.group(1)), []).append(str(path))
  return out


def last_train_step(records: Sequence[dict]) -> Optional[int]:
  steps = [r['step'] for r in records if r.get('kind') == 'train']
  return max(steps) if steps else None


def saved_config(workdir: str) -> dict:
  """The run's WORKDIR/config.json as JSON values ({} without one)."""
  config = read_json(run_file.path(workdir), {})
  return config if isinstance(config, dict) else {}


def main_metric(result: dict) -> Optional[str]:
  """The main metric of an evaluation's results: the one they record (`main_metric`, the task's), else the first
  of HEADLINES they hold (results written before they recorded it); None for neither."""
  key = result.get('main_metric')
  return key if isinstance(key, str) and key else next((h for h in HEADLINES if h in result), None)


def _sequences_result(workdir: str, config: dict) -> Optional[str]:
  """The results JSON of a run on feature sequences (a task whose `runs_on` hook is 'feature_sequences': written
  once its head is trained and evaluated, `vvt.train.localization_run`), or None before it exists."""
  from vvt.train import localization_run
  section = (config.get('task') or {}).get('localization') or {}
  path = localization_run.results_json(workdir, section.get('eval_subset'), section.get('protocol'))
  return path if fileio.exists(path) else None


def final_eval_path(workdir: str, records: Optional[Sequence[dict]] = None) -> Optional[str]:
  """The final evaluation of a finished run, or None: the eval JSON of its task at the last logged training step,
  with training_curves.png beside it (both are written only when a run completes); of a run on feature sequences,
  its results JSON."""
  config = saved_config(workdir)
  hooks = registry.hooks_of(config)
  if hooks.runs_on == 'feature_sequences':
    return _sequences_result(workdir, config)
  if not fileio.exists(fileio.join(workdir, metrics_lib.CURVES)):
    return None
  records = metrics_lib.read_jsonl(workdir) if records is None else records
  step = last_train_step(records)
  paths = eval_files(workdir).get(step) if step is not None else None
  if not paths:
    return None
  split = config.get('eval', {}).get('split')
  named = f'{split}_{hooks.results_name}' if hooks.results_name else split
  preferred = [p for p in paths if split and p.endswith(f'_{named}.json')]
  return (preferred or sorted(paths))[0]


def trial_state(workdir: str, claim: bool = True) -> dict:
  """{'status', 'step': last step, 'detail': str, 'claim': the claim record or None} of a trial.

  status: finished | running | claimed | lease expired | failed | partial | not started. With `claim`, the
  trial's claim (`vvt.studies.claims`: who trains it, since when, its lease) decides whether it is claimed
  (starting), running, failed or had its lease expire (its worker died; another takes it over); otherwise,
  and for sweeps without claims, TRIAL/trial.json does. `partial` is a run with checkpoints or metrics but no
  final evaluation (interrupted; `vvt sweep` or `vvt train` resumes it).
  """
  has_dir = _is_dir(workdir)
  records = metrics_lib.read_jsonl(workdir) if has_dir else []
  step = last_train_step(records)
  held = _claim(workdir) if claim and has_dir else None
  if has_dir and final_eval_path(workdir, records):
    return {'status': 'finished', 'step': step, 'detail': '', 'claim': held}
  at = f'at step {step}' if step is not None else 'before the first logged step'
  if held:
    state = _claim_state(held, at)
    if state:
      return {**state, 'step': step, 'claim': held}
  record = read_json(fileio.join(workdir, TRIAL_FILE), {}) or {}
  out = {'step': step, 'claim': held}
  if record.get('status') == 'failed':
    return {**out, 'status': 'failed', 'detail': f'{record.get("error", "")} ({at})'}
  if record.get('status') == 'running' and not held:
    return {**out, 'status': 'running', 'detail': f'started {record.get("started", "?")}, {at}'}
  if step is not None or _is_dir(fileio.join(workdir, 'checkpoints')):
    return {**out, 'status': 'partial', 'detail': f'interrupted {at}'}
  return {**out, 'status': 'not started', 'step': None, 'detail': ''}


def _claim(workdir: str) -> Optional[dict]:
  try:
    return claims.read(workdir)
  except (OSError, ValueError, ImportError):
    return None


def _claim_state(held: dict, at: str) -> Optional[dict]:
  """{'status', 'detail'} from a claim record (None for a released one: the files tell)."""
  state, who = held['state'], claims.holder(held)
  since, until = claims.clock_text(held.get('since')), claims.clock_text(held.get('lease_until'))
  if state in claims.LIVE:
    return {'status': state, 'detail': f'{who}, since {since}, {at}, lease until {until}'}
  if state == claims.EXPIRED:
    return {'status': state, 'detail': f'{who} stopped renewing at {until} ({at}); the next worker takes it over'}
  if state == 'failed':
    return {'status': 'failed', 'detail': f'{held.get("error") or "?"} ({at}, on {who})'}
  return None


def model_summary(workdir: str) -> dict:
  """{'params_m', 'gflops'} of the run's model (cached in TRIAL/model_summary.json); {} if unknown."""
  cache = fileio.join(workdir, SUMMARY_FILE)
  cached = read_json(cache)
  if cached is not None:
    return cached
  config = run_file.load_saved(workdir)
  if config is None:
    return {}
  from vvt.models import summary
  s = summary.summarise(config.model)
  out = {'params_m': s['params'] / 1e6, 'gflops': s['gflops']}
  write_json(cache, out)
  return out


def _number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def trial_row(workdir: str, with_summary: bool = True) -> dict:
  """Everything `vvt results` reports about one trial (metrics absent where the run has none yet)."""
  records = metrics_lib.read_jsonl(workdir)
  state = trial_state(workdir)
  row = {'status': state['status'], 'step': state['step'], 'detail': state['detail']}
  if state['claim']:
    row.update({k: state['claim'].get(k) for k in ('attempts', 'requeues')})
  final = read_json(final_eval_path(workdir, records) or '', {}) if state['status'] == 'finished' else {}
  final = final if isinstance(final, dict) else {}
  main, hooks = main_metric(final), registry.hooks_of(saved_config(workdir))
  row.update({k: v for k, v in final.items() if _number(v) and (k == main or k.startswith(hooks.result_keys))})
  train = [r for r in records if r.get('kind') == 'train']
  evals = [r for r in records if r.get('kind') == 'eval']
  if train:
    row['train_loss'] = train[-1].get('loss')
    row['train_accuracy'] = train[-1].get('accuracy')
    rates = [r['steps_per_sec'] for r in train if _number(r.get('steps_per_sec'))]
    if rates:
      row['steps_per_sec'] = statistics.median(rates)
  headline = main or next((h for h in HEADLINES if any(h in r for r in evals)), HEADLINES[0])
  if main:
    row['main_metric'] = main
  row.update(_best(evals, headline, hooks.main_metric_goal))
  record = read_json(fileio.join(workdir, TRIAL_FILE), {}) or {}
  if _number(record.get('wall_s')):
    row['wall_s'] = record['wall_s']
  if with_summary and fileio.exists(run_file.path(workdir)):
    try:
      row.update(model_summary(workdir))
    except Exception as e:  # the table is still worth having without it
      row['summary_error'] = f'{type(e).__name__}: {e}'.splitlines()[0]
  return row


def _best(evals: Sequence[dict], key: str, goal: str) -> dict:
  """{'best_<key>', 'best_step'} of the run's logged evaluations by `key`: the highest, or for `goal` 'min' (a
  loss: the task's `main_metric_goal`) the lowest; {} when none holds it."""
  scored = [r for r in evals if _number(r.get(key))]
  if not scored:
    return {}
  best = (min if goal == 'min' else max)(scored, key=lambda r: r[key])
  return {f'best_{key}': best[key], 'best_step': best['step']}


# ----------------------------------------------------------------------------- a sweep


@dataclasses.dataclass
class Table:
  """A sweep's trials: rows (one per trial, in sweep order, with the `labels` naming it), the swept labels
  (`fields`; the seed is averaged over), the headline metric."""
  sweep_dir: str
  rows: list[dict]
  fields: list[str]
  headline: str
  spec: str = ''

  @property
  def finished(self) -> list[dict]:
    return [r for r in self.rows if r['status'] == 'finished']

  @property
  def missing(self) -> list[dict]:
    return [r for r in self.rows if r['status'] not in ('finished', NOT_SELECTED)]

  @property
  def not_selected(self) -> list[dict]:
    return [r for r in self.rows if r['status'] == NOT_SELECTED]

  def group_key(self, row: dict) -> str:
    return json.dumps([row['labels'].get(f) for f in self.fields], default=str)

  def groups(self) -> list[tuple[tuple, list[dict], list[dict]]]:
    """[(values of the swept fields, all rows, finished rows)] in sweep order; seeds are averaged over."""
    out = {}
    for r in self.rows:
      out.setdefault(self.group_key(r), []).append(r)
    return [(tuple(rows[0]['labels'].get(f) for f in self.fields), rows,
             [r for r in rows if r['status'] == 'finished']) for rows in out.values()]


def _differing_fields(configs: dict[str, Any]) -> dict[str, dict]:
  """{trial: {field: value}} for the config fields in which the runs differ (no seed, no paths)."""
  flat = {name: paths.flatten(c) for name, c in configs.items()}
  keys = sorted({k for f in flat.values() for k in f})
  skip = ('seed', 'dataset.train_files', 'dataset.eval_files', 'dataset.data_dir')
  differ = [k for k in keys if k not in skip and len({repr(f.get(k)) for f in flat.values()}) > 1]
  return {name: {**{k: f.get(k) for k in differ if k in f}, 'seed': f.get('seed')}
          for name, f in flat.items()}


def sweep_trials(sweep_dir: str) -> tuple[list[tuple[str, dict]], str]:
  """([(trial name, labels)], config spec) from SWEEP/sweep.json, or from the run directories in it (labels:
  the config fields in which the runs differ, and the seed)."""
  record = read_json(fileio.join(sweep_dir, SWEEP_FILE))
  if record and record.get('trials'):
    return [(t['name'], t.get('labels', t['overrides'])) for t in record['trials']], record.get('config', '')
  runs = sorted(d.name for d in epath.Path(sweep_dir).iterdir() if (d / run_file.FILENAME).exists())
  configs = {d: run_file.load_saved(fileio.join(sweep_dir, d)) for d in runs}
  overrides = _differing_fields(configs) if len(configs) > 1 else {d: {} for d in runs}
  return [(d, overrides[d]) for d in runs], ''


NOT_SELECTED = 'not selected'  # a trial never started that `vvt sweep --only` left out


def collect(sweep_dir: str, with_summary: bool = True, selected=None) -> Table:
  """The results Table of a sweep directory (raises FileNotFoundError if it holds no trials). `selected`: the
  trials a `vvt sweep --only REGEX` ran; the others that never started are NOT_SELECTED, not missing."""
  if not _is_dir(sweep_dir):
    raise FileNotFoundError(f'no such sweep directory: {sweep_dir}')
  listed, spec = sweep_trials(sweep_dir)
  if not listed:
    raise FileNotFoundError(f'{sweep_dir} holds no trials: no {SWEEP_FILE} (written by `vvt sweep`) and no '
                            'run directories with a config.json')
  rows = []
  for name, labels in listed:
    row = trial_row(fileio.join(sweep_dir, name), with_summary=with_summary)
    if selected is not None and name not in selected and row['status'] == 'not started':
      row['status'] = NOT_SELECTED
    rows.append({'trial': name, 'labels': labels, **row})
  fields = []
  for _, labels in listed:
    fields.extend(k for k in labels if k not in fields and k != 'seed')
  return Table(sweep_dir, rows, fields, headline_of(rows), spec)


def headline_of(rows: Sequence[dict]) -> str:
  """The metric a sweep's table leads with: the main metric the trials' results record (the first finished
  trial's), else the first of HEADLINES a row holds."""
  recorded = [r['main_metric'] for r in rows if r.get('status') == 'finished' and r.get('main_metric')]
  if recorded:
    return recorded[0]
  return next((h for h in HEADLINES if any(h in r for r in rows)), HEADLINES[0])


# ----------------------------------------------------------------------------- formatting


def mean_std(values: Sequence[float]) -> tuple[float, float]:
  """(mean, sample standard deviation; nan for one value)."""
  values = [v for v in values if _number(v)]
  if not values:
    return math.nan, math.nan
  return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else math.nan)


def fmt_mean_std(values: Sequence[float], digits: int = 3) -> str:
  m, s = mean_std(values)
  if math.isnan(m):
    return '—'
  return f'{m:.{digits}f}' + (f' ± {s:.{digits}f}' if not math.isnan(s) else '')


def fmt(v, digits: int = 3) -> str:
  if v is None or (isinstance(v, float) and math.isnan(v)):
    return '—'
  if isinstance(v, float):
    return f'{v:.{digits}f}'
  if isinstance(v, (tuple, list)):
    return 'x'.join(fmt(x) for x in v)
  return str(v)


def short_field(field: str) -> str:
  return field.split('.')[-1]


def group_label(fields: Sequence[str], values: tuple) -> str:
  return ', '.join(f'{short_field(f)}={fmt(v)}' for f, v in zip(fields, values, strict=True)) or 'all'


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
  out = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  out += ['| ' + ' | '.join(str(c).replace('|', '\\|') for c in r) + ' |' for r in rows]
  return out


def markdown(table: Table) -> str:
  """results.md: the grouped table (mean ± std over seeds), every trial, and the missing trials."""
  h = table.headline
  n_done = len(table.finished)
  lines = [f'# Results: {table.sweep_dir}', '']
  if table.spec:
    lines += [f'Sweep of `{table.spec}`.', '']
  lines += [f'{n_done} of {len(table.rows)} trials finished.'
            + (f' Missing: {len(table.missing)} (listed below).' if table.missing else '')
            + (f' Not selected by --only: {len(table.not_selected)}.' if table.not_selected else ''), '']
  clip = [k for k in ('clip_top1',) if k != h and any(k in r for r in table.rows)]  # a classification's
  header = [short_field(f) for f in table.fields] + [
      'seeds', f'{h} (mean ± std)', f'best {h}', *clip, 'params (M)', 'GFLOPs/view', 'steps/s']
  body = []
  for values, every, rows in table.groups():
    body.append([fmt(v) for v in values] + [
        f'{len(rows)}/{len(every)}', fmt_mean_std([r.get(h) for r in rows]),
        fmt_mean_std([r.get(f'best_{h}') for r in rows]), *[fmt_mean_std([r.get(k) for r in rows]) for k in clip],
        fmt_mean_std([r.get('params_m') for r in rows], 2), fmt_mean_std([r.get('gflops') for r in rows], 4),
        fmt_mean_std([r.get('steps_per_sec') for r in rows], 1)])
  lines += ['## By group', ''] + _md_table(header, body) + ['']
  lines += ['## Trials', ''] + _md_table(
      ['trial', 'status', h, f'best {h} (step)', *clip, 'final train loss', 'params (M)',
       'GFLOPs/view', 'steps/s', 'wall'],
      [[r['trial'], r['status'], fmt(r.get(h)),
        f'{fmt(r.get(f"best_{h}"))} ({fmt(r.get("best_step"))})' if r.get(f'best_{h}') is not None else '—',
        *[fmt(r.get(k)) for k in clip], fmt(r.get('train_loss')), fmt(r.get('params_m'), 2),
        fmt(r.get('gflops'), 4), fmt(r.get('steps_per_sec'), 1),
        metrics_lib.format_duration(r['wall_s']) if r.get('wall_s') else '—'] for r in table.rows]) + ['']
  if table.missing:
    lines += ['## Missing trials', ''] + _md_table(
        ['trial', 'status', 'detail'], [[r['trial'], r['status'], r['detail'] or '—'] for r in table.missing])
    lines.append('')
  return '\n'.join(lines)


CSV_FIXED = ('trial', 'status', 'step')


def write_csv(table: Table, path: str) -> None:
  """One row per trial: the swept fields (and seed), then every metric, size and speed column."""
  fields = list(table.fields) + (['seed'] if any('seed' in r['labels'] for r in table.rows) else [])
  metrics = []
  for r in table.rows:
    metrics.extend(k for k in r if k not in metrics and k not in (*CSV_FIXED, 'labels', 'detail'))
  text = io.StringIO(newline='')
  w = csv.writer(text)
  w.writerow([*CSV_FIXED, *fields, *metrics, 'detail'])
  for r in table.rows:
    w.writerow([r.get(k) for k in CSV_FIXED] + [fmt(r['labels'].get(k)) for k in fields]
               + [r.get(k) for k in metrics] + [r.get('detail', '')])
  fileio.atomic_write_text(path, text.getvalue())


def plot(table: Table, path: str) -> Optional[str]:
  """results.png: the headline metric per group (mean, std error bars, one dot per seed) and the train loss
  and accuracy curves of every trial, coloured by group. None if no trial has logged anything."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  groups = table.groups()
  curves = {r['trial']: [x for x in metrics_lib.read_jsonl(fileio.join(table.sweep_dir, r['trial']))
                         if x.get('kind') == 'train'] for r in table.rows}
  if not table.finished and not any(curves.values()):
    return None
  colours = plt.cm.tab10.colors
  fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), gridspec_kw={'width_ratios': [1.3, 1, 1]})
  h = table.headline
  labels = [group_label(table.fields, k) for k, _, _ in groups]
  for i, (_, _, rows) in enumerate(groups):
    values = [r[h] for r in rows if _number(r.get(h))]
    m, s = mean_std(values)
    c = colours[i % len(colours)]
    axes[0].bar(i, 0 if math.isnan(m) else m, yerr=None if math.isnan(s) else s, color=c, alpha=0.75,
                capsize=4)
    axes[0].plot([i] * len(values), values, 'k.', ms=5)
    if math.isnan(m):
      axes[0].text(i, 0.02, 'missing', ha='center', rotation=90, fontsize=8)
  axes[0].set_xticks(range(len(groups)))
  axes[0].set_xticklabels(labels, rotation=30, ha='right', fontsize=7)
  if all(0 <= r[h] <= 1 for r in table.rows if _number(r.get(h))):  # an accuracy, a mAP; a loss: its own scale
    axes[0].set_ylim(0, 1)
  axes[0].set_ylabel(h)
  axes[0].set_title(f'{h} per group (mean ± std over seeds, dots = trials)', fontsize=9)
  group_of = {r['trial']: i for i, (_, every, _) in enumerate(groups) for r in every}
  for ax, key in ((axes[1], 'loss'), (axes[2], 'accuracy')):
    labelled = set()
    for r in table.rows:
      pts = [(x['step'], x[key]) for x in curves[r['trial']] if _number(x.get(key))]
      if pts:
        g = group_of[r['trial']]
        ax.plot(*zip(*pts, strict=True), color=colours[g % len(colours)], alpha=0.8, lw=1.2,
                ls='-' if r['status'] == 'finished' else '--',
                label=None if g in labelled else labels[g])
        labelled.add(g)
    ax.set_xlabel('step')
    ax.set_title(f'train {key}, all trials (dashed: not finished)', fontsize=9)
  axes[2].set_ylim(0, 1)
  axes[1].legend(fontsize=7)
  fig.suptitle(f'{table.sweep_dir}: {len(table.finished)} of {len(table.rows)} trials finished', fontsize=10)
  fig.tight_layout()
  fileio.save_png(path, fig)
  plt.close(fig)
  return path


def write(table: Table) -> dict[str, Optional[str]]:
  """Writes SWEEP/results.csv, results.md and results.png; returns their paths (png None if nothing to draw)."""
  paths = {k: fileio.join(table.sweep_dir, name) for k, name in (('csv', CSV), ('md', MD), ('png', PNG))}
  write_csv(table, paths['csv'])
  fileio.atomic_write_text(paths['md'], markdown(table))
  paths['png'] = plot(table, paths['png'])
  return paths
