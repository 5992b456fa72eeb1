"""Training and evaluation of a localisation run (`task.name='localization'`) on feature sequences.

    fit(run, train, test, log) -> (params, results, aggregator)

`run` is the run's RunSpec: its task (`vvt.tasks.localization`, options `run.task.localization`), `batch_size`,
`num_epochs` / `num_train_steps`, `optimizer`, `schedule` (`vvt.train.optimizers`, as every run's) and `seed`;
`train` / `test` the `SequenceSet`s (`vvt.data.open_sequences`). Training batches come from
`vvt.data.sequence_train_batches` (random crops to `max_seq_len`, order a function of seed and epoch); the
evaluation runs each test video whole, padded to one length (a multiple of the pyramid's coarsest stride), and
scores the detections with the task's aggregator (mAP at the protocol's tIoU thresholds).
"""
import json
import math
import os
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from vvt import progress as progress_lib
from vvt.tasks import registry as task_registry
from vvt.train import optimizers

HEAD_FILE = 'localization_head.safetensors'


def train_step(task, module, tx):
  """jitted (params, opt_state, batch, rng) -> (params, opt_state, {'loss', 'cls_loss', 'reg_loss'})."""
  def loss_fn(params, batch, rng):
    inputs, targets, labels = task.prepare(batch, batch['inputs'], rng)
    outputs = task.outputs(module, params, inputs, train=True, rng=rng)
    parts = task.train_metrics(outputs, labels)
    return jnp.sum(task.loss(outputs, targets)), {k: jnp.sum(v) for k, v in parts.items()}

  @jax.jit
  def step(params, opt_state, batch, rng):
    (loss, parts), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, batch, rng)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, dict(parts, loss=loss)
  return step


def eval_length(spec, test) -> int:
  """The padded length of the evaluation (`spec`: the LocalizationSpec): the longest test sequence (at least
  `max_seq_len`), rounded up to a multiple of 2^(levels - 1)."""
  unit = 2 ** (spec.levels - 1)
  longest = max([spec.max_seq_len, *test.lengths])
  return int(math.ceil(longest / unit) * unit)


def evaluate(task, spec, module, params, test, batch_size: int, truth: int, class_names=None):
  """(results, aggregator) of `params` on every video of `test` (see the module docstring); `truth`: the most
  ground-truth segments of a video."""
  from vvt.data import sequence_eval_batches
  length = eval_length(spec, test)
  agg = task.aggregator(len(test))
  agg.sequences, agg.class_names = test, list(class_names or agg.class_names)
  scores = jax.jit(lambda p, x, s: task.scores(module.apply({'params': p}, x, s, train=False)))
  t0 = time.time()
  for batch in sequence_eval_batches(test, batch_size, length, truth):
    out = jax.device_get(scores(params, batch['inputs'], batch['steps']))
    agg.add(batch['video_index'], batch['mask'], out['probs'], out['offsets'], length)
  result = agg.result()
  result['eval_seconds'] = time.time() - t0
  return result, agg


def _steps(run, num_videos: int) -> tuple[int, int]:
  epoch = max(1, math.ceil(num_videos / run.batch_size))
  total = run.num_train_steps if run.num_train_steps > 0 else max(1, math.ceil(run.num_epochs * epoch))
  return epoch, int(total)


def fit(run, train, test, log: Callable = print, class_names=None):
  """Trains the run's ActionFormer head on `train`, evaluates it on `test` -> (params, results, aggregator)."""
  import dataclasses

  from vvt.data import sequence_train_batches
  truth = max([1, *(len(l) for l in train.labels + test.labels)])
  task = dataclasses.replace(task_registry.task_of(run), truth_segments=truth)
  if class_names:  # the annotations' label list
    task = dataclasses.replace(task, num_classes=len(class_names))
  spec, module = run.task.localization, task.build_model()
  epoch, total = _steps(run, len(train))
  tx = optimizers.make_optimizer(run.optimizer, optimizers.make_schedule(run.schedule, total, epoch))
  rng = jax.random.PRNGKey(run.seed)
  params = jax.jit(module.init)(rng, jnp.zeros((1, spec.max_seq_len, train.feature_dim)),
                                jnp.ones((1, spec.max_seq_len), bool))['params']
  opt_state, step = tx.init(params), train_step(task, module, tx)
  batches = sequence_train_batches(train, run.batch_size, spec.max_seq_len, truth, seed=run.seed,
                                   trunc_thresh=spec.trunc_thresh, crop_ratio=spec.crop_ratio)
  bar = progress_lib.bar(total, 'train', 'step', disable=not log, leave=False)
  t0 = time.time()
  for n in range(total):
    params, opt_state, metrics = step(params, opt_state, next(batches), jax.random.fold_in(rng, n))
    bar.update(1)
    if log and ((n + 1) % epoch == 0 or n + 1 == total) and (n + 1) // epoch % 10 == 0:
      log(f'[train] step {n + 1}/{total}: loss {float(metrics["loss"]) / run.batch_size:.4f}')
  bar.close()
  seconds = time.time() - t0
  result, agg = evaluate(task, spec, module, params, test, run.batch_size, truth, class_names)
  result.update(train_seconds=seconds, steps=total, steps_per_epoch=epoch,
                loss=float(np.asarray(metrics['loss'])) / run.batch_size)
  return params, result, agg


