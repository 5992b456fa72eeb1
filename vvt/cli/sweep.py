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
--launch xpk  one XPK workload per unfinished trial on GKE (a TPU slice each: --xpk.cluster=C --xpk.tpu_type=v4-32
              --xpk.docker_image=IMG; also num_slices/device_type/num_nodes/base_docker_image/project/zone/
              workload_prefix/priority/max_restarts/setup/python/env/extra), or --xpk.mode=batch: one `xpk batch`
              array script (cpus/gpus/mem/time); --dry-run prints the commands or the script.

Many workers, one sweep (see docs/sweeps.md and docs/clusters.md: several hosts, TPU VMs, job arrays):
  vvt sweep --config experiments/synthetic_schemes.py --workdir gs://b/s    (on every host: one worker each)
  vvt sweep gs://b/s                         (a worker that joins: the config comes from DIR/sweep.json)
  vvt sweep DIR --trial 3                    (claim and run one trial, by name or index 0..N-1: an array task)
  vvt sweep --status DIR                     (every trial: pending, claimed, running, finished, failed, lease
                                              expired; host, pid, since, attempts, requeues, SLURM job)
Every worker claims a trial before it trains it (DIR/<trial>/claims/ or, on GCS, DIR/<trial>/state.json) and
renews the claim's lease (--lease_s, default 180 s) every --renew_s (default lease/6) while the trial runs;
a trial whose worker died (its lease expired) is taken over by another worker and resumed from its
checkpoints; a finished trial is never trained again. Ctrl-C / SIGTERM: the running trials save a checkpoint
and their claims are released.

