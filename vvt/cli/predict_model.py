"""The model `vvt predict` runs, for every task (`vvt.tasks`): per-view scores and logits, and what they mean.

  classification   the heads of `model.num_classes`; per-view logits (or softmax probabilities under
                   `eval.average='softmax'`) averaged per video, then a softmax: the classes' probabilities sum to 1
  multilabel       one head; per-view sigmoid probabilities averaged per video: each class's own probability
                   (several classes may be near 1, or none)
  probe            one probe of the grid, as its base task (classification or multilabel) reads it: `--probe NAME`,
                   else the best probe of the run's evaluation of that step (`best_probe` of
                   `checkpoints/eval_STEP_SPLIT.json`, as `vvt eval` picks it)

    model = load(run, workdir, step, probe=None)
    scores, logits = model.predict(uint8 (B, T, H, W, 3))      # {head: (B, C)} each, host numpy
    probabilities(mean scores (N, C), model.average)           # (N, C) per video
"""
from __future__ import annotations

import dataclasses
import json
from typing import Callable, Optional

import numpy as np

from vvt import fileio
from vvt.cli import common

SIGMOID = 'sigmoid'  # `average` of a multi-label task: the views' sigmoid probabilities averaged, per class


@dataclasses.dataclass(frozen=True)
class Model:
  """A loaded checkpoint ready to predict: `predict(x) -> (scores, logits)`, {head: (B, C)} each."""
  predict: Callable
  heads: dict            # {head: num_classes} of the scores ('' for one head, a probe run's chosen probe too)
  step: int
  average: str           # 'logits' | 'softmax' (classification, eval.average) | 'sigmoid' (multilabel)
  probe: Optional[str]   # the probe of a probe run, else None


def probabilities(scores: np.ndarray, average: str) -> np.ndarray:
  """(N, C) views' scores averaged per video -> (N, C) probabilities: the softmax of averaged logits, the averaged
  softmax ('softmax'), or each class's averaged sigmoid ('sigmoid', multi-label: they need not sum to 1)."""
  from vvt.tasks import eval_report
  if average == SIGMOID:
    return np.asarray(scores, np.float64)
  return eval_report.probabilities(scores, average)


def average_of(task, eval_average: str) -> str:
  """How the task's per-view scores become a video's probabilities (see `probabilities`)."""
  return task.probability_average(eval_average)  # a multi-label task's: SIGMOID; a probe's: its base task's


def best_probe(workdir: str, step: int, split: str) -> Optional[str]:
  """The `best_probe` of the saved evaluation of `step` on `split`, or None when there is none."""
  from vvt.train import checkpoints
  path = checkpoints.eval_results_path(checkpoints.abspath(workdir), step, split)
  if not fileio.exists(path):
    return None
  try:
    return json.loads(fileio.read_text(path)).get('best_probe')
  except ValueError:
    return None


def choose_probe(task, chosen: Optional[str], workdir: str, step: int, split: str) -> Optional[str]:
  """The probe a prediction reads: None for a task without probes; `chosen` (--probe), else the best of the saved
  evaluation. UsageError (one line) for --probe on another task, an unknown probe, or no evaluation to pick by."""
  names = tuple(task.names)
  span = f'{names[0]} ... {names[-1]}' if names else ''
  if not names:
    if chosen:
      raise common.UsageError(f'--probe {chosen}: only a probe run (task.name=\'probe\') has probes; this run\'s '
                              f'task is {task.name!r}')
    return None
  if chosen:
    if chosen not in names:
      raise common.UsageError(f'--probe {chosen}: not a probe of this run ({span})')
    return chosen
  best = best_probe(workdir, step, split)
  if best not in names:
    raise common.UsageError(
        f'a probe run predicts with its best probe, which its evaluation of step {step} names: no best_probe in '
        f'{workdir}/checkpoints/eval_{step}_{split}.json (run `vvt eval --workdir {workdir} --step {step}` first, '
        f'or give --probe: {span})')
  return best


def _step_fn(program, probe: Optional[str]):
  """`(params, {'inputs': uint8 (B, T, H, W, 3)}) -> ((scores, logits), {})` before jit: the task's per-view
  scores and its raw outputs, {head: (B, C)} each (a probe run: the chosen probe's, as the head '')."""
  from vvt.data import normalize
  task, module, norm = program.task, program.module, program.eval_settings.normalization

  def step(params, batch):
    logits = task.outputs(module, params, normalize(batch['inputs'], norm), train=False)
    scores = task.scores(logits)
    if probe is not None:
      scores, logits = {'': scores[probe]}, {'': logits[probe]}
    return (scores, logits), {}

  return step


def load(run, workdir: str, step: Optional[int], probe: Optional[str] = None) -> Model:
  """The checkpoint of `workdir` at `step` (default: latest; EMA params where it has them unless eval.raw_params)
  as RunSpec `run` builds it, on this host's first device; `probe`: --probe of a probe run (see `choose_probe`)."""
  import jax

  from vvt.train import checkpoints
  from vvt.train import mesh as mesh_lib
  from vvt.train import program as program_lib
  from vvt.train import steps
  path = checkpoints.abspath(workdir)
  step = checkpoints.resolve_step(path, step)
  program = program_lib.build_program(run, mesh_lib.make_mesh(devices=jax.local_devices()[:1]))
  task = program.task
  probe = choose_probe(task, probe, workdir, step, run.eval.split)  # refused before the params load
  # restored in the config's encoder layout, whichever the step was written in; the EMA params where it has them
  params, step, _ = checkpoints.load_eval_params(path, step, program.abstract_params(), raw=run.eval.raw_params)
  fn = steps.jit_eval_step(_step_fn(program, probe), program.mesh, program.param_shardings, program.logical_rules)
  heads = {'': task.heads[probe]} if probe is not None else dict(task.heads)

  def predict(x):
    (scores, logits), _ = fn(params, {'inputs': x})
    return jax.device_get(scores), jax.device_get(logits)

  return Model(predict=predict, heads=heads, step=int(step), average=average_of(task, run.eval.average),
               probe=probe)
