"""`vvt sweep`: expand a study's trials and run each through the normal trainer and evaluator.

  vvt sweep --config experiments/timesformer_schemes.py:mini --workdir runs/schemes [--parallel 2]
  vvt sweep --config experiments/vivit_models.py:k400 --workdir runs/vivit --dry-run
  vvt sweep --config experiments/xvit_window.py --workdir gs://b/xvit --launch print   (commands only)
  vvt sweep --config experiments/synthetic_schemes.py --workdir runs/s --only 'divided|space' \\
      --config.num_epochs=2                                   (any field, for every trial)

An experiment file has get_config(arg) (the base config) and get_sweep(arg) (dicts of overrides, built
with vvt.studies.sweep: axis, product, zipped, chain, seeds, variants, fixed). Every trial is checked with the
config loader before anything runs (a bad field fails naming the trial), is named from its overrides
(`attention=divided,seed=0`: stable across runs) and runs in WORKDIR/<trial>/ as its own `vvt train`
process. Re-running skips finished trials and resumes interrupted ones; a failed trial is recorded with
its error and the sweep goes on. At the end `vvt results WORKDIR` writes results.csv/.md/.png.

--dry-run     list the trials (and the state of each in WORKDIR) without running anything
--only REGEX  only the trials whose name matches (re.search)
--parallel N  N trials at a time (separate processes)
--launch print  print one `vvt train` command per trial (to schedule them on TPU VMs or a cluster)
--launch slurm  submit the unfinished trials as one SLURM job array (task i runs trial i; --parallel N: at most
              N at once; --slurm.partition/account/qos/time/nodes/gpus/cpus/mem/signal/job_name/setup/python/
              extra=...; --dry-run prints the script). See docs/clusters.md.
"""
import os
import sys

from vvt import fileio
from vvt.cli import common
from vvt.config import loader as config_lib
from vvt.config.errors import ConfigError


def _split(spec: str) -> tuple[str, str | None]:
  if os.path.exists(spec) or '.py:' not in spec:
    return spec, None
  path, _, arg = spec.partition('.py:')
  return path + '.py', arg


def _module(path: str):
  """The module the config loader imported for `path` (a file inside a package such as experiments/), or
  the file imported again on its own (a file outside packages, which the loader does not keep)."""
  want = os.path.abspath(path)
  for module in list(sys.modules.values()):
    if os.path.abspath(getattr(module, '__file__', None) or '') == want:
      return module
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location('vvt_sweep_' + os.path.splitext(os.path.basename(path))[0], path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)  # it just ran in the loader without error
  return module


def load_trials(spec: str):
  """(every trial, base config) of a sweep file FILE.py[:ARG]: its get_sweep(ARG) expanded and named."""
  from vvt.studies import sweep as sweep_lib  # pylint: disable=g-import-not-at-top
  path, arg = _split(spec)
  if not path.endswith('.py'):
    raise ConfigError(f'--config {spec}: a sweep is a Python file FILE.py[:ARG] with get_config and get_sweep')
  base = config_lib.load_file(spec)  # imports the file (one-line errors for a broken one)
  get_sweep = getattr(_module(path), 'get_sweep', None)
  if get_sweep is None:
    raise sweep_lib.SweepError(f'{path} defines no sweep: add get_sweep(arg=None) returning dicts of config '
                               'overrides (see experiments/README.md)')
  try:
    defined = get_sweep(arg) if arg is not None else get_sweep()
    defined = list(defined) if defined is not None and not isinstance(defined, dict) else defined
  except (ValueError, KeyError, TypeError) as e:
    if isinstance(e, ConfigError):
      raise
    raise ConfigError(f'{path}: get_sweep({arg or ""}): {e}') from e
  return sweep_lib.trials(defined), base


def check_trial(spec, base_overrides, trial, files: bool):
  """The trial's config, loaded and validated like `vvt train` would; ConfigError naming the trial."""
  try:
    return config_lib.load(spec, [*base_overrides, *trial.raw_overrides()],
                           **({} if files else {'files': (), 'init': False}))
  except ConfigError as e:
    raise ConfigError(f'trial {trial.name!r}: {common.one_line(e)}') from None


def _ensure_data(config) -> None:
  """Writes the synthetic motion data the first time a miniature study needs it (as `vvt demo` does)."""
  from vvt.config import schema  # pylint: disable=g-import-not-at-top
  files = str(config.dataset.get('train_files') or '')
  if files.startswith(schema.SYNTHETIC_DIR + '/'):
    config_lib.ensure_synthetic(schema.SYNTHETIC_DIR)


def _state(sweep_dir, trial) -> str:
  from vvt.studies import results  # pylint: disable=g-import-not-at-top
  return results.trial_state(fileio.join(sweep_dir, trial.name))['status'] if sweep_dir else ''


def _warn_changed(sweep_dir, trial, config, say) -> None:
  """A finished trial whose saved config differs from the sweep's now is kept: say so."""
  from vvt.config import resume, run_file  # pylint: disable=g-import-not-at-top
  saved = run_file.load_saved(fileio.join(sweep_dir, trial.name))
  changes = resume.unsafe_changes(saved, config) if saved is not None else []
  if changes:
    listed = ', '.join(f'{k}: {a!r} -> {b!r}' for k, a, b in changes[:3])
    say(f'[sweep] warning: finished trial {trial.name} was trained with a different config ({listed}'
        f'{", ..." if len(changes) > 3 else ""}); kept as it is: delete {fileio.join(sweep_dir, trial.name)} '
        'to train it again')