A multi-host slice is one worker: run `vvt sweep DIR --config.distributed.initialize=True` on every host (the
`distributed.*` fields of `vvt train`, or none under `srun`): process 0 claims each trial, all processes train it
together as one program (vvt.studies.slice). `--config.distributed.*` are this process's settings, not the
sweep's: they are not recorded in DIR/sweep.json, and a worker that joins may give them.
"""
import os
import re
import sys
import time

from vvt import fileio
from vvt.cli import common
from vvt.cli import sweep_status as status_cli
from vvt.config import loader as config_lib
from vvt.config import run_spec
from vvt.config.errors import ConfigError
from vvt.studies import claims
from vvt.studies import launch as launch_lib


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
  import importlib.util
  spec = importlib.util.spec_from_file_location('vvt_sweep_' + os.path.splitext(os.path.basename(path))[0], path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)  # it just ran in the loader without error
  return module


def load_trials(spec: str):
  """(every trial, base config) of a sweep file FILE.py[:ARG]: its get_sweep(ARG) expanded and named."""
  from vvt.studies import sweep as sweep_lib
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


def check_schedules(configs: dict) -> None:
  """Every trial's learning-rate schedule over its steps on its training set (a warmup in epochs becomes steps only
  then), before any trial starts: one ConfigError with a line per trial that would fail. A trial whose training
  set cannot be read is left to fail (and be recorded) when it runs. The training set is counted (local
  TFRecords from their record headers, without TensorFlow: `vvt.data.train_size`) only where a step count depends
  on the size of an epoch."""
  from vvt.data import DataSpec
  from vvt.train import optimizers
  from vvt.train import program
  problems = []
  for name, config in configs.items():
    schedule = run_spec.ScheduleSpec.of(config.schedule)
    videos = 1  # not read: no step count below depends on the size of an epoch
    if program.counts_epochs(int(config.num_train_steps), schedule):
      from vvt.data import count_videos
      try:
        videos = count_videos(DataSpec.of(config.dataset), 'train')
      except Exception:  # unreadable data: the trial fails and is recorded, as before
        continue
    epoch = program.steps_per_epoch(videos, int(config.batch_size))
    total = program.total_steps(int(config.num_train_steps), float(config.num_epochs), epoch)
    try:
      optimizers.make_schedule(schedule, total, epoch)
    except ValueError as e:
      problems.append(f'trial {name!r}: {e}')
  if problems:
    raise ConfigError(*problems)


def _ensure_data(config) -> None:
  """Writes the synthetic motion data the first time a miniature study needs it (as `vvt demo` does)."""
  from vvt.config import schema
  files = str(config.dataset.get('train_files') or '')
  if files.startswith(schema.SYNTHETIC_DIR + '/'):
    write_once(schema.SYNTHETIC_DIR, lambda: config_lib.ensure_synthetic(schema.SYNTHETIC_DIR))


def write_once(data_dir: str, write, wait_s: float = 1.0) -> None:
  """Runs `write()` (which writes DATA_DIR/manifest.json last) in one of the sweep workers that start together
  on a host; the others wait for the manifest instead of writing the same files at the same time. A writer
  that died (its pid gone) leaves the job to the next worker."""
  manifest, lock = os.path.join(data_dir, 'manifest.json'), data_dir.rstrip('/') + '.writing'
  said = False
  while not os.path.exists(manifest):
    os.makedirs(os.path.dirname(os.path.abspath(lock)), exist_ok=True)
    try:
      fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      if not said:
        print(f'[sweep] another worker writes {data_dir}: waiting for it', file=sys.stderr, flush=True)
        said = True
      _drop_if_dead(lock)
      time.sleep(wait_s)
      continue
    try:
      os.write(fd, str(os.getpid()).encode())
      write()
    finally:
      os.close(fd)
      os.unlink(lock)
    return


def _drop_if_dead(lock: str) -> None:
  try:
    with open(lock) as f:
      pid = int(f.read() or 0)
    os.kill(pid, 0)
  except ProcessLookupError:
    try:
      os.unlink(lock)
    except FileNotFoundError:  # another waiter dropped it
      pass
  except (OSError, ValueError):  # gone already, being written, or another user's process: wait
    pass


def _state(sweep_dir, trial) -> str:
  from vvt.studies import results
  return results.trial_state(fileio.join(sweep_dir, trial.name))['status'] if sweep_dir else ''


def _warn_changed(sweep_dir, trial, config, say) -> None:
  """A finished trial whose saved config differs from the sweep's now is kept: say so."""
  from vvt.config import resume
  from vvt.config import run_file
  trial_dir = fileio.join(sweep_dir, trial.name)
  saved = run_file.load_saved(trial_dir)
  changes = resume.unsafe_changes(saved, config) if saved is not None else []
  changes = [c for c in changes if not _own_copy(trial_dir, c[1], c[2])]
  if changes:
    listed = ', '.join(f'{k}: {a!r} -> {b!r}' for k, a, b in changes[:3])
    say(f'[sweep] warning: finished trial {trial.name} was trained with a different config ({listed}'
        f'{", ..." if len(changes) > 3 else ""}); kept as it is: delete {trial_dir} '
        'to train it again')


def _own_copy(trial_dir: str, saved, value) -> bool:
  """Whether a saved field's value `saved` is the trial's converted copy of the weights its config's `value` names
  (a probe's `task.probe.backbone`, `--init`: WORKDIR/init/weights.safetensors, which records its source): the same
  weights, not a change."""
  from vvt.cli import finetune
  copy = fileio.join(trial_dir, finetune.INIT_FILE)
  if not (isinstance(saved, str) and isinstance(value, str) and value) or fileio.is_url(copy):
    return False
  if os.path.abspath(saved) != os.path.abspath(copy) or not os.path.isfile(copy):
    return False
  return finetune.init_source(copy) == os.path.abspath(value)


def _arguments():
  p = common.Parser('vvt sweep', __doc__, config=True)
  p.add_argument('sweep_dir', nargs='?', metavar='DIR', help='the sweep directory (the same as --workdir)')
  p.add_argument('--workdir', help='the sweep directory: one sub-directory per trial')
  p.add_argument('--dry-run', '--dry_run', dest='dry_run', action='store_true', help='list the trials only')
  p.add_argument('--only', metavar='REGEX', help='run only the trials whose name matches')
  p.add_argument('--parallel', type=int, default=None, metavar='N',
                 help='trials run at the same time (default 1; with --launch slurm: no limit)')
  p.add_argument('--launch', choices=('local', 'print', 'slurm', 'xpk'), default='local',
                 help='local: run the trials here; print: print one vvt train command per trial; '
                      'slurm: submit them as a SLURM job array; xpk: one XPK workload per trial on GKE')
  p.add_argument('--no_summary', action='store_true', help='results without params / GFLOPs')
  p.add_argument('--status', action='store_true', help='print the state of every trial in DIR, run nothing')
  p.add_argument('--trial', metavar='NAME_OR_INDEX',
                 help='claim and run this one trial: its name, or its index 0..N-1 in the sweep')
  p.add_argument('--lease_s', type=float, default=claims.LEASE_S, metavar='S',
                 help='a claim not renewed for S seconds is expired: another worker takes the trial over')
  p.add_argument('--renew_s', type=float, metavar='S', help='how often a worker renews (default: lease_s / 6)')
  return p


