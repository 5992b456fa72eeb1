"""Classification: one label per video and head, softmax cross-entropy, top-1 / top-5 over the views.

A single-head model has the head '' (batch key 'label'); a multi-head one (Epic-Kitchens verb + noun) one head per
`model.num_classes` entry (batch keys 'label/<head>'), its loss the sum of the heads' cross-entropies. Targets are
one-hot, smoothed by `loss.label_smoothing`, and mixed with the pixels by `loss.mixup_alpha` / `loss.cutmix_alpha`
(`vvt.tasks.losses`). Train metrics: `accuracy[_head]` (top-1 of the mixed batch against its original labels) and,
for several heads, `accuracy_action` (every head right). Evaluation: per-view logits (or softmax probabilities
under `eval.average='softmax'`) averaged per video by `vvt.tasks.multiview.MultiViewAggregator`.
"""
import dataclasses

import jax
import jax.numpy as jnp

from vvt.tasks import losses
from vvt.tasks import multiview
from vvt.tasks.base import Task


def heads_of(model) -> dict:
  """{head: num_classes} of a ModelSpec `model` (its num_classes: an int, or (head, classes) pairs); a single-head
  model has the head ''."""
  nc = model.num_classes
  if isinstance(nc, tuple):
    return {str(k): int(v) for k, v in nc}
  return {'': int(nc)}


def metric_name(head: str, base: str = 'accuracy') -> str:
  return base if head == '' else f'{base}_{head}'


def correct_of(logits, labels) -> dict:
  """{head: float (B,)}: 1 where the top-1 class is the label."""
  return {h: (jnp.argmax(logits[h], -1) == labels[h]).astype(jnp.float32) for h in labels}


@dataclasses.dataclass(frozen=True)
class Classification(Task):
  """See the module docstring. `heads` is a tuple of (head, num_classes) pairs (hashable)."""
  head_sizes: tuple          # ((head, num_classes), ...); '' for a single head
  label_smoothing: float    # loss.label_smoothing (its default: the schema)
  mixup_alpha: float = 0.0
  cutmix_alpha: float = 0.0
  mix_switch_prob: float = 0.5
  average: str = 'logits'    # eval.average: 'logits' | 'softmax' (the scores returned)
  name = 'classification'

  @property
  def heads(self) -> dict:
    return dict(self.head_sizes)

  def label_specs(self, batch_size: int) -> dict:
    return {losses.label_key(h): ((batch_size,), 'int32') for h in self.heads}

  def prepare(self, batch, inputs, rng):
    heads = self.heads
    labels = {h: batch[losses.label_key(h)] for h in heads}
    targets = {h: losses.one_hot_targets(labels[h], n, self.label_smoothing) for h, n in heads.items()}
    inputs, targets, _ = losses.mix_batch(rng, inputs, targets, mixup_alpha=self.mixup_alpha,
                                          cutmix_alpha=self.cutmix_alpha, switch_prob=self.mix_switch_prob)
    return inputs, targets, labels

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    logits = super().outputs(module, params, inputs, train=train, rng=rng)
    return {h: logits[h] for h in self.heads}

  def loss(self, outputs, targets):
    return losses.multi_head_loss(outputs, targets)

  @property
  def metric_names(self) -> tuple:
    names = tuple(metric_name(h) for h in self.heads)
    return names + (('accuracy_action',) if len(self.heads) > 1 else ())

  def train_metrics(self, outputs, labels) -> dict:
    correct = correct_of(outputs, labels)
    out = {metric_name(h): correct[h] for h in self.heads}
    if len(self.heads) > 1:
      out['accuracy_action'] = jnp.prod(jnp.stack([correct[h] for h in self.heads]), axis=0)
    return out

  def scores(self, outputs) -> dict:
    scores = {}
    for h in self.heads:
      head_logits = outputs[h].astype(jnp.float32)
      scores[h] = jax.nn.softmax(head_logits, axis=-1) if self.average == 'softmax' else head_logits
    return scores

  def eval_labels(self, batch) -> dict:
    return {h: batch[losses.label_key(h)] for h in self.heads}

  def aggregator(self, num_videos: int) -> multiview.MultiViewAggregator:
    return multiview.MultiViewAggregator(self.heads, num_videos)

  @property
  def main_metric(self) -> str:
    return 'video_top1' if '' in self.heads else 'video_top1_action'


def from_config(run) -> Classification:
  """The classification task of a RunSpec `run`: heads of `run.model.num_classes`, `run.loss`, `run.eval.average`."""
  loss = run.loss
  return Classification(head_sizes=tuple(heads_of(run.model).items()), label_smoothing=loss.label_smoothing,
                        mixup_alpha=loss.mixup_alpha, cutmix_alpha=loss.cutmix_alpha,
                        mix_switch_prob=loss.mix_switch_prob, average=run.eval.average)
