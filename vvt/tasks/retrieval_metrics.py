"""Text-video retrieval metrics: recall at K, median and mean rank, both directions, several captions per video.

    text_to_video_ranks(sim (N_t, N_v), caption_video (N_t,))  -> (N_t,) 1-based rank of each caption's video
    video_to_text_ranks(sim (N_t, N_v), caption_video (N_t,))  -> (N_v,) rank of each video's best caption
    retrieval_metrics(sim, caption_video, ks=(1, 5, 10))       -> {'t2v_r1', ..., 'v2t_mean_rank', ...}

The protocol, as the multi-caption evaluations of MSR-VTT and VATEX state it (every caption of the test split is a
query; each video has one or more captions):

* text -> video: each caption is a query over all N_v videos; its match is the video it describes.
* video -> text: each video is a query over all N_t captions; its rank is that of its best-ranked own caption
  (any of its captions counts as a hit).
* ties count against the match: a rank is 1 + the number of candidates (other than the match itself) scoring at
  least as high as the match, so a model that scores everything alike ranks every match last, never first.

Recall at K is the fraction of queries whose rank is at most K (0..1, as `video_top1`); median and mean rank are
over the queries (1 is best).
"""
from typing import Sequence

import numpy as np

KS = (1, 5, 10)
PROTOCOL = ('text->video: every caption a query over all videos; video->text: every video a query over all '
            'captions, ranked by its best caption; ties count against the match')


def _check(sim: np.ndarray, caption_video: np.ndarray) -> tuple:
  sim = np.asarray(sim, np.float64)
  caption_video = np.asarray(caption_video, np.int64).reshape(-1)
  if sim.ndim != 2 or sim.shape[0] != caption_video.size:
    raise ValueError(f'similarities {sim.shape} do not match {caption_video.size} captions')
  if caption_video.size and (caption_video.min() < 0 or caption_video.max() >= sim.shape[1]):
    raise ValueError(f'a caption names video {caption_video.max()} of {sim.shape[1]}')
  return sim, caption_video


def text_to_video_ranks(sim: np.ndarray, caption_video: np.ndarray) -> np.ndarray:
  """(N_t,) int64: the 1-based rank of each caption's video among all videos, by `sim` (N_t, N_v) (ties count
  against the match)."""
  sim, caption_video = _check(sim, caption_video)
  match = sim[np.arange(sim.shape[0]), caption_video]
  return (sim >= match[:, None]).sum(1).astype(np.int64)


def video_to_text_ranks(sim: np.ndarray, caption_video: np.ndarray) -> np.ndarray:
  """(N_v,) int64: for each video, the 1-based rank among all captions of its best-ranked own caption (ties count
  against the match: the other captions scoring at least as high, its own included, come first). A video without
  a caption gets rank 0 (left out by `summary`)."""
  sim, caption_video = _check(sim, caption_video)
  num_videos = sim.shape[1]
  ranks = np.zeros((num_videos,), np.int64)
  for v in np.unique(caption_video):
    scores = sim[:, v]
    best = scores[caption_video == v].max()
    ranks[v] = int((scores >= best).sum())  # its own best is among them: rank 1 when nothing else is as high
  return ranks


def summary(ranks: np.ndarray, prefix: str, ks: Sequence[int] = KS) -> dict:
  """{prefix_rK: recall at K (0..1), prefix_median_rank, prefix_mean_rank} of 1-based `ranks` (0: no query)."""
  ranks = np.asarray(ranks, np.int64)
  ranks = ranks[ranks > 0]
  if not ranks.size:
    raise ValueError('no retrieval query: no caption and video pair to rank')
  out = {f'{prefix}_r{k}': float((ranks <= k).mean()) for k in ks}
  out[f'{prefix}_median_rank'] = float(np.median(ranks))
  out[f'{prefix}_mean_rank'] = float(ranks.mean())
  return out


def retrieval_metrics(sim: np.ndarray, caption_video: np.ndarray, ks: Sequence[int] = KS) -> dict:
  """Both directions' recall at `ks`, median and mean rank of captions-by-videos similarities `sim` (N_t, N_v),
  with the counts and the protocol named (JSON-ready)."""
  out = summary(text_to_video_ranks(sim, caption_video), 't2v', ks)
  out.update(summary(video_to_text_ranks(sim, caption_video), 'v2t', ks))
  out['num_captions'] = int(np.asarray(sim).shape[0])
  out['num_retrieval_videos'] = int(np.unique(np.asarray(caption_video)).size)
  out['retrieval_protocol'] = PROTOCOL
  return out