def _workdir(args) -> str:
  if args.workdir and args.sweep_dir and fileio.abspath(args.workdir) != fileio.abspath(args.sweep_dir):
    raise common.UsageError(f'two sweep directories: {args.sweep_dir} and --workdir {args.workdir}')
  workdir = args.workdir or args.sweep_dir
  if not workdir:
    raise common.UsageError('missing the sweep directory: vvt sweep DIR or --workdir DIR')
  return workdir


def _recorded(workdir, spec, overrides):
  """(spec, base overrides): as given, or without --config those of DIR/sweep.json (a joining worker)."""
  if spec:
    return spec, overrides
  from vvt.studies import results
  record = results.read_json(fileio.join(workdir, results.SWEEP_FILE)) or {}
  if not record.get('config'):
    raise common.UsageError(f'missing --config experiments/FILE.py[:ARG] ({workdir} holds no sweep.json to '
                            'take it from)')
  if overrides:
    raise common.UsageError('--config.a.b=VALUE without --config: a worker that joins a sweep runs it with '
                            f'the overrides recorded in {fileio.join(workdir, results.SWEEP_FILE)}')
  return record['config'], [tuple(o) for o in record.get('base_overrides', [])]


def _check_lease(args) -> None:
  if args.lease_s <= 0:
    raise common.UsageError(f'--lease_s must be > 0, got {args.lease_s:g}')
  renew = args.renew_s if args.renew_s is not None else claims.default_renew_s(args.lease_s)
  if not 0 < renew < args.lease_s / 2:
    raise common.UsageError(f'--renew_s must be > 0 and below half of --lease_s ({args.lease_s:g} s), '
                            f'got {renew:g}')


def pick_trial(all_trials, which: str):
  """The trial named `which`, or at index `which` (0..N-1)."""
  from vvt.studies import sweep as sweep_lib
  for t in all_trials:
    if t.name == which:
      return t
  if which.isdigit() and int(which) < len(all_trials):
    return all_trials[int(which)]
  raise sweep_lib.SweepError(f'--trial {which!r} is neither a trial name nor an index 0..{len(all_trials) - 1} '
                             f'of the {len(all_trials)} trials')


def _launch_slurm(args, workdir, spec, overrides, all_trials, trials, opts) -> int:
  """Writes the sweep record and the job array's script of the unfinished trials, and submits it."""
  from vvt.studies import runner
  from vvt.studies import slurm
  if fileio.is_url(workdir):
    raise common.UsageError(f'--launch slurm: the sweep directory {workdir} must be a folder the nodes share, '
                            'not a URL')
  sweep_dir = os.path.abspath(workdir)
  todo = launch_lib.unfinished(all_trials, trials, sweep_dir)
  waiting = slurm.queued(sweep_dir)
  if any(all_trials[i].name in waiting for i in todo):
    held = [f'{all_trials[i].name} ({waiting[all_trials[i].name]})' for i in todo if all_trials[i].name in waiting]
    print(f'[sweep] {len(held)} unfinished trials are still in the SLURM queue, not submitted again: '
          f'{", ".join(held[:4])}{", ..." if len(held) > 4 else ""}')
    todo = [i for i in todo if all_trials[i].name not in waiting]
  if not todo:
    print(f'[sweep] all {len(trials)} trials in {workdir} are finished or queued: nothing to submit')
    return 0
  commands = {i: (all_trials[i].name, slurm.task_argv(opts, sweep_dir, i, runner.train_argv(
      spec, overrides, all_trials[i], os.path.join(sweep_dir, all_trials[i].name)), args.lease_s))
      for i in todo}
  header = f'vvt sweep --launch slurm: {spec}, {len(todo)} of {len(all_trials)} trials -> {sweep_dir}'
  text = slurm.script(sweep_dir, commands, opts, throttle=args.parallel or 0, header=header)
  if args.dry_run:
    print(text, end='')
    return 0
  runner.write_sweep_record(workdir, spec, overrides, all_trials)
  path = slurm.write_script(sweep_dir, text)
  job = slurm.submit(path)
  slurm.record_job(sweep_dir, job, todo, [all_trials[i].name for i in todo])
  at_once = f', {args.parallel} at a time' if args.parallel else ''
  print(f'[sweep] submitted job {job}: array {launch_lib.array_spec(todo, args.parallel or 0)} '
        f'({len(todo)} of {len(all_trials)} trials{at_once}; script {path}). Follow it with:')
  for line in slurm.follow_lines(workdir, job):
    print(line)
  return 0


