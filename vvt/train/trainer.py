"""`train_and_evaluate(config, workdir)`: the training loop with exact resume."""
import glob
import json
import math
import os
import re
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vvt.train import checkpoints
from vvt.train import defaults
from vvt.train import evaluate as evaluate_lib
from vvt.train import mesh as mesh_lib
from vvt.train import metrics as metrics_lib
from vvt.train import optimizers
from vvt.train import state as state_lib
from vvt.train import steps as steps_lib


class NonFiniteLossError(FloatingPointError):
  pass


def _patterns(value):
  if value is None:
    return []
  if isinstance(value, str):
    return [p for p in value.split(',') if p]
  return list(value)


def _expand(pattern: str) -> list[str]:
  m = re.fullmatch(r'(.*)@(\d+)', pattern)
  if m:  # sharded name: base@N -> base-00000-of-0000N
    base, n = m.group(1), int(m.group(2))
    names = [f'{base}-{i:05d}-of-{n:05d}' for i in range(n)]
    return [x for x in names if os.path.exists(x)]
  return sorted(glob.glob(pattern))


def check_dataset_files(dataset_cfg, fields=('train_files', 'eval_files')) -> None:
  """A missing dataset path fails before anything compiles, naming the path."""
  for field in fields:
    if field not in dataset_cfg:
      continue
    pats = _patterns(dataset_cfg[field])
    if not pats:
      if dataset_cfg.get('tfds_name') or str(dataset_cfg.get('name', '')).startswith('tfds'):
        continue
      raise FileNotFoundError(f'dataset.{field} is empty: set it to the TFRecord files '
                              '(glob or base@N)')
    base = dataset_cfg.get('data_dir', '') or ''
    for p in pats:
      if '://' in p:  # remote file systems: left to tf.data
        continue
      if base and not os.path.isabs(p):
        p = os.path.join(base, p)
      if not _expand(p):
        raise FileNotFoundError(
            f'dataset.{field}: no file matches {p!r} (absolute: '
            f'{os.path.abspath(p)!r}). Write the synthetic set with '
            '`python -m vvt.train.demo --data_only` or `vvt data synthetic`, '
            'or point the config at your TFRecords.')


def steps_per_epoch_and_total(config, num_train_videos: int) -> tuple[int, int]:
  spe = max(1, math.ceil(num_train_videos / config.batch_size))
  if config.num_train_steps > 0:
    return spe, int(config.num_train_steps)
  return spe, max(1, int(math.ceil(config.num_epochs * spe)))


def build_model_and_init(config, mesh, tx):
  """(module, init_fn, abstract_state with replicated shardings)."""
  import vvt.models  # pylint: disable=g-import-not-at-top
  module = vvt.models.build(config.model)
  m = config.model
  dummy_shape = (1, int(m.num_frames), int(m.image_size), int(m.image_size), 3)
  rep = mesh_lib.replicated(mesh)

  def init_fn(rng):
    r_params, r_drop, r_train = jax.random.split(rng, 3)
    variables = module.init({'params': r_params, 'dropout': r_drop},
                            jnp.zeros(dummy_shape, jnp.float32), train=False)
    return state_lib.create(variables['params'], tx, r_train)

  shapes = jax.eval_shape(init_fn, jax.random.PRNGKey(0))
  abstract = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=rep), shapes)
  return module, init_fn, abstract


def abstract_params(config, mesh):
  """Module and abstract params (with replicated shardings) for evaluation."""
  import vvt.models  # pylint: disable=g-import-not-at-top
  module = vvt.models.build(config.model)
  m = config.model
  shape = (1, int(m.num_frames), int(m.image_size), int(m.image_size), 3)
  rep = mesh_lib.replicated(mesh)
  shapes = jax.eval_shape(
      lambda r: module.init({'params': r, 'dropout': r},
                            jnp.zeros(shape, jnp.float32), train=False)['params'],
      jax.random.PRNGKey(0))
  return module, jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=rep), shapes)


def write_eval_results(workdir: str, step: int, split: str, results: dict,
                       agg: Optional[evaluate_lib.MultiViewAggregator] = None) -> str:
  path = checkpoints.eval_results_path(workdir, step, split)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump({'step': step, 'split': split, **results}, f, indent=2)
  os.replace(tmp, path)
  if agg is not None:
    npz = checkpoints.eval_results_path(workdir, step, split, 'npz')
    arrays = {f'video_scores{"_" + h if h else ""}': v
              for h, v in agg.video_scores().items()}
    arrays.update({f'video_labels{"_" + h if h else ""}': v
                   for h, v in agg.video_labels.items()})
    arrays['views_per_video'] = agg.counts
    with open(npz + '.tmp', 'wb') as f:
      np.savez(f, **arrays)
    os.replace(npz + '.tmp', npz)
  return path


