"""Zero-shot classification (`task.name='zero_shot'`): a video-text model names each video's class by the prompts of
the class names, no training.

Before its batches an evaluation turns the class names (the data's, as `vvt eval` names them) into prompts through
`task.zero_shot.templates` (`vvt.tasks.prompts`: C x T texts) and encodes them once with the model's text tower; the
T embeddings of a class are a CLIP-style prompt ensemble (each normalised, averaged, normalised again: (C, E)). Each
view's video embedding (the model's `encode_video`, normalised) is scored against them by cosine similarity (B, C);
`MultiViewAggregator` averages a video's views' similarities (the evaluation's multi-view protocol) and gives
top-1 / top-5, per-class accuracy, the per-video and per-class reports and the confusion matrix, as classification.
The results add `zero_shot` (the templates and how they are combined). The task does not train.
"""
import dataclasses

import numpy as np

from vvt.tasks import multiview
from vvt.tasks import prompts
from vvt.tasks import video_text_options
from vvt.tasks.base import Task

ENSEMBLE = 'each prompt\'s text embedding normalised, the mean over a class\'s templates normalised again'


class ZeroShotAggregator(multiview.MultiViewAggregator):
  """`MultiViewAggregator` of per-view video embeddings: each view scored by its cosine similarity with every
  class's prompt-ensemble embedding (`set_text_embeddings` of the C x T prompt embeddings, before any `add`)."""

  def __init__(self, num_classes: int, num_videos: int, templates: tuple):
    super().__init__({'': num_classes}, num_videos)
    self.templates = tuple(templates)
    self.class_embeddings = None

  def set_text_embeddings(self, embeddings) -> None:
    """The text embeddings (C * T, E) of the prompts `eval_texts` gave, class-major."""
    self.class_embeddings = prompts.ensemble(np.asarray(embeddings), len(self.templates))

  def add(self, scores, video_index, mask, labels) -> None:
    if self.class_embeddings is None:
      raise ValueError('zero-shot evaluation: the class prompts were not encoded before the videos')
    similarity = prompts.normalize(np.asarray(scores[''])) @ self.class_embeddings.T.astype(np.float64)
    super().add({'': similarity}, video_index, mask, labels)

  def result(self) -> dict:
    out = super().result()
    out['zero_shot'] = {'templates': list(self.templates), 'prompt_ensemble': ENSEMBLE,
                        'score': 'cosine similarity per view, averaged over the views of a video'}
    return out


@dataclasses.dataclass(frozen=True)
class ZeroShot(Task):
  """See the module docstring. Evaluation only."""
  num_classes: int           # the data's (dataset.num_classes)
  templates: tuple           # task.zero_shot.templates
  name = 'zero_shot'

  @property
  def heads(self) -> dict:
    return {'': self.num_classes}

  def label_specs(self, batch_size: int) -> dict:
    return {'label': ((batch_size,), 'int32')}

  def prepare(self, batch, inputs, rng):
    raise ValueError(video_text_options.NO_TRAINING)  # (the config's validation says it first)

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    return {'video': module.apply({'params': params}, inputs, method='encode_video')}

  def loss(self, outputs, targets):
    raise ValueError("task.name='zero_shot' has no loss: it does not train")

  def scores(self, outputs) -> dict:
    return {'': outputs['video']}

  def eval_labels(self, batch) -> dict:
    return {'': batch['label']}

  def aggregator(self, num_videos: int) -> ZeroShotAggregator:
    return ZeroShotAggregator(self.num_classes, num_videos, self.templates)

  @property
  def main_metric(self) -> str:
    return 'video_top1'

  def eval_texts(self, class_names) -> tuple:
    names = class_names.get('')
    if not names:
      raise ValueError('zero-shot classification needs the names of the classes: a classes.txt beside the data (or '
                       'its manifest), or config.class_names')
    return tuple(prompts.prompts(names, self.templates))


def from_config(config) -> ZeroShot:
  """The zero-shot task of a RunSpec (or a run config): the data's classes, `task.zero_shot.templates`."""
  data = config.data if hasattr(config, 'data') and not hasattr(config, 'dataset') else config.dataset
  return ZeroShot(num_classes=int(data.num_classes), templates=tuple(config.task.zero_shot.templates))
