"""Text-video retrieval (`task.name='retrieval'`): contrastive fine-tuning of a video-text model on captioned videos,
and its retrieval evaluation.

A batch carries each video's `dataset.captions` = K captions as tokens (the data pipeline tokenises its 'caption'
strings with the model's tokenizer, `batch_text`): 'text/input_ids' and 'text/attention_mask' (B, K, L) int32, a
padding caption all zeros.

Training: one of a video's captions drawn at random per step (uniform over its real ones), the video through
`encode_video`, the caption through `encode_text`, and the symmetric InfoNCE of the batch's pairs
(`vvt.tasks.contrastive.info_nce`, VideoPrism's stage-1 loss) at the model's learned scale, the one its
similarity multiplies by (the model's `contrastive_scale`: exp(`logit_scale`) for VideoPrism's, `logit_scale` as
stored for Perception Encoder video's, whose transformers class takes no exp; a logit bias, where the model has one,
shifts every logit of a softmax alike and is left out). Train metric
`batch_t2v_top1`: the share of captions whose own video scores highest in the batch.

Evaluation: every view's video embedding (normalised) and the embeddings of its video's K captions; a video's
embedding is its views' mean, normalised again; every real caption is a query (`vvt.tasks.retrieval_metrics`:
text->video and video->text R@1/5/10, median and mean rank, a video ranked by its best caption), with the numbers
of videos and captions and the protocol in the results.
"""
import dataclasses
from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from vvt.tasks import contrastive
from vvt.tasks import retrieval_metrics
from vvt.tasks import video_text_options
from vvt.tasks import video_views
from vvt.tasks.base import Task

IDS, MASK = 'text/input_ids', 'text/attention_mask'


def tokenized(batch: Mapping, tokenize, length: int) -> dict:
  """`batch` (numpy) with its 'caption' strings (..., K) replaced by IDS and MASK (..., K, L) int32: the real
  captions through `tokenize(texts) -> (ids (n, L), mask (n, L))`, the padding ones ('') all zeros."""
  out = dict(batch)
  captions = np.asarray(out.pop('caption'))
  flat = [c.decode() if isinstance(c, bytes) else str(c) for c in captions.reshape(-1)]
  ids = np.zeros((len(flat), length), np.int32)
  mask = np.zeros((len(flat), length), np.int32)
  real = [i for i, c in enumerate(flat) if c]
  if real:
    got_ids, got_mask = tokenize([flat[i] for i in real])
    ids[real], mask[real] = np.asarray(got_ids)[:, :length], np.asarray(got_mask)[:, :length]
  out[IDS] = ids.reshape(captions.shape + (length,))
  out[MASK] = mask.reshape(captions.shape + (length,))
  return out


def choose_caption(rng, ids, mask):
  """(ids (B, L), mask (B, L), has_caption (B,) float32): one real caption of each row of (B, K, L) tokens, drawn
  uniformly (the first, padding, where a row has none)."""
  real = jnp.any(mask > 0, axis=-1)                      # (B, K)
  logits = jnp.where(real, 0.0, -jnp.inf)
  logits = jnp.where(jnp.any(real, -1, keepdims=True), logits, 0.0)
  k = jax.random.categorical(rng, logits, axis=-1)       # (B,)
  pick = lambda x: jnp.take_along_axis(x, k[:, None, None], axis=1)[:, 0]
  return pick(ids), pick(mask), jnp.any(real, -1).astype(jnp.float32)


def _apply(module, params, method: str, *args, train: bool, rng):
  rngs = {'dropout': rng} if train else None
  return module.apply({'params': params}, *args, train=train, method=method, rngs=rngs)


