"""A localisation run in its workdir: `vvt train` and `vvt eval` of a task whose `runs_on` hook is
'feature_sequences' (`task.name='localization'`).

    train_and_evaluate(run, workdir) -> results     the sequences and annotations read, the head trained (resumed
                                                    from WORKDIR/checkpoints), evaluated, its files written
    evaluate_checkpoint(run, workdir, step) -> results    `vvt eval`: a checkpoint's params evaluated again
    done_line(results) -> str                        what the command says at the end

Files: WORKDIR/config.json, checkpoints/<step>/ (`vvt.train.checkpoints`), localization_head.safetensors (the
trained head, the export) and localization_<eval subset>_<protocol>.json, _classes.csv, _segments.png.
"""
import json
import os
from typing import Callable, Optional

import jax

from vvt.train import checkpoints
from vvt.train import localization
from vvt.train import mesh as mesh_lib
from vvt.train.signals import StopSignals

HEAD_FILE = localization.HEAD_FILE


def read_sets(run, log: Callable = print):
  """(train, test SequenceSets, class names) of the RunSpec `run` (its LocalizationSpec `run.task.localization`):
  its annotations' two subsets (`vvt.data.read_annotations`) with the sequences of `spec.sequences`; the videos
  without a sequence counted and said. The class names, whose order is the head's outputs': the run's
  `class_names` in their order where the config gives them (an annotation's label outside them is refused), else
  the annotations' labels, sorted."""
  from vvt.data import SequenceError
  from vvt.data import open_sequences
  from vvt.data import read_annotations
  from vvt.data import sequence_truth
  from vvt.data import sequences_skipped_line
  spec = run.task.localization
  sets, labels = [], run.class_names
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
  return results_json(workdir, spec.eval_subset, spec.protocol)[:-len('.json')]


def results_json(workdir: str, eval_subset: str, protocol: str) -> str:
  """The results JSON of a run that evaluates `eval_subset` by `protocol` (its config's `task.localization`), as
  `write_results` names it: what `vvt results` and the sweeps read as the run's final evaluation."""
  return os.path.join(workdir, f'localization_{eval_subset}_{protocol}.json')


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


def check_resume(run, workdir: str, allow_config_change: bool, log: Callable) -> None:
  """Before resuming a training state: a change of WORKDIR/config.json that alters what the run learns is refused
  (`vvt.config.resume`) unless `allow_config_change`."""
  from vvt.config import resume
  from vvt.config import run_file
  if checkpoints.all_steps(workdir):
    resume.check_resume(run_file.load_saved(workdir), run.config_values, allow_config_change=allow_config_change,
                        log=log)


def train_and_evaluate(run, workdir: str, log: Callable = print, allow_config_change: bool = False,
                       stop_after_step: int = -1) -> dict:
  """A localisation run of the RunSpec `run` in `workdir` (resumed from its checkpoints): its sequences and
  annotations read, the head trained and evaluated, the head's weights (`save_head`) and the results
  (`write_results`) written; returns the results (and 'results': the JSON's path). `stop_after_step` (a testing
  aid) stops after that step, checkpointed, without evaluating: {'step', 'stopped_early'}."""
  from vvt import fileio
  from vvt.config import run_file
  mesh_lib.maybe_initialize_distributed(run.distributed)  # before any use of jax (`jax.process_index` below)
  with StopSignals(log) as stop:
    stop.check()
    workdir = checkpoints.abspath(workdir)
    spec = run.task.localization
    train, test, names = read_sets(run, log)
    check_resume(run, workdir, allow_config_change, log)
    log(f'[train] {len(train)} {spec.train_subset} videos, {len(test)} {spec.eval_subset} videos, '
        f'{len(names)} classes, {train.feature_dim}-dim features')
    if jax.process_index() == 0:
      fileio.makedirs(workdir)
      run_file.write(workdir, run.config)
    params, result, agg = localization.fit(run, train, test, log, class_names=names, workdir=workdir, stop=stop,
                                           stop_after_step=stop_after_step)
  if result is None:
    return {'step': stop_after_step, 'stopped_early': True, 'workdir': workdir}
  result.update(subset=spec.eval_subset, sequences=spec.sequences, annotations=spec.annotations,
                weights=os.path.join(workdir, HEAD_FILE), workdir=workdir)
  if jax.process_index() == 0:
    save_head(workdir, run, params)
    result['results'] = write_results(workdir, spec, result, agg)
  return result


def evaluate_checkpoint(run, workdir: str, step: Optional[int] = None, log: Callable = print) -> dict:
  """`vvt eval` of a localisation run: the params of checkpoint `step` (default: the newest intact one) on the
  run's eval subset; the results files written as the run writes them (with 'step')."""
  spec, workdir = run.task.localization, checkpoints.abspath(workdir)
  mesh_lib.maybe_initialize_distributed(run.distributed)  # before any use of jax
  checkpoints.resolve_step(workdir, step)  # first: no checkpoint, or a wrong --step, is the commonest mistake
  train, test, names = read_sets(run, log)
  setup = localization.prepare(run, train, test, names)
  one = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=one),
                          localization.init_state(run, setup, train.feature_dim, abstract=True).params)
  step, (params, _), _ = checkpoints.load_with_fallback(
      workdir, lambda s: checkpoints.load_params(workdir, s, abstract), step=step, log=log)
  log(f'[eval] checkpoint {checkpoints.checkpoint_dir(workdir)}/{step}')
  result, agg = localization.evaluate(setup.task, spec, setup.module, params, test, run.batch_size, setup.truth,
                                      names)
  result.update(step=step, subset=spec.eval_subset, sequences=spec.sequences, annotations=spec.annotations,
                workdir=workdir)
  if jax.process_index() == 0:
    result['results'] = write_results(workdir, spec, result, agg)
  return result


def done_line(res: dict) -> str:
  """`[done] average_map = ... over tIoU ... (<protocol>) on N <subset> videos; <results JSON>`."""
  thresholds = ', '.join(f'{t:g}' for t in res['thresholds'])
  return (f'[done] average_map = {res["average_map"]:.4f} over tIoU {thresholds} ({res["protocol"]}) on '
          f'{res["num_videos"]} {res["subset"]} videos; {res.get("results", res["workdir"])}')


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
