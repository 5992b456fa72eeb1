"""What a task owns: the interface the train and eval steps, `build_program`, evaluation and the trainer call.

A task is what a run learns and how it is judged, on top of a video backbone (`vvt.models`):

  label_specs(batch_size)                   what a batch carries besides 'inputs', 'mask' (and, for evaluation,
                                            'video_index'): {batch key: (shape, dtype)}
  build_model(model_config, backend)        the flax module: the backbone with the head / outputs the task adds
  prepare(batch, inputs, rng)               (inputs, targets, labels) of a train batch: normalised pixels
                                            (B, T, H, W, 3) (augmented by the task, e.g. mixup), the loss's
                                            targets and the labels the train metrics read
  outputs(module, params, inputs, train, rng)  {name: (B, ...)} the module's outputs
  loss(outputs, targets)                    per-example loss (B,) (the step masks it and divides by the batch)
  train_metrics(outputs, labels)            {metric: (B,)} per-example values the train metrics average
  metric_names                              the names `train_metrics` returns (their order)
  scores(outputs)                           {head: float32 (B, C)} per-view scores the eval step returns
  eval_labels(batch)                        the labels of an eval batch (host numpy) the aggregator reads
  aggregator(num_videos)                    the multi-view aggregator of an evaluation (`Aggregator`)
  main_metric                               the result key the one-line eval summary shows

A task is a frozen dataclass (hashable: it is a static part of the jitted steps), built from the run config by
`vvt.tasks.registry.task_of(config)` (`config.task.name`). Adding a task is one module here, one line in
`vvt.tasks.registry.TASKS` and its tests.

A task checks its own options in a `check` hook (`CheckOptions`, default `no_problems`): a function of a module
that imports neither jax nor flax, named in `vvt.tasks.registry.CHECKS`, which `vvt.config.validation` calls with
the other checks of a config, so that a task's bad options come in the same one-run list of problems.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping, Optional, Protocol


class CheckOptions(Protocol):
  """The `check` hook of a task: `check(config)` -> the problems of the task's options in the run config `config`
  (a ConfigDict, or a RunSpec: the same fields), one line each naming its field, in a stable order; [] when there
  are none. Imports neither jax nor flax (the config's validation calls it before any heavy import)."""

  def __call__(self, config: Any) -> list[str]: ...


def no_problems(config: Any) -> list[str]:
  """The default `check` hook (`CheckOptions`): a task without options of its own has no problems to report."""
  del config
  return []


class Aggregator(Protocol):
  """Accumulates an evaluation's per-view scores by `video_index` and says what they mean.

  add(scores {head: (B, C)}, video_index (B,), mask (B,), labels (the task's `eval_labels` of the batch))
  skip(indices)          leave bad videos out (dataset.on_error='skip')
  result() -> dict       the JSON-ready metrics over the evaluated videos
  arrays() -> dict       the per-video arrays of the `.npz` (scores, labels, class names ...)
  report_files(prefix)   [(path, text or a binary writer f -> None)]: the CSV / PNG files beside the JSON
  class_names, video_ids, average: set by the evaluation before `result()`
  """
  num_videos: int
  skipped: Any
  counts: Any
  class_names: dict
  video_ids: Optional[list]
  average: str

  def add(self, scores: Mapping, video_index, mask, labels: Mapping) -> None: ...
  def skip(self, indices) -> None: ...
  def result(self) -> dict: ...
  def arrays(self) -> dict: ...
  def report_files(self, prefix: str) -> list: ...


class Task(abc.ABC):
  """The interface of a task (see the module docstring); subclasses are frozen dataclasses."""
  name = ''

  @property
  @abc.abstractmethod
  def heads(self) -> Mapping[str, int]:
    """{head: number of outputs}; '' for a single head."""

  @abc.abstractmethod
  def label_specs(self, batch_size: int) -> dict:
    """{batch key: (shape, numpy dtype name)} of the targets a batch carries."""

  def build_model(self, model_config, backend: Optional[str] = None):
    """The flax module of `model_config` (`vvt.models.build`): the backbone and its classifier."""
    import vvt.models
    return vvt.models.build(model_config, backend=backend)

  @abc.abstractmethod
  def prepare(self, batch: Mapping, inputs, rng) -> tuple:
    """(inputs, targets, labels) of a train batch whose normalised pixels are `inputs` (B, T, H, W, 3)."""

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    """{head: (B, C)}: the module applied to `inputs` (dropout from `rng` when training)."""
    from vvt.tasks import losses
    if train:
      out = module.apply({'params': params}, inputs, train=True, rngs={'dropout': rng})
    else:
      out = module.apply({'params': params}, inputs, train=False)
    return losses.as_head_dict(out)

  @abc.abstractmethod
  def loss(self, outputs: Mapping, targets: Mapping):
    """Per-example loss (B,)."""

  @property
  @abc.abstractmethod
  def metric_names(self) -> tuple:
    """The names of `train_metrics`, in order."""

  @abc.abstractmethod
  def train_metrics(self, outputs: Mapping, labels: Mapping) -> dict:
    """{name: float (B,)}: per-example values the train metrics average over the valid rows."""

  @abc.abstractmethod
  def scores(self, outputs: Mapping) -> dict:
    """{head: float32 (B, C)}: the per-view scores of an evaluation."""

  @abc.abstractmethod
  def eval_labels(self, batch: Mapping) -> dict:
    """The labels of an evaluation batch (host numpy) as the aggregator's `add` reads them."""

  @abc.abstractmethod
  def aggregator(self, num_videos: int) -> Aggregator:
    """A fresh multi-view aggregator of `num_videos` videos."""

  @property
  @abc.abstractmethod
  def main_metric(self) -> str:
    """The result key the one-line evaluation summary shows."""