def read_sets(spec, log: Callable = print):
  """(train, test SequenceSets, class names) of `spec` (a LocalizationSpec): its annotations' two subsets
  (`vvt.data.read_annotations`) with the sequences of `spec.sequences`; the videos without a sequence counted and
  said."""
  from vvt.data import SequenceError
  from vvt.data import open_sequences
  from vvt.data import read_annotations
  from vvt.data import sequence_truth
  from vvt.data import sequences_skipped_line
  sets, labels = [], None
  for subset in (spec.train_subset, spec.eval_subset):  # a THUMOS14 folder: each subset's files, one label list
    annotations = read_annotations(spec.annotations, subset=subset, labels=labels)
    labels = annotations.labels
    found = open_sequences(spec.sequences, sequence_truth(annotations))
    if not len(found):
      raise SequenceError(f'task.localization: no video of subset {subset!r} of {spec.annotations} has a feature '
                          f'sequence in {spec.sequences}')
    line = sequences_skipped_line(found, f'{subset} videos')
    if line and log:
      log(line)
    sets.append(found)
  return sets[0], sets[1], list(labels)


def results_prefix(workdir: str, spec) -> str:
  """WORKDIR/localization_<eval subset>_<protocol>: the results' files add .json, _classes.csv, _segments.png."""
  return os.path.join(workdir, f'localization_{spec.eval_subset}_{spec.protocol}')


def write_results(workdir: str, spec, result: dict, agg) -> str:
  """The results JSON (with the thresholds and the protocol), the per-class CSV and the PNG; returns the JSON."""
  from vvt import fileio
  prefix = results_prefix(workdir, spec)
  fileio.makedirs(workdir)
  for path, content in agg.report_files(prefix):
    if isinstance(content, str):
      fileio.atomic_write_text(path, content)
    else:
      fileio.atomic_write(path, content, 'wb')
  fileio.atomic_write_text(prefix + '.json', json.dumps(result, indent=2) + '\n')
  return prefix + '.json'


def train_and_evaluate(run, workdir: str, log: Callable = print) -> dict:
  """A localisation run of the RunSpec `run` in `workdir`: its sequences and annotations read, the head trained
  and evaluated, the head's weights (`save_head`) and the results (`write_results`) written; returns the results
  (and 'results': the JSON's path)."""
  spec = run.task.localization
  train, test, names = read_sets(spec, log)
  log(f'[train] {len(train)} {spec.train_subset} videos, {len(test)} {spec.eval_subset} videos, '
      f'{len(names)} classes, {train.feature_dim}-dim features')
  params, result, agg = fit(run, train, test, log, class_names=names)
  result.update(subset=spec.eval_subset, sequences=spec.sequences, annotations=spec.annotations,
                weights=os.path.join(workdir, HEAD_FILE))
  save_head(workdir, run, params)
  result['results'] = write_results(workdir, spec, result, agg)
  return result


def save_head(workdir: str, run, params) -> None:
  """WORKDIR/config.json (the run's config) and WORKDIR/localization_head.safetensors (the trained head, its
  config in the file's metadata; `vvt.convert.export.from_safetensors` reads it)."""
  from vvt import fileio
  from vvt.config import run_file
  from vvt.convert import export
  fileio.makedirs(workdir)
  run_file.write(workdir, run.config)
  export.to_safetensors(jax.device_get(params), os.path.join(workdir, HEAD_FILE), config=run.config,
                        metadata={'task': 'localization'})