def _check_finite(step: int, status, workdir: str) -> None:
  """Stops the run if the loss or the parameters after update `step` are NaN / inf."""
  status = jax.device_get(status)
  loss, pnorm = float(status['loss']), float(status['param_norm'])
  if math.isfinite(loss) and math.isfinite(pnorm):
    return
  steps = checkpoints.all_steps(workdir)
  last = (f'the last good checkpoint is step {steps[-1]} in '
          f'{checkpoints.checkpoint_dir(workdir)}' if steps else
          'no checkpoint was written before it')
  what = (f'training loss is {loss}' if not math.isfinite(loss) else
          f'parameters became non-finite (global norm {pnorm})')
  raise NonFiniteLossError(
      f'{what} at step {step} (the update from step {step - 1}); stopping '
      f'without saving: {last}')


def train_and_evaluate(config, workdir: str, *, log: Callable = print,
                       stop_after_step: int = -1) -> dict:
  """Trains `config` in `workdir` (resuming from its latest checkpoint), then evaluates.

  Returns the final multi-view evaluation metrics (plus `step`, `workdir`).
  `stop_after_step` (testing aid) stops the loop early without the final eval.
  """
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top
  mesh_lib.maybe_initialize_distributed(config.distributed)
  mesh = mesh_lib.make_mesh(config.mesh.num_devices)
  n_dev, n_proc = mesh.devices.size, jax.process_count()
  defaults.validate(config, n_dev, n_proc)
  check_dataset_files(config.dataset)
  is_chief = jax.process_index() == 0
  if not is_chief:
    log = lambda *a, **k: None  # pylint: disable=unnecessary-lambda-assignment
  workdir = os.path.abspath(workdir)
  os.makedirs(workdir, exist_ok=True)

  num_train = pipeline.num_videos(config.dataset, 'train')
  spe, total = steps_per_epoch_and_total(config, num_train)
  schedule = optimizers.make_schedule(config.schedule, total, spe)
  tx = optimizers.make_optimizer(config.optimizer, schedule)
  module, init_fn, abstract = build_model_and_init(config, mesh, tx)
  rep = mesh_lib.replicated(mesh)

  mngr = checkpoints.manager(workdir, keep=config.checkpoint.keep)
  latest = mngr.latest_step()
  data_position = 0
  if latest is not None and checkpoints.read_meta(workdir, latest).get('kind') == 'train_state':
    state, meta = checkpoints.restore_state(workdir, abstract, latest)
    data_position = int(meta['data_position'])
    log(f'[train] resumed from {checkpoints.checkpoint_dir(workdir)}/{latest} '
        f'(step {int(jax.device_get(state.step))}, data position {data_position})')
    if is_chief:
      metrics_lib.truncate_jsonl(workdir, int(jax.device_get(state.step)))
  else:
    state = jax.jit(init_fn, out_shardings=rep)(jax.random.PRNGKey(config.seed))
    if latest is not None:  # a params-only checkpoint (e.g. converted weights)
      params, _ = checkpoints.load_params(workdir, latest, abstract.params)
      state = jax.jit(lambda p: state_lib.create(p, tx, state.rng),
                      out_shardings=rep)(params)
      log(f'[train] initialised params from params-only checkpoint step {latest}')
    elif config.init_from is not None:
      from vvt.convert import image_init  # pylint: disable=g-import-not-at-top
      params, report = image_init.initialise(state.params, config.init_from, config.model)
      log(f'[train] init_from report:\n{report}')
      if is_chief:
        with open(os.path.join(workdir, 'init_from_report.txt'), 'w') as f:
          f.write(str(report))
      params = jax.device_put(params, rep)
      state = jax.jit(lambda p, r: state_lib.create(p, tx, r),
                      out_shardings=rep)(params, state.rng)
  if is_chief:
    with open(os.path.join(workdir, 'config.json'), 'w') as f:
      f.write(config.to_json_best_effort(indent=2))

  step = int(jax.device_get(state.step))
  log(f'[train] {state_lib.num_params(state.params) / 1e6:.2f}M params, '
      f'{num_train} training videos, {spe} steps/epoch, {total} steps, '
      f'global batch {config.batch_size} on {n_dev} device(s) / {n_proc} process(es); '
      f'workdir {workdir}')
  train_step = steps_lib.make_train_step(module, tx, schedule, config, mesh)
  eval_step = steps_lib.make_eval_step(module, config, mesh)
  train_writer, eval_writer = metrics_lib.make_writers(workdir, is_chief)
  progress = metrics_lib.Progress(total, step, config.batch_size, enabled=is_chief)

  def run_eval(at_step):
    res, agg = evaluate_lib.evaluate(eval_step, state.params, config, mesh,
                                     split=config.eval.split, log=log)
    if is_chief:
      path = write_eval_results(workdir, at_step, config.eval.split, res, agg)
      eval_writer.write_scalars(at_step, {k: v for k, v in res.items()
                                          if isinstance(v, (int, float))})
      eval_writer.flush()
      log(f'[eval] results: {path}')
    return res

  it = pipeline.make_train_iterator(
      config.dataset, global_batch_size=config.batch_size, seed=config.seed,
      start_step=data_position, process_index=jax.process_index(),
      process_count=n_proc)
  accumulated = None
  pending = None  # (step, loss) checked one step late to keep dispatch async
  first = step
  last_saved = step if data_position else None
  while step < total:
    batch = next(it)
    gbatch = mesh_lib.global_batch(batch, mesh, config.batch_size)
    state, m, status = train_step(state, gbatch)
    step += 1
    data_position += 1
    if pending is not None:
      _check_finite(*pending, workdir)
    pending = (step, status)
    accumulated = m if accumulated is None else accumulated.merge(m)
    if step == first + 1:
      _check_finite(*pending, workdir)  # waits for compilation
      progress.start(step)
    if step % config.log_every_steps == 0 or step == total:
      _check_finite(*pending, workdir)
      scalars = {k: float(v) for k, v in jax.device_get(accumulated.compute()).items()}
      scalars.update(progress.rates(step))
      scalars['epoch'] = step / spe
      if config.dataset.on_error == 'skip':  # bad records dropped so far, by reason (this process)
        scalars.update({f'data_skipped_{k}': float(v) for k, v in pipeline.error_counts().items()})
      train_writer.write_scalars(step, scalars)
      progress.report(step, scalars)
      accumulated = None
    if (config.checkpoint.every_steps > 0 and step % config.checkpoint.every_steps == 0) \
        or step == total:
      _check_finite(*pending, workdir)
      checkpoints.save_state(mngr, state, data_position=data_position, config=config)
      last_saved = step
    if 0 < stop_after_step <= step:
      return {'step': step, 'workdir': workdir, 'stopped_early': True}
    if config.eval.every_steps > 0 and step % config.eval.every_steps == 0 \
        and step != total:
      run_eval(step)
  if pending is not None:
    _check_finite(*pending, workdir)
  if last_saved != step:
    checkpoints.save_state(mngr, state, data_position=data_position, config=config)
  train_writer.flush()
  results = run_eval(step)
  if is_chief:
    png = metrics_lib.plot_curves(workdir)
    if png:
      log(f'[train] training curves: {png}')
  mngr.close()
  return {**results, 'step': step, 'workdir': workdir}