class RetrievalAggregator(video_views.VideoViews):
  """Per video: the sum of its views' normalised embeddings and its captions' embeddings (K, E) (which of them
  are real); `result()` ranks every real caption against every evaluated video."""

  def __init__(self, num_videos: int, captions: int):
    super().__init__({}, num_videos)
    self.captions = int(captions)
    self.sums = self.texts = None
    self.real = np.zeros((self.num_videos, self.captions), bool)

  def add(self, scores, video_index, mask, labels) -> None:
    views = self._valid_views(video_index, mask)
    if views is None:
      return
    valid, vi = views
    self._count_views(vi)
    video = contrastive_normalize(np.asarray(scores['video'])[valid])
    text = np.asarray(scores['text'], np.float32)[valid]
    if self.sums is None:
      self.sums = np.zeros((self.num_videos, video.shape[-1]), np.float64)
      self.texts = np.zeros((self.num_videos, self.captions, text.shape[-1]), np.float32)
    np.add.at(self.sums, vi, video)
    self.texts[vi] = text
    self.real[vi] = np.asarray(labels['real'])[valid]

  def _pairs(self, keep: np.ndarray) -> tuple:
    """(videos (V, E) normalised, captions (M, E), caption_video (M,) indices into `keep`, caption's (video, k))."""
    videos = contrastive_normalize(self.sums[keep])
    rows, ks = np.nonzero(self.real[keep])
    return videos, contrastive_normalize(self.texts[keep][rows, ks]), rows, (keep[rows], ks)

  def result(self) -> dict:
    keep = self._kept()
    out = self._view_stats(keep)
    videos, captions, caption_video, _ = self._pairs(keep)
    out.update(retrieval_metrics.retrieval_metrics(captions @ videos.T, caption_video))
    return out

  def arrays(self) -> dict:
    """The `.npz` arrays: `video_embeddings` float32 (evaluated videos, E), `caption_embeddings` (M, E),
    `caption_video` int64 (M,) (the video's index in the split), `caption_index` (M,) (its place among the video's
    captions), `views_per_video`, `skipped`, `video_ids` (num_videos,)."""
    keep = self._kept()
    videos, captions, _, (video, k) = self._pairs(keep)
    return {'video_embeddings': videos.astype(np.float32), 'video_index': keep,
            'caption_embeddings': captions.astype(np.float32), 'caption_video': video.astype(np.int64),
            'caption_index': k.astype(np.int64), 'views_per_video': self.counts, 'skipped': self.skipped,
            'video_ids': np.array(self._id_list())}

  def report_files(self, prefix: str) -> list:
    """`prefix_captions.csv`: per caption, its video's id, its place among the video's captions, the rank of its
    video among all (text->video)."""
    keep = self._kept()
    videos, captions, caption_video, (video, k) = self._pairs(keep)
    ranks = retrieval_metrics.text_to_video_ranks(captions @ videos.T, caption_video)
    ids = self._id_list()
    lines = ['video_id,caption,t2v_rank'] + [f'{ids[v]},{c},{r}' for v, c, r in zip(video, k, ranks, strict=True)]
    return [(f'{prefix}_captions.csv', '\n'.join(lines) + '\n')]


def contrastive_normalize(x) -> np.ndarray:
  """Rows of `x` (..., E) divided by their L2 norm (float64)."""
  x = np.asarray(x, np.float64)
  return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


@dataclasses.dataclass(frozen=True)
class Retrieval(Task):
  """See the module docstring."""
  captions: int              # dataset.captions: K per video
  text_length: int           # model.text.max_length: L
  name = 'retrieval'

  @property
  def heads(self) -> dict:
    return {}

  def label_specs(self, batch_size: int) -> dict:
    shape = (batch_size, self.captions, self.text_length)
    return {IDS: (shape, 'int32'), MASK: (shape, 'int32')}

  def batch_text(self, tokenize):
    return lambda batch: tokenized(batch, tokenize, self.text_length)

  def prepare(self, batch, inputs, rng):
    ids, mask, real = choose_caption(rng, batch[IDS], batch[MASK])
    return {'video': inputs, 'ids': ids, 'mask': mask}, {'real': real}, {}

  def eval_inputs(self, batch, inputs):
    return {'video': inputs, 'ids': batch[IDS], 'mask': batch[MASK]}

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    ids, mask = inputs['ids'], inputs['mask']
    video_rng, text_rng = jax.random.split(rng) if train else (None, None)
    video = _apply(module, params, 'encode_video', inputs['video'], train=train, rng=video_rng)
    text = _apply(module, params, 'encode_text', ids.reshape((-1, ids.shape[-1])), mask.reshape((-1, ids.shape[-1])),
                  train=train, rng=text_rng)
    return {'video': video, 'text': text.reshape(ids.shape[:-1] + text.shape[-1:]),
            'scale': module.apply({'params': params}, method='contrastive_scale')}

  def loss(self, outputs, targets):
    return contrastive.info_nce(outputs['video'], outputs['text'], outputs['scale'], targets['real'])

  @property
  def metric_names(self) -> tuple:
    return ('batch_t2v_top1',)

  def train_metrics(self, outputs, labels) -> dict:
    sim = contrastive.similarity_logits(outputs['video'], outputs['text'], 1.0)
    return {'batch_t2v_top1': (jnp.argmax(sim, axis=0) == jnp.arange(sim.shape[0])).astype(jnp.float32)}

  def scores(self, outputs) -> dict:
    return {'video': outputs['video'].astype(jnp.float32), 'text': outputs['text'].astype(jnp.float32)}

  def eval_labels(self, batch) -> dict:
    return {'real': np.asarray(batch[MASK]).any(-1)}

  def aggregator(self, num_videos: int) -> RetrievalAggregator:
    return RetrievalAggregator(num_videos, self.captions)

  @property
  def main_metric(self) -> str:
    return 't2v_r1'


def from_config(config) -> Retrieval:
  """The retrieval task of a RunSpec (or a run config): `dataset.captions`, `model.text.max_length` (0 for a
  model without a text tower, which the config's check refuses)."""
  data = config.data if hasattr(config, 'data') and not hasattr(config, 'dataset') else config.dataset
  text = video_text_options.text_of(config)
  return Retrieval(captions=int(data.captions), text_length=int(text.max_length) if text is not None else 0)
