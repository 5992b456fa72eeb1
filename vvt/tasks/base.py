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
  main_metric                               the result key the one-line summaries of a run and an evaluation
                                            show (`vvt train`'s done line, `vvt eval`'s)
  label_heads                               {head: classes} of the labels the evaluation names (default: heads)
  optimizer(make, optimizer, schedule)      the run's optimiser (default: `make(optimizer, schedule)`, every
                                            param trained alike; a probe: the backbone frozen, each probe its own)
  backbone, own_params                      the checkpoint of a frozen backbone the trainer loads before step 0
                                            ('' for none) and the top-level params the task adds, left fresh
  carried_params                            of own_params, those `--init` / init_from loads from a vvt checkpoint
                                            that has them, all of the model's shapes (else fresh, said in a line)
  from_init(params)                         the params once init_from loaded them (default: as they are; jepa:
                                            its target encoder a copy of the loaded encoder)
  carried_advice(name, checkpoint, model)   what to set so that a `carried_params` tensor of another shape loads
                                            ('' by default; jepa: the mask sets for the predictor's mask tokens)
  names                                     the task's alternative models a prediction chooses one of (a probe
                                            grid's probes); () for a task of one model
  probability_average(eval_average)         how `vvt predict` turns per-view scores into a video's
                                            probabilities: `eval_average` (softmax of averaged logits or averaged
                                            softmax), or 'sigmoid' (each class's own, multi-label)
  result_lines(result, files_prefix)        lines a command prints after an evaluation's main metric (a probe
                                            run: its winner and the table of every probe); default none
  eval_inputs(batch, inputs)                what `outputs` takes in the eval step: default the normalised pixels
                                            `inputs`; a video-text task adds the batch's tokens
  batch_text(tokenize)                      None (default), or fn(numpy batch) -> the batch with its 'caption'
                                            strings (`dataset.captions`) tokenised by `tokenize`: what the data
                                            pipeline applies to each batch of a task that reads captions
  eval_texts(class_names)                   the texts an evaluation encodes once with the model's text tower before
                                            its batches (zero-shot: the classes' prompts), () by default; their
                                            embeddings go to the aggregator's `set_text_embeddings`

The hooks that read a run config before any heavy import live apart, in `ConfigHooks` (no jax, no flax):

  check(config)             the problems of the task's options (`CheckOptions`), in the config's one-run list
  multi_hot_labels(config)  whether the run reads multi-hot labels (`dataset.multi_label`)
  summary_note(config)      a line `vvt summary` adds under the model's figures ('' for none)
  start_problems(config)    the problems of what a training run starts from (checked with its files)
  backbone_field            the config field of a frozen backbone's weights, which `vvt train --init` sets
  best_of_grid              whether the run trains a grid of models whose evaluation names the best (an export
                            writes that one)
  runs_on                   what a run of the task reads and so which loop `vvt train` runs: 'clips' (video
                            clips) or 'feature_sequences' (feature sequences and annotations)
  reads_labels              False for a task that reads no labels (pretraining): num_classes may be unset, and
                            then no record's label is read
  hf_pretraining            whether an export writes the run's pretraining model (encoder and, e.g., predictor)
  results_name              the word an evaluation's files carry after the split ('' for none: eval_<step>_<split>)
  main_metric_goal          'max' (an accuracy, a mAP) or 'min' (a loss): which of a run's evaluations is its best
  result_keys               the prefixes of the result keys `vvt results` tabulates (default 'video_', 'clip_')
  hf_pretraining_fields     the config.json fields of that pretraining model the run's task options decide

`vvt.tasks.registry.hooks_of(config)` gives them; code outside `vvt.tasks` calls only these hooks (never asks a
task's name or whether it has an attribute: `tests/tasks/test_interface.py` checks it).
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable, Mapping, Optional, Protocol


class CheckOptions(Protocol):
  """The `check` hook of a task: `check(config)` -> the problems of the task's options in the run config `config`
  (a ConfigDict, or its JSON values as config.json holds them: never a RunSpec, these hooks run before the config
  is resolved), one line each naming its field, in a stable order; [] when there are none. Imports neither jax nor
  flax (the config's validation calls it before any heavy import)."""

  def __call__(self, config: Any) -> list[str]: ...


def no_problems(config: Any) -> list[str]:
  """The default `check` hook (`CheckOptions`): a task without options of its own has no problems to report."""
  del config
  return []


def never(config: Any) -> bool:
  """The default `multi_hot_labels` hook: the task reads one class index per video (and head)."""
  del config
  return False


def always(config: Any) -> bool:
  """`multi_hot_labels` of a task that always reads multi-hot labels."""
  del config
  return True


def no_note(config: Any) -> str:
  """The default `summary_note` hook: the model summary says all there is."""
  del config
  return ''


def no_fields(config: Any) -> dict:
  """The default `hf_pretraining_fields` hook: the task's options add nothing to an exported config.json."""
  del config
  return {}


@dataclasses.dataclass(frozen=True)
class ConfigHooks:
  """The hooks of a task that read a run config (a ConfigDict, or its JSON values as config.json holds them) before
  any heavy import, on the config side of the boundary: functions of a module that imports neither jax nor flax.

  check             `CheckOptions`: the problems of the task's options, one line each naming its field
  multi_hot_labels  config -> bool: whether the run reads multi-hot labels (`dataset.multi_label` records)
  summary_note      config -> str: a line `vvt summary` prints under the model's figures, '' for none
  start_problems    config -> [str]: the problems of what a training run starts from, one line each naming its
                    field (the config's validation adds them to the missing files; commands that only read the
                    config, such as `vvt memory`, do not ask)
  backbone_field    the config field ('task.probe.backbone') naming a frozen backbone's weights: `vvt train --init
                    SOURCE` sets it (and converts SOURCE as it converts any --init), and the config's validation
                    checks it names something a run starts from; '' for a task that trains its whole model (--init
                    initialises it)
  best_of_grid      whether the run trains a grid of alternative models (a probe grid: `Task.names`) of which its
                    evaluation names the best (`best_probe`): `vvt export --format hf` writes that one
  runs_on           what a run reads and so which loop `vvt train` runs: 'clips' (video clips through the data
                    pipeline, the trainer) or 'feature_sequences' (feature sequences of untrimmed videos with their
                    annotations, `vvt.train.localization_run`)
  reads_labels      False for a task that learns from the videos alone (masked pretraining): the config's
                    num_classes may be left unset (0), the model then has a one-output head the task never reads,
                    and the data pipeline reads no label of any record (a CSV of paths only, records without
                    `clip/label/*`)
  hf_pretraining    whether `vvt export --format hf` writes the run's pretraining model (the encoder and the task's
                    own modules, e.g. V-JEPA 2's predictor: a `VJEPA2Model`) instead of a classifier
  results_name      the word an evaluation's files are named by after the split (`vvt.train.evaluate`:
                    eval_<step>_<split>_<results_name>[_<protocol>].json): '' (default) keeps eval_<step>_<split>,
                    the name of a run's own evaluation; the two evaluations of one video-text checkpoint
                    (zero-shot, retrieval) name theirs, so that neither overwrites the other
  main_metric_goal  'max' (default: an accuracy, a mAP, a recall) or 'min' (a loss): how `vvt results` picks a
                    run's best evaluation by the main metric its results record (`Task.main_metric`)
  result_keys       the prefixes of the keys of a run's final results that `vvt results` tabulates beside the main
                    metric (default ('video_', 'clip_'): a classification's video and clip accuracies)
  hf_pretraining_fields  config -> {field: value}: the fields of that pretraining model's config.json which the
                    run's task options decide (mae: `norm_pix_loss`), over the exporter's defaults; {} by default
  """
  check: CheckOptions = no_problems
  multi_hot_labels: Callable[[Any], bool] = never
  summary_note: Callable[[Any], str] = no_note
  start_problems: Callable[[Any], list] = no_problems
  backbone_field: str = ''
  best_of_grid: bool = False
  runs_on: str = 'clips'
  reads_labels: bool = True
  hf_pretraining: bool = False
  results_name: str = ''
  main_metric_goal: str = 'max'
  result_keys: tuple = ('video_', 'clip_')
  hf_pretraining_fields: Callable[[Any], dict] = no_fields


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
  backbone: str = ''         # the checkpoint of a frozen backbone the trainer loads ('' for none)
  own_params: tuple = ()     # the top-level params the task adds to the backbone's (left fresh by init_from)
  carried_params: tuple = ()  # of own_params, those init_from loads where the checkpoint has them all (else fresh)

  @property
  @abc.abstractmethod
  def heads(self) -> Mapping[str, int]:
    """{head: number of outputs}; '' for a single head."""

  @abc.abstractmethod
  def label_specs(self, batch_size: int) -> dict:
    """{batch key: (shape, numpy dtype name)} of the targets a batch carries."""

  def build_model(self, model_config, backend: Optional[str] = None):
    """The flax module of the run's ModelSpec `model_config` (`run.model`; `vvt.models.build`): the backbone and its
    classifier."""
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
  def metric_names(self) -> tuple:
    """The names of `train_metrics`, in order (default: none: a task whose training reports its loss only)."""
    return ()

  def train_metrics(self, outputs: Mapping, labels: Mapping) -> dict:
    """{name: float (B,)}: per-example values the train metrics average over the valid rows (default: none)."""
    del outputs, labels
    return {}

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

  @property
  def label_heads(self) -> Mapping[str, int]:
    """{head: number of classes} of the labels, whose class names the evaluation reads (default: `heads`)."""
    return self.heads

  def optimizer(self, make: Callable, optimizer, schedule):
    """The run's optimiser: `make(optimizer, schedule)` (`vvt.train.optimizers.make_optimizer` of the run's
    optimizer spec and lr schedule), every param trained alike. A task that partitions its params (a frozen
    backbone, each probe its own lr) overrides it."""
    return make(optimizer, schedule)

  @property
  def names(self) -> tuple:
    """The names of the task's alternative models a prediction chooses one of (a probe grid's probes); () for a
    task of one model."""
    return ()

  def probability_average(self, eval_average: str) -> str:
    """How `vvt predict` makes a video's probabilities of its views' scores: `eval_average` ('logits': the
    softmax of the averaged logits, 'softmax': the averaged softmax), or 'sigmoid' (each class's own averaged
    sigmoid, for a multi-label task)."""
    return str(eval_average)

  def result_lines(self, result: Mapping, files_prefix: str) -> list:
    """Lines a command prints after the main metric of an evaluation's `result` (`files_prefix`: the path of its
    files without the suffix, `vvt.train.evaluate.files_prefix`); default none."""
    del result, files_prefix
    return []

  def eval_inputs(self, batch: Mapping, inputs):
    """What `outputs` takes in the eval step, of an eval batch and its normalised pixels `inputs` (B, T, H, W, 3):
    the pixels (default); a video-text task adds the batch's tokens."""
    del batch
    return inputs

  def batch_text(self, tokenize: Callable) -> Optional[Callable]:
    """None (default: the task reads no text), or fn(numpy batch) -> the batch with its 'caption' strings (B, K)
    replaced by their tokens, `tokenize(texts) -> (input_ids (n, L) int32, attention_mask (n, L) int32)` (the
    model's tokenizer): the data pipeline's `text`."""
    del tokenize
    return None

  def eval_texts(self, class_names: Mapping) -> tuple:
    """The texts an evaluation encodes once with the model's text tower before its batches, of the class names
    it read ({head: names or None}); their embeddings (n, E) go to the aggregator's `set_text_embeddings`. () by
    default (nothing encoded)."""
    del class_names
    return ()

  def from_init(self, params: dict) -> dict:
    """The params once init_from (`vvt train --init`) loaded the backbone's and the `carried_params` the checkpoint
    has: as they are by default; a task whose params copy others (an EMA target encoder) sets them here."""
    return params

  def carried_advice(self, name: str, checkpoint_shape: tuple, model_shape: tuple) -> str:
    """What the config should set so that init_from loads a `carried_params` part whose tensor `name` ('part/...')
    has `checkpoint_shape` in the checkpoint and `model_shape` in the model: words the one line of the part left
    fresh ends with; '' (default) where the line naming the difference says all."""
    del name, checkpoint_shape, model_shape
    return ''