def _launch_slurm(args, spec, overrides, all_trials, trials, opts) -> int:
  """Writes the sweep record and the job array's script of the unfinished trials, and submits it."""
  from vvt.studies import runner, slurm  # pylint: disable=g-import-not-at-top
  if fileio.is_url(args.workdir):
    raise common.UsageError(f'--launch slurm: --workdir {args.workdir} must be a folder the nodes share, not a URL')
  sweep_dir = os.path.abspath(args.workdir)
  todo = slurm.unfinished(all_trials, trials, sweep_dir)
  if not todo:
    print(f'[sweep] all {len(trials)} trials in {args.workdir} are finished: nothing to submit')
    return 0
  commands = {i: (all_trials[i].name, slurm.trial_argv(opts.python, runner.train_argv(
      spec, overrides, all_trials[i], os.path.join(sweep_dir, all_trials[i].name)))) for i in todo}
  header = f'vvt sweep --launch slurm: {spec}, {len(todo)} of {len(all_trials)} trials -> {sweep_dir}'
  text = slurm.script(sweep_dir, commands, opts, throttle=args.parallel or 0, header=header)
  if args.dry_run:
    print(text, end='')
    return 0
  runner.write_sweep_record(args.workdir, spec, overrides, all_trials)
  path = slurm.write_script(sweep_dir, text)
  job = slurm.submit(path)
  slurm.record_job(sweep_dir, job, todo, [all_trials[i].name for i in todo])
  at_once = f', {args.parallel} at a time' if args.parallel else ''
  print(f'[sweep] submitted job {job}: array {slurm.array_spec(todo, args.parallel or 0)} '
        f'({len(todo)} of {len(all_trials)} trials{at_once}; script {path}). Follow it with:')
  for line in slurm.follow_lines(args.workdir, job):
    print(line)
  return 0


def _sweep(argv):
  from vvt.studies import slurm  # pylint: disable=g-import-not-at-top
  slurm_opts, argv = slurm.split_options(argv)
  slurm_given = slurm_opts != slurm.Options()
  p = common.Parser('vvt sweep', __doc__, config=True)
  p.add_argument('--workdir', required=True, help='the sweep directory: one sub-directory per trial')
  p.add_argument('--dry-run', '--dry_run', dest='dry_run', action='store_true', help='list the trials only')
  p.add_argument('--only', metavar='REGEX', help='run only the trials whose name matches')
  p.add_argument('--parallel', type=int, default=None, metavar='N',
                 help='trials run at the same time (default 1; with --launch slurm: no limit)')
  p.add_argument('--launch', choices=('local', 'print', 'slurm'), default='local',
                 help='local: run the trials here; print: print one vvt train command per trial; '
                      'slurm: submit them as a SLURM job array')
  p.add_argument('--no_summary', action='store_true', help='results without params / GFLOPs')
  args, spec, overrides = common.parse(p, argv)
  if not spec:
    raise common.UsageError('missing --config experiments/FILE.py[:ARG]')
  if args.parallel is not None and args.parallel < 1:
    raise common.UsageError(f'--parallel must be >= 1, got {args.parallel}')
  if slurm_given and args.launch != 'slurm':
    raise common.UsageError('--slurm.* options need --launch slurm')
  from vvt.studies import sweep as sweep_lib  # pylint: disable=g-import-not-at-top
  all_trials, _ = load_trials(spec)
  trials = sweep_lib.select(all_trials, args.only)
  running = not args.dry_run and args.launch in ('local', 'slurm')
  if running:
    _ensure_data(check_trial(spec, overrides, trials[0], files=False))
  configs = {t.name: check_trial(spec, overrides, t, files=running) for t in trials}
  if args.launch == 'slurm':
    return _launch_slurm(args, spec, overrides, all_trials, trials, slurm_opts)
  if args.launch == 'print' and not args.dry_run:
    from vvt.studies import runner  # pylint: disable=g-import-not-at-top
    for t in trials:
      print(runner.shell_command(runner.train_argv(spec, overrides, t, fileio.join(args.workdir, t.name))))
    return 0
  if args.dry_run:
    width = max(len(t.name) for t in trials)
    exists = fileio.exists(args.workdir)
    for i, t in enumerate(trials, 1):
      state = f'{_state(args.workdir, t):<12}' if exists else ''
      fields = ' '.join(f'{k}={v}' for k, v in t.raw_overrides())
      print(f'{i:>3}/{len(trials)}  {t.name:<{width}}  {state}{fields}')
    picked = f'{len(trials)} of {len(all_trials)}' if len(trials) != len(all_trials) else f'{len(trials)}'
    print(f'[sweep] {picked} trials of {spec} (valid configs) -> {args.workdir}/<trial>/')
    return 0
  from vvt.studies import runner  # pylint: disable=g-import-not-at-top
  say = lambda msg: print(msg, flush=True)  # pylint: disable=unnecessary-lambda-assignment
  runner.write_sweep_record(args.workdir, spec, overrides, all_trials)
  for t in trials:
    if _state(args.workdir, t) == 'finished':
      _warn_changed(args.workdir, t, configs[t.name], say)
  parallel = args.parallel or 1
  say(f'[sweep] {len(trials)} trials of {spec} in {args.workdir} ({parallel} at a time)')
  status = runner.run(trials, spec, overrides, args.workdir, parallel=parallel, say=say)
  from vvt.cli import results as results_cli  # pylint: disable=g-import-not-at-top
  results_cli.report(args.workdir, with_summary=not args.no_summary)
  failed = [n for n, s in status.items() if s == 'failed']
  if failed:
    print(f'vvt sweep: {len(failed)} of {len(trials)} trials failed: {", ".join(failed)} '
          f'(errors in {fileio.join(args.workdir, "results.md")})', file=sys.stderr)
    return 1
  return 0


def main(argv) -> int:
  return common.run('vvt sweep', _sweep, argv)
