"""Per-video bookkeeping of the evaluation aggregators: which batch rows are views of which video, skipped videos.

`VideoViews` is the base of `vvt.tasks.multiview.MultiViewAggregator` and
`vvt.tasks.multilabel.MultiLabelAggregator`: it counts the valid views of each of `num_videos` videos
(`counts` (N,)), marks the videos left out as bad records (`skipped` (N,)), names the classes of each head and
checks, before the results, that every evaluated video got a view.
"""
from typing import Mapping

import numpy as np


class VideoViews:
  """Views per video, skipped videos and class names of an aggregator of `heads` ({head: classes}).

  `skip(indices)` marks videos left out (bad records under on_error='skip'): they are excluded from every
  metric and counted in `videos_skipped`. `class_names` ({head: names or None}), `video_ids` (list of str, one
  per video) and `average` name the report.
  """
  def __init__(self, heads: Mapping[str, int], num_videos: int):
    self.heads = dict(heads)
    self.num_videos = int(num_videos)
    self.counts = np.zeros((self.num_videos,), np.int64)
    self.skipped = np.zeros((self.num_videos,), bool)
    self.num_views = 0
    self.class_names = {h: None for h in self.heads}
    self.video_ids = None
    self.average = 'logits'

  def skip(self, indices) -> None:
    """Leaves the videos `indices` (global indices) out of the results."""
    indices = np.asarray(indices, np.int64).reshape(-1)
    self.skipped[indices[(indices >= 0) & (indices < self.num_videos)]] = True

  def _valid_views(self, video_index: np.ndarray, mask: np.ndarray):
    """(valid (B,) bool, video indices (V,) int64) of a batch's valid (mask=1) rows; None when there are none.
    Refuses a valid row whose video_index is outside [0, num_videos)."""
    valid = np.asarray(mask) > 0
    vi = np.asarray(video_index)[valid].astype(np.int64)
    if vi.size == 0:
      return None
    if vi.min() < 0 or vi.max() >= self.num_videos:
      raise ValueError(f'evaluation batch has video_index {vi.min()}..{vi.max()} '
                       f'outside [0, {self.num_videos}) on a valid (mask=1) row')
    return valid, vi

  def _count_views(self, vi: np.ndarray) -> None:
    self.num_views += int(vi.size)
    np.add.at(self.counts, vi, 1)

  def evaluated(self) -> np.ndarray:
    """Sorted indices of the videos in the results (all but the skipped ones)."""
    return np.flatnonzero(~self.skipped)

  def names(self, head: str = '') -> list:
    """Names of the classes of `head` (its indices as text when there are none)."""
    names = self.class_names.get(head)
    n = self.heads[head]
    return list(names) if names and len(names) == n else [str(i) for i in range(n)]

  def _kept(self) -> np.ndarray:
    """The evaluated videos; refuses when one got no view or when all were skipped."""
    keep = self.evaluated()
    missing = keep[self.counts[keep] == 0]
    if missing.size:
      raise ValueError(f'{missing.size} of {self.num_videos} evaluation videos got '
                       f'no view (first: {missing[:5].tolist()})')
    if keep.size == 0:
      raise ValueError(f'all {self.num_videos} evaluation videos were skipped as bad records')
    return keep

  def _view_stats(self, keep: np.ndarray) -> dict:
    """Videos, views and skipped videos of the results (JSON-ready)."""
    counts = self.counts[keep]
    return {'num_videos': int(keep.size), 'num_views': self.num_views,
            'views_per_video_min': int(counts.min()), 'views_per_video_max': int(counts.max()),
            'views_per_video_mean': float(counts.mean()),
            'videos_skipped': int(self.skipped.sum()),
            'skipped_video_indices': np.flatnonzero(self.skipped).tolist()}

  def _id_list(self) -> list:
    """The videos' ids (their indices as text when there are none)."""
    return self.video_ids or [str(i) for i in range(self.num_videos)]