def _launchable(all_trials, trials, sweep_dir: str, dry_run: bool) -> tuple[list[int], list[str], int]:
  """(the indices of the chosen trials to launch: not finished, not held by a live worker; the held ones, named;
  the number of this launch of the sweep). A dry run that cannot read a sweep at a URL (no credentials, no network)
  lists every chosen trial as a first launch, saying so."""
  from vvt.studies import launch
  from vvt.studies import xpk
  try:
    todo = launch.unfinished(all_trials, trials, sweep_dir)
    held = {i: claims.read(fileio.join(sweep_dir, all_trials[i].name)) for i in todo}
    number = xpk.launch_number(sweep_dir) if fileio.exists(sweep_dir) else 1
  except Exception as e:
    if not (dry_run and fileio.is_url(sweep_dir)):
      raise
    print(f'[sweep] could not read {sweep_dir} ({type(e).__name__}: {common.one_line(e)[:200]}): listing every '
          'chosen trial', file=sys.stderr)
    return [i for i, t in enumerate(all_trials) if t in trials], [], 1
  live = [i for i, h in held.items() if h and h['state'] in claims.LIVE]
  return ([i for i in todo if i not in live], [f'{all_trials[i].name} ({claims.holder(held[i])})' for i in live],
          number)


def _launch_xpk(args, workdir, spec, overrides, dist, all_trials, trials, opts) -> int:
  """The unfinished trials as XPK workloads (one per trial) or one `xpk batch` script: printed (--dry-run), or
  written to SWEEP/xpk/ and run."""
  from vvt.studies import runner
  from vvt.studies import xpk
  opts = xpk.check(opts)
  sweep_dir = fileio.abspath(workdir)
  todo, held, number = _launchable(all_trials, trials, sweep_dir, args.dry_run)
  if held:
    print(f'[sweep] {len(held)} unfinished trials are held by running workers, not launched again: '
          f'{", ".join(held[:4])}{", ..." if len(held) > 4 else ""}')
  if not todo:
    print(f'[sweep] all {len(trials)} trials in {workdir} are finished or running: nothing to launch')
    return 0
  header = f'vvt sweep --launch xpk: {spec}, {len(todo)} of {len(all_trials)} trials -> {sweep_dir}'
  if opts.mode == 'batch':
    script_path = xpk.local_path(sweep_dir, xpk.SCRIPT)
    header += f'\nsubmitted with: {xpk.shell_line(xpk.batch_argv(opts, script_path))}'
    text = xpk.batch_script(opts, sweep_dir, todo, args.lease_s, throttle=args.parallel or 0, header=header,
                            distributed=dist)
    if args.dry_run:
      print(text, end='')
      return 0
    runner.write_sweep_record(workdir, spec, overrides, all_trials)
    xpk.local_copy(sweep_dir, xpk.SCRIPT, text)
    out = xpk.run_xpk(xpk.batch_argv(opts, script_path), f'the script {script_path}')
    job = (re.findall(r'Job name: (\S+)', out) or ['?'])[-1]
    xpk.record(sweep_dir, {'mode': 'batch', 'job': job, 'tasks': {str(i): all_trials[i].name for i in todo}})
    print(f'[sweep] submitted {job}: array {launch_lib.array_spec(todo, args.parallel or 0)} ({len(todo)} of '
          f'{len(all_trials)} trials; script {script_path}). Follow it with:')
    for line in xpk.follow_lines(opts, workdir)[-2:]:
      print(line)
    return 0
  names = xpk.workload_names(opts, sweep_dir, todo, number)
  commands = {i: xpk.workload_argv(opts, names[i], xpk.container_command(opts, sweep_dir, str(i), args.lease_s, dist))
              for i in todo}
  text = ''.join(f'# {line}\n' for line in header.splitlines())
  text += f'# one workload per trial: workload {names[todo[0]]} runs trial {todo[0]} ({all_trials[todo[0]].name})\n'
  text += ''.join(xpk.shell_line(commands[i]) + '\n' for i in todo)
  if args.dry_run:
    print(text, end='')
    return 0
  runner.write_sweep_record(workdir, spec, overrides, all_trials)
  xpk.local_copy(sweep_dir, xpk.COMMANDS, text)
  created = {}
  try:
    for i in todo:
      xpk.run_xpk(commands[i], f'workload {names[i]} (trial {i}, {all_trials[i].name})')
      created[names[i]] = all_trials[i].name
      print(f'[sweep] created workload {names[i]}: trial {i} ({all_trials[i].name})', flush=True)
  finally:
    if created:
      xpk.record(sweep_dir, {'mode': 'workload', 'workloads': created})
  print(f'[sweep] {len(created)} workloads on cluster {opts.cluster} ({len(todo)} of {len(all_trials)} trials; '
        f'commands in {fileio.join(sweep_dir, xpk.FOLDER, xpk.COMMANDS)}). Follow them with:')
  for line in xpk.follow_lines(opts, workdir, list(created)):
    print(line)
  return 0