def evaluate_checkpoint(config, workdir: str, step: Optional[int] = None,
                        split: Optional[str] = None, log: Callable = print) -> dict:
  """`vvt eval`: multi-view evaluation of a full or params-only checkpoint."""
  mesh_lib.maybe_initialize_distributed(config.distributed)
  mesh = mesh_lib.make_mesh(config.mesh.num_devices)
  defaults.validate(config, mesh.devices.size, jax.process_count())
  split = split or config.eval.split
  workdir = os.path.abspath(workdir)
  # Check the checkpoint first: a wrong --step is the commonest mistake.
  step = checkpoints._check_step(workdir, step)  # pylint: disable=protected-access
  check_dataset_files(config.dataset, fields=('eval_files',))
  module, abstract = abstract_params(config, mesh)
  params, step = checkpoints.load_params(workdir, step, abstract)
  log(f'[eval] checkpoint {checkpoints.checkpoint_dir(workdir)}/{step}')
  eval_step = steps_lib.make_eval_step(module, config, mesh)
  res, agg = evaluate_lib.evaluate(eval_step, params, config, mesh, split=split, log=log)
  if jax.process_index() == 0:
    path = write_eval_results(workdir, step, split, res, agg)
    log(f'[eval] results: {path}')
  return {**res, 'step': step, 'workdir': workdir}
