"""Batched multi-view evaluation.

The evaluation iterator yields every view (`num_test_clips x num_spatial_crops`)
of every video exactly once, in full global batches that mix the views of many
videos, padded at the end (`mask` 0, `video_index` -1). The eval step returns
per-view scores (logits, or softmax when `eval.average == 'softmax'`); here
they are summed per `video_index` over valid views and averaged, giving
per-clip (per-view) and per-video top-1 / top-5, and for two-head datasets
(Epic-Kitchens) verb / noun / action accuracy (action = both heads right).
`write_results` stores them as `WORKDIR/checkpoints/eval_<step>_<split>.json` and the
per-video scores as `.npz`.
"""
import json
import time
from typing import Mapping, Optional

import jax
import numpy as np
from etils import epath

from vvt.train import checkpoints
from vvt.train import losses
from vvt.train import mesh as mesh_lib
from vvt.train.steps import heads_of


def _local(x) -> np.ndarray:
  """Host copy of a fully replicated global array (works on every host)."""
  if isinstance(x, jax.Array):
    return np.asarray(x.addressable_data(0))
  return np.asarray(x)


def _topk_correct(scores: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
  k = min(k, scores.shape[-1])
  top = np.argpartition(-scores, k - 1, axis=-1)[:, :k]
  return (top == labels[:, None]).any(axis=-1)


class MultiViewAggregator:
  """Accumulates per-view scores into per-video sums using video_index and mask."""

  def __init__(self, heads: Mapping[str, int], num_videos: int):
    self.heads = dict(heads)
    self.num_videos = int(num_videos)
    self.sums = {h: np.zeros((num_videos, c), np.float64) for h, c in self.heads.items()}
    self.counts = np.zeros((num_videos,), np.int64)
    self.video_labels = {h: np.full((num_videos,), -1, np.int64) for h in self.heads}
    self.clip_correct = {h: {1: 0, 5: 0} for h in self.heads}
    self.clip_action_correct = 0
    self.num_views = 0

  def add(self, scores: Mapping[str, np.ndarray], video_index: np.ndarray,
          mask: np.ndarray, labels: Mapping[str, np.ndarray]) -> None:
    valid = np.asarray(mask) > 0
    vi = np.asarray(video_index)[valid].astype(np.int64)
    if vi.size == 0:
      return
    if vi.min() < 0 or vi.max() >= self.num_videos:
      raise ValueError(f'evaluation batch has video_index {vi.min()}..{vi.max()} '
                       f'outside [0, {self.num_videos}) on a valid (mask=1) row')
    self.num_views += int(vi.size)
    np.add.at(self.counts, vi, 1)
    action = np.ones(vi.shape, bool)
    for h in self.heads:
      s = np.asarray(scores[h])[valid].astype(np.float64)
      lab = np.asarray(labels[h])[valid].astype(np.int64)
      np.add.at(self.sums[h], vi, s)
      known = self.video_labels[h][vi]
      clash = (known >= 0) & (known != lab)
      if clash.any():
        raise ValueError(f'video {int(vi[clash][0])} has views with different '
                         f'labels{" for head " + h if h else ""}')
      self.video_labels[h][vi] = lab
      c1 = _topk_correct(s, lab, 1)
      action &= c1
      self.clip_correct[h][1] += int(c1.sum())
      self.clip_correct[h][5] += int(_topk_correct(s, lab, 5).sum())
    self.clip_action_correct += int(action.sum())

  def result(self) -> dict:
    missing = np.flatnonzero(self.counts == 0)
    if missing.size:
      raise ValueError(f'{missing.size} of {self.num_videos} evaluation videos got '
                       f'no view (first: {missing[:5].tolist()})')
    out = {'num_videos': self.num_videos, 'num_views': self.num_views,
           'views_per_video_min': int(self.counts.min()),
           'views_per_video_max': int(self.counts.max())}
    action = np.ones((self.num_videos,), bool)
    for h in self.heads:
      sfx = f'_{h}' if h else ''
      avg = self.sums[h] / self.counts[:, None]
      lab = self.video_labels[h]
      v1 = _topk_correct(avg, lab, 1)
      action &= v1
      out[f'video_top1{sfx}'] = float(v1.mean())
      out[f'video_top5{sfx}'] = float(_topk_correct(avg, lab, 5).mean())
      out[f'clip_top1{sfx}'] = self.clip_correct[h][1] / max(self.num_views, 1)
      out[f'clip_top5{sfx}'] = self.clip_correct[h][5] / max(self.num_views, 1)
    if len(self.heads) > 1:
      out['video_top1_action'] = float(action.mean())
      out['clip_top1_action'] = self.clip_action_correct / max(self.num_views, 1)
    return out

  def video_scores(self) -> dict:
    return {h: (self.sums[h] / np.maximum(self.counts, 1)[:, None]).astype(np.float32)
            for h in self.heads}


def evaluate(eval_step, params, config, mesh, *, split: str = 'test',
             log=print) -> tuple[dict, MultiViewAggregator]:
  """Runs multi-view evaluation over `split`; returns (metrics, aggregator)."""
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top
  heads = heads_of(config.model)
  num_videos = pipeline.num_videos(config.dataset, split)
  batch_size = int(config.eval.batch_size)
  it = pipeline.make_eval_iterator(
      config.dataset, split=split, global_batch_size=batch_size,
      process_index=jax.process_index(), process_count=jax.process_count())
  agg = MultiViewAggregator(heads, num_videos)
  t0 = time.time()
  pending = None

  def consume(out):
    scores, passthrough = out
    scores = {h: _local(v) for h, v in scores.items()}
    passthrough = {k: _local(v) for k, v in passthrough.items()}
    labels = {h: passthrough[losses.label_key(h)] for h in heads}
    agg.add(scores, passthrough['video_index'], passthrough['mask'], labels)

  n_batches = 0
  for batch in it:
    gb = mesh_lib.global_batch(batch, mesh, batch_size)
    out = eval_step(params, gb)  # dispatched asynchronously
    if pending is not None:
      consume(pending)
    pending = out
    n_batches += 1
  if pending is not None:
    consume(pending)
  res = agg.result()
  res['eval_seconds'] = time.time() - t0
  res['eval_batches'] = n_batches
  res['average'] = config.eval.average
  if log:
    main = 'video_top1' if '' in heads else 'video_top1_action'
    log(f'[eval] {split}: {res["num_videos"]} videos, {res["num_views"]} views '
        f'in {n_batches} batches of {batch_size}: {main} = {res[main]:.4f} '
        f'({res["eval_seconds"]:.1f}s)')
  return res, agg


def _atomic_write(path: str, write, mode: str = 'w') -> None:
  """Writes `path` (local or URL) through a temporary file renamed over it."""
  tmp = epath.Path(path + '.tmp')
  with tmp.open(mode) as f:
    write(f)
  tmp.replace(path)


def write_results(workdir: str, step: int, split: str, results: dict,
                  agg: Optional[MultiViewAggregator] = None) -> str:
  """Writes eval_<step>_<split>.json (and .npz: per-video scores, labels, views); returns the json path.

  The npz holds `video_scores[_head]` float32 (num_videos, num_classes),
  `video_labels[_head]` int64 (num_videos,) and `views_per_video` int64 (num_videos,).
  """
  path = checkpoints.eval_results_path(workdir, step, split)
  epath.Path(path).parent.mkdir(parents=True, exist_ok=True)
  _atomic_write(path, lambda f: json.dump({'step': step, 'split': split, **results}, f, indent=2))
  if agg is not None:
    sfx = lambda h: '_' + h if h else ''  # pylint: disable=unnecessary-lambda-assignment
    arrays = {f'video_scores{sfx(h)}': v for h, v in agg.video_scores().items()}
    arrays.update({f'video_labels{sfx(h)}': v for h, v in agg.video_labels.items()})
    arrays['views_per_video'] = agg.counts
    _atomic_write(checkpoints.eval_results_path(workdir, step, split, 'npz'),
                  lambda f: np.savez(f, **arrays), 'wb')
  return path