def _print_commands(workdir, spec, overrides, dist, trials) -> int:
  """--launch print: one `vvt train` per trial, with the `distributed.*` fields given (a multi-host slice needs
  them on every host); without any, a note on stderr says which."""
  from vvt.studies import runner
  for t in trials:
    argv = runner.train_argv(spec, overrides, t, fileio.join(workdir, t.name))
    print(runner.shell_command([*argv[:-2], *(f'--config.{k}={v}' for k, v in dist), *argv[-2:]]))
  if not dist:
    print('[sweep] on a multi-host slice run each command on every host with --config.distributed.initialize=True '
          '(jax finds the hosts on Cloud TPU, GKE and SLURM; elsewhere add --config.distributed.coordinator_address='
          'HOST0:PORT, num_processes=N and process_id=I), or run `vvt sweep DIR --config.distributed.initialize=True` '
          'on every host: the slice is then one sweep worker', file=sys.stderr)
  return 0


def _sweep(argv):
  from vvt.studies import slice as slice_lib
  from vvt.studies import slurm
  from vvt.studies import xpk
  slurm_opts, argv = slurm.split_options(argv)
  xpk_opts, argv = xpk.split_options(argv)
  args, spec, overrides = common.parse(_arguments(), argv)
  workdir = _workdir(args)
  if args.status:
    return status_cli.print_status(workdir)
  dist, overrides = slice_lib.distributed_overrides(overrides)
  spec, overrides = _recorded(workdir, spec, overrides)
  if args.parallel is not None and args.parallel < 1:
    raise common.UsageError(f'--parallel must be >= 1, got {args.parallel}')
  for name, opts, default in (('slurm', slurm_opts, slurm.Options()), ('xpk', xpk_opts, xpk.Options())):
    if opts != default and args.launch != name:
      raise common.UsageError(f'--{name}.* options need --launch {name}')
  if args.trial is not None and args.launch in ('slurm', 'xpk'):
    raise common.UsageError(f'--launch {args.launch} launches the unfinished trials; --trial runs one (in a task)')
  if dist and args.launch == 'slurm':
    raise common.UsageError('--launch slurm sets up jax.distributed from SLURM\'s environment (--slurm.nodes): '
                            'no --config.distributed.* with it')
  _check_lease(args)
  if args.trial is not None and (args.only or (args.parallel or 1) != 1):
    raise common.UsageError('--trial runs one trial: no --only or --parallel with it')
  from vvt.studies import sweep as sweep_lib
  all_trials, _ = load_trials(spec)
  trials = [pick_trial(all_trials, args.trial)] if args.trial is not None else sweep_lib.select(all_trials,
                                                                                                args.only)
  running = not args.dry_run and args.launch in ('local', 'slurm')
  if running:
    _ensure_data(check_trial(spec, [*overrides, *dist], trials[0], files=False))
  configs = {t.name: check_trial(spec, [*overrides, *dist], t, files=running) for t in trials}
  if running:
    check_schedules(configs)
  if args.launch == 'slurm':
    return _launch_slurm(args, workdir, spec, overrides, all_trials, trials, slurm_opts)
  if args.launch == 'xpk':
    return _launch_xpk(args, workdir, spec, overrides, dist, all_trials, trials, xpk_opts)
  if args.launch == 'print' and not args.dry_run:
    return _print_commands(workdir, spec, overrides, dist, trials)
  if args.dry_run:
    return _dry_run(workdir, spec, trials, all_trials)
  return _run(args, workdir, spec, overrides, trials, all_trials, configs)


