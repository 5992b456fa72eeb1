"""The options and checks of the video-text tasks (`zero_shot`, `retrieval`): their `check` hooks
(`vvt.tasks.base.CheckOptions`). Imports neither jax nor flax: `vvt.config.validation` calls them with the other
checks of a run config, so each problem is one line of the config's one-run list, before any heavy import.

  classification, multilabel   not on a video-text model (it has no classifier head)
  zero_shot   task.zero_shot.templates: a non-empty tuple of prompts with one '{}' each; a video-text model; no
              training run (its `start_problems`)
  retrieval   dataset.captions >= 1 (the captions read per video) from TFRecords or a video list; a video-text
              model; optimizer.accumulation_steps 1 (the contrastive loss's negatives are the whole batch's)
"""
from __future__ import annotations

from typing import Any

from vvt.tasks import base as base_lib
from vvt.tasks import prompts

CAPTION_SOURCES = ('dmvr', 'video_folder')


def _get(obj, name: str, default=None):
  """A field of a ConfigDict or of a spec (the RunSpec's sections have the config's fields)."""
  if hasattr(obj, 'get') and not hasattr(obj, '__dataclass_fields__'):
    return obj.get(name, default)
  return getattr(obj, name, default)


def _data(config):
  return _get(config, 'dataset') or _get(config, 'data')


def text_of(config):
  """The text tower section (`model.text`) of a run config or RunSpec, None for a video model."""
  return _get(_get(config, 'model'), 'text')


def _model_problems(config, name: str) -> list:
  if text_of(config) is None:
    return [f"task.name={name!r} needs a video-text model: model.text (its text tower, vvt/models/text_config.py), "
            "e.g. a converted VideoPrism or Perception Encoder video-text folder"]
  return []


def check_zero_shot(config: Any) -> list[str]:
  """The problems of a zero-shot run: its templates and its model."""
  section = _get(_get(config, 'task'), 'zero_shot')
  templates = _get(section, 'templates', prompts.DEFAULT_TEMPLATES) if section is not None else ()
  return prompts.template_problems('task.zero_shot.templates', templates) + _model_problems(config, 'zero_shot')


def check_retrieval(config: Any) -> list[str]:
  """The problems of a retrieval run: its captions, its model and its batches."""
  data = _data(config)
  problems = []
  captions = _get(data, 'captions', 0)
  if not captions:
    problems.append("dataset.captions is 0: task.name='retrieval' reads the captions of each video; set it to the "
                    'most captions read per video (e.g. 20 for MSR-VTT)')
  if _get(data, 'name') not in CAPTION_SOURCES:
    problems.append(f"dataset.name={_get(data, 'name')!r}: captions are read from {' or '.join(CAPTION_SOURCES)} "
                    'data (a caption list, or the TFRecords vvt data convert writes of one)')
  steps = _get(_get(config, 'optimizer'), 'accumulation_steps', 1)
  if steps != 1:
    problems.append(f"optimizer.accumulation_steps={steps}: task.name='retrieval' contrasts every pair of the whole "
                    'batch, which micro-batches would split; use 1 (and a batch that fits)')
  return problems + _model_problems(config, 'retrieval')


def check_classifier_task(name: str):
  """The `check` of a task that trains and reads the model's classifier head (`name`: 'classification',
  'multilabel'): a video-text model (model.text) has no head, so it is refused in one line naming its tasks."""
  def check(config: Any) -> list[str]:
    if text_of(config) is None:
      return []
    return [f"task.name={name!r} trains a classifier head, which a video-text model (model.text) has none of: use "
            "task.name='zero_shot' (its class prompts) or 'retrieval' (captions)"]
  return check


NO_TRAINING = ("task.name='zero_shot' evaluates a video-text model without training: run vvt eval, or train with "
               "task.name='retrieval'")


def zero_shot_start_problems(config: Any) -> list[str]:
  """A training run of `zero_shot`: refused when the config is validated (there is nothing to train)."""
  return [NO_TRAINING]


ZERO_SHOT = base_lib.ConfigHooks(check=check_zero_shot, start_problems=zero_shot_start_problems,
                                 results_name='zero_shot')
RETRIEVAL = base_lib.ConfigHooks(check=check_retrieval, results_name='retrieval', result_keys=('t2v_', 'v2t_'))