def _dry_run(workdir, spec, trials, all_trials) -> int:
  width = max(len(t.name) for t in trials)
  exists = fileio.exists(workdir)
  for i, t in enumerate(trials, 1):
    state = f'{_state(workdir, t):<12}' if exists else ''
    fields = ' '.join(f'{k}={v}' for k, v in t.raw_overrides())
    print(f'{i:>3}/{len(trials)}  {t.name:<{width}}  {state}{fields}')
  picked = f'{len(trials)} of {len(all_trials)}' if len(trials) != len(all_trials) else f'{len(trials)}'
  print(f'[sweep] {picked} trials of {spec} (valid configs) -> {workdir}/<trial>/')
  return 0


def _run(args, workdir, spec, overrides, trials, all_trials, configs) -> int:
  from vvt.studies import runner
  from vvt.studies import slice as slice_lib
  say = lambda msg: print(msg, flush=True)
  distributed = run_spec.DistributedSpec.of(configs[trials[0].name].distributed)
  group = None
  if slice_lib.wanted(distributed):
    if (args.parallel or 1) > 1:
      raise common.UsageError('a multi-process worker trains one trial at a time on all its processes: no --parallel')
    group = slice_lib.join(distributed, say)
    if not group.leader:
      try:
        runner.follow(group, workdir, say)
      except slice_lib.SliceLost as e:
        slice_lib.abandon(f'{e}; {group.name()} stops')
      group.close()
      return 0
  claims.store_for(fileio.join(workdir, trials[0].name))  # before anything is written: gs:// needs the gcs extra
  runner.write_sweep_record(workdir, spec, overrides, all_trials)
  for t in trials:
    if _state(workdir, t) == 'finished':
      _warn_changed(workdir, t, configs[t.name], say)
  what = f'trial {trials[0].name}' if args.trial is not None else f'{len(trials)} trials'
  who = f'{group.processes} processes, one trial' if group else f'{args.parallel or 1}'
  say(f'[sweep] {what} of {spec} in {workdir} ({who} at a time; a worker on '
      f'{claims.Worker.here().host} pid {os.getpid()})')
  try:
    status = runner.run(trials, spec, overrides, workdir, parallel=args.parallel or 1, say=say,
                        lease_s=args.lease_s, renew_s=args.renew_s, group=group)
  except slice_lib.SliceLost as e:
    slice_lib.abandon(str(e))
  if group:
    group.close()
  failed = [n for n, s in status.items() if s == 'failed']
  if args.trial is None:
    from vvt.cli import results as results_cli
    results_cli.report(workdir, with_summary=not args.no_summary,
                       selected={t.name for t in trials} if args.only else None)
  if failed:
    print(f'vvt sweep: {len(failed)} of {len(trials)} trials failed: {", ".join(failed)} '
          f'(errors in {fileio.join(workdir, "results.md" if args.trial is None else failed[0])})', file=sys.stderr)
    return 1
  return 0


def main(argv) -> int:
  return common.run('vvt sweep', _sweep, argv)
