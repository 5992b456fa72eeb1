"""Batched multi-view evaluation, and its report.

The evaluation iterator yields every view (`num_test_clips x num_spatial_crops`;
with `num_test_clips='all'` the clips that tile each whole video, as many as its
length needs, x crops) of every video exactly once, in full global batches that
mix the views of many videos, padded at the end (`mask` 0, `video_index` -1). The eval step returns
per-view scores (logits, or softmax when `eval.average == 'softmax'`); here
they are summed per `video_index` over valid views and averaged, giving
per-clip (per-view) and per-video top-1 (and top-5 when there are more than 5
classes), per-class and mean class accuracy, and for two-head datasets
(Epic-Kitchens) the same per head and for actions (action = both heads right).
Under `dataset.on_error='skip'` a bad video's rows come with mask 0 and its
index: it is left out of every metric and counted (`videos_skipped`, which also
counts the records past the damage of a broken TFRecord file), and one line
says how many, in which files and why (`skipped_files`, `data_skipped` in the
results; `vvt.data.reading.skips`).

`write_results` stores, named by step, split and view protocol
(`P = WORKDIR/checkpoints/eval_<step>_<split>_<clips>x<crops>`):

    P.json                 the metrics, class names, skipped videos (and their files)
    P.npz                  per-video scores, labels, views per video, video ids
    P_videos.csv           per video: id, views, label name, top-5 names and probabilities, correct
    P_classes[_head].csv   per class: videos, correct, accuracy (and _action for two heads)
    P_confusion[_head].csv / .png   the confusion matrix

and `eval_<step>_<split>.json` / `.npz` (what `vvt results`, sweeps and the tests
read) when the protocol is the run's own (WORKDIR/config.json) or no
evaluation of that step and split was written before: another protocol never
overwrites the training run's results.
"""
import json
import time
from typing import Mapping, Optional

import jax
import numpy as np
from etils import epath

from vvt import fileio
from vvt.config.sharding import logical_rules_of
from vvt.train import checkpoints
from vvt.train import eval_report
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
  """Accumulates per-view scores into per-video sums using video_index and mask.

  `skip(indices)` marks videos left out (bad records under on_error='skip'): they are
  excluded from every metric and counted in `videos_skipped`. `class_names` ({head: names
  or None}), `video_ids` (list of str, one per video) and `average` name the report.
  """

  def __init__(self, heads: Mapping[str, int], num_videos: int):
    self.heads = dict(heads)
    self.num_videos = int(num_videos)
    self.sums = {h: np.zeros((num_videos, c), np.float64) for h, c in self.heads.items()}
    self.counts = np.zeros((num_videos,), np.int64)
    self.video_labels = {h: np.full((num_videos,), -1, np.int64) for h in self.heads}
    self.skipped = np.zeros((num_videos,), bool)
    self.clip_correct = {h: {1: 0, 5: 0} for h in self.heads}
    self.clip_action_correct = 0
    self.num_views = 0
    self.class_names = {h: None for h in self.heads}
    self.video_ids = None
    self.average = 'logits'

  def skip(self, indices) -> None:
    """Leaves the videos `indices` (global indices) out of the results."""
    indices = np.asarray(indices, np.int64).reshape(-1)
    indices = indices[(indices >= 0) & (indices < self.num_videos)]
    self.skipped[indices] = True

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

  def evaluated(self) -> np.ndarray:
    """Sorted indices of the videos in the results (all but the skipped ones)."""
    return np.flatnonzero(~self.skipped)

  def names(self, head: str) -> list:
    """Names of the classes of `head` (its indices as text when there are none)."""
    names = self.class_names.get(head)
    n = self.heads[head]
    return list(names) if names and len(names) == n else [str(i) for i in range(n)]

  def result(self) -> dict:
    """Metrics over the evaluated videos (JSON-ready)."""
    keep = self.evaluated()
    missing = keep[self.counts[keep] == 0]
    if missing.size:
      raise ValueError(f'{missing.size} of {self.num_videos} evaluation videos got '
                       f'no view (first: {missing[:5].tolist()})')
    if keep.size == 0:
      raise ValueError(f'all {self.num_videos} evaluation videos were skipped as bad records')
    counts = self.counts[keep]
    out = {'num_videos': int(keep.size), 'num_views': self.num_views,
           'views_per_video_min': int(counts.min()),
           'views_per_video_max': int(counts.max()),
           'views_per_video_mean': float(counts.mean()),
           'videos_skipped': int(self.skipped.sum()),
           'skipped_video_indices': np.flatnonzero(self.skipped).tolist()}
    action = np.ones((keep.size,), bool)
    preds = {}
    for h, c in self.heads.items():
      sfx = f'_{h}' if h else ''
      avg = self.sums[h][keep] / counts[:, None]
      lab = self.video_labels[h][keep]
      levels = eval_report.topk_levels(c)
      v1 = _topk_correct(avg, lab, 1)
      action &= v1
      preds[h] = avg.argmax(-1)
      for k in levels:
        out[f'video_top{k}{sfx}'] = float(_topk_correct(avg, lab, k).mean())
        out[f'clip_top{k}{sfx}'] = self.clip_correct[h][k] / max(self.num_views, 1)
      acc = eval_report.per_class_accuracy(eval_report.confusion_matrix(preds[h], lab, c))
      out[f'video_mean_class_accuracy{sfx}'] = eval_report.mean_class_accuracy(acc)
      out[f'video_per_class_accuracy{sfx}'] = {
          name: (None if np.isnan(a) else float(a)) for name, a in zip(self.names(h), acc)}
    if len(self.heads) > 1:
      out['video_top1_action'] = float(action.mean())
      out['clip_top1_action'] = self.clip_action_correct / max(self.num_views, 1)
      (ha, hb) = list(self.heads)[:2]
      _, acc = eval_report.pair_accuracy(preds[ha], preds[hb], self.video_labels[ha][keep],
                                         self.video_labels[hb][keep])
      out['video_mean_class_accuracy_action'] = eval_report.mean_class_accuracy(acc)
    out['class_names'] = {h or 'label': self.names(h) for h in self.heads} if len(self.heads) > 1 \
        else self.names('' if '' in self.heads else list(self.heads)[0])
    return out

  def video_scores(self) -> dict:
    return {h: (self.sums[h] / np.maximum(self.counts, 1)[:, None]).astype(np.float32)
            for h in self.heads}


def _clips(value):
  """num_test_clips as the results hold it: an int, or 'all' (each whole video tiled)."""
  return value if value == 'all' else int(value)


def protocol(config) -> str:
  """The view protocol of a config: '<num_test_clips>x<num_spatial_crops>' ('allx3': whole videos tiled)."""
  return f'{_clips(config.dataset.num_test_clips)}x{int(config.dataset.num_spatial_crops)}'


def _progress(total: int, enabled: bool, desc: str):
  """A tqdm bar with ETA over the evaluation batches (a no-op when disabled)."""
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top
  return tqdm(total=total, desc=desc, unit='batch', disable=not enabled, mininterval=1.0,
              dynamic_ncols=True, leave=False)


def evaluate(eval_step, params, config, mesh, *, split: str = 'test',
             log=print, progress: Optional[bool] = None) -> tuple[dict, MultiViewAggregator]:
  """Runs multi-view evaluation over `split`; returns (metrics, aggregator).

  Skipped bad videos (on_error='skip') are left out and counted; the aggregator carries
  the class names (config.class_names, else the dataset's), the video ids and the
  protocol for `write_results`. `progress` (default: when `log` is set, on the chief)
  shows a bar with ETA.
  """
  from vvt.data.reading import names as names_lib  # pylint: disable=g-import-not-at-top
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top
  heads = heads_of(config.model)
  batch_size = int(config.eval.batch_size)
  it = pipeline.make_eval_iterator(
      config.dataset, split=split, global_batch_size=batch_size,
      process_index=jax.process_index(), process_count=jax.process_count())
  agg = MultiViewAggregator(heads, pipeline.num_videos(config.dataset, split))
  agg.class_names = {h: names_lib.class_names(config, h) for h in heads}
  agg.average = config.eval.average
  t0 = time.time()
  if progress is None:
    progress = bool(log) and jax.process_index() == 0
  bar = _progress(len(it), progress, f'eval {split} {protocol(config)}')
  try:
    n_batches = _aggregate(eval_step, params, it, mesh, batch_size, agg, on_batch=lambda: bar.update(1),
                           rules=logical_rules_of(config.get('mesh')))
  finally:
    bar.close()
  if jax.process_index() == 0:
    agg.video_ids = names_lib.video_ids(config.dataset, split)
  res = agg.result()
  res.update(eval_seconds=time.time() - t0, eval_batches=n_batches, average=config.eval.average,
             num_test_clips=_clips(config.dataset.num_test_clips),
             num_spatial_crops=int(config.dataset.num_spatial_crops), protocol=protocol(config))
  line = _add_skips(res, config.dataset, split)
  if log:
    log(_summary(split, res, batch_size, heads))
    if line:
      log(line)
  return res, agg


def _add_skips(res: dict, dataset_config, split: str) -> Optional[str]:
  """Under on_error='skip': every skipped video in `res` (`videos_skipped` counts those the index holds and
  those past the damage of a broken TFRecord file; `skipped_files` and `data_skipped` say where and why);
  returns the console line naming them, or None when nothing was skipped."""
  from vvt.data.reading import skips  # pylint: disable=g-import-not-at-top
  if dataset_config.on_error != 'skip':
    return None
  report = skips.skip_report(dataset_config, split, res['skipped_video_indices'])
  res.update(videos_skipped=report['videos'], data_skipped=report['reasons'], skipped_files=report['files'])
  if not report['videos']:
    return None
  return skips.skip_line(report, split, res['num_videos'] + report['videos'])


def _aggregate(eval_step, params, batches, mesh, batch_size: int, agg: MultiViewAggregator,
               on_batch=lambda: None, rules=None) -> int:
  """Runs `eval_step` over `batches` (per-host numpy, placed by the logical axis rules `rules`) into `agg`;
  returns the number of batches.

  Each batch's scores are read while the next one runs (dispatch is asynchronous).
  """
  from vvt.data import pipeline  # pylint: disable=g-import-not-at-top

  def consume(out):
    scores, passthrough = out
    scores = {h: _local(v) for h, v in scores.items()}
    passthrough = {k: _local(v) for k, v in passthrough.items()}
    labels = {h: passthrough[losses.label_key(h)] for h in agg.heads}
    agg.skip(pipeline.skipped_videos(passthrough))
    agg.add(scores, passthrough['video_index'], passthrough['mask'], labels)
    on_batch()

  pending, n_batches = None, 0
  for batch in batches:
    out = eval_step(params, mesh_lib.global_batch(batch, mesh, batch_size, rules))  # dispatched asynchronously
    if pending is not None:
      consume(pending)
    pending = out
    n_batches += 1
  if pending is not None:
    consume(pending)
  return n_batches


def _summary(split: str, res: dict, batch_size: int, heads) -> str:
  """The one-line log of an evaluation: videos, views, batches, top-1 and time."""
  main = 'video_top1' if '' in heads else 'video_top1_action'
  skipped = f', {res["videos_skipped"]} skipped as bad records' if res['videos_skipped'] else ''
  lo, hi = res['views_per_video_min'], res['views_per_video_max']
  spread = f' ({lo}-{hi} per video)' if lo != hi else ''
  return (f'[eval] {split} {res["protocol"]}: {res["num_videos"]} videos{skipped}, '
          f'{res["num_views"]} views{spread} in {res["eval_batches"]} batches of {batch_size}: {main} = '
          f'{res[main]:.4f} ({res["eval_seconds"]:.1f}s)')


def results_prefix(workdir: str, step: int, split: str, protocol_name: str) -> str:
  """WORKDIR/checkpoints/eval_<step>_<split>_<clips>x<crops> (the report files add suffixes)."""
  base = checkpoints.eval_results_path(workdir, step, split)
  return base[:-len('.json')] + f'_{protocol_name}'


def _run_protocol(workdir: str) -> Optional[str]:
  """The view protocol of the run's own WORKDIR/config.json, or None without one."""
  path = fileio.join(fileio.abspath(workdir), 'config.json')
  try:
    data = json.loads(fileio.read_text(path)).get('dataset', {})
    return f'{_clips(data["num_test_clips"])}x{int(data["num_spatial_crops"])}'
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return None


def _writes_legacy(workdir: str, step: int, split: str, protocol_name: Optional[str]) -> bool:
  """eval_<step>_<split>.json holds the run's own protocol: written for it, or when absent."""
  if protocol_name is None or protocol_name == _run_protocol(workdir):
    return True
  return not fileio.exists(checkpoints.eval_results_path(workdir, step, split))


def _report_files(prefix: str, agg: MultiViewAggregator) -> list:
  """(path, text or png writer) of the per-video, per-class and confusion files."""
  keep = agg.evaluated()
  counts = np.maximum(agg.counts[keep], 1)[:, None]
  ids = agg.video_ids or [str(i) for i in range(agg.num_videos)]
  tables, files = {}, []
  for h, c in agg.heads.items():
    scores = agg.sums[h][keep] / counts
    lab = agg.video_labels[h][keep]
    names = agg.names(h)
    probs = eval_report.probabilities(scores, agg.average)
    tables[h] = (lab, probs, names)
    conf = eval_report.confusion_matrix(probs.argmax(-1), lab, c)
    sfx = f'_{h}' if h else ''
    files.append((f'{prefix}_classes{sfx}.csv', eval_report.classes_csv(names, conf)))
    files.append((f'{prefix}_confusion{sfx}.csv', eval_report.confusion_csv(names, conf)))
    title = f'{epath.Path(prefix).name}{" " + h if h else ""}'
    files.append((f'{prefix}_confusion{sfx}.png',
                  lambda f, n=names, m=conf, t=title: eval_report.confusion_png(f, n, m, t)))
  files.insert(0, (f'{prefix}_videos.csv', eval_report.videos_csv(ids, keep, tables, views=agg.counts[keep])))
  if len(agg.heads) > 1:
    (ha, (la, pa, na)), (hb, (lb, pb, nb)) = list(tables.items())[:2]
    pairs, acc = eval_report.pair_accuracy(pa.argmax(-1), pb.argmax(-1), la, lb)
    n = [int(((la == x) & (lb == y)).sum()) for x, y in pairs]
    files.append((f'{prefix}_classes_action.csv', eval_report.pairs_csv(pairs, acc, n, na, nb)))
  return files


def write_results(workdir: str, step: int, split: str, results: dict,
                  agg: Optional[MultiViewAggregator] = None) -> str:
  """Writes the evaluation's files (see the module doc); returns the protocol-named JSON path.

  The npz holds `video_scores[_head]` float32 (num_videos, num_classes),
  `video_labels[_head]` int64 (num_videos,), `views_per_video` int64 (num_videos,),
  `video_ids` str (num_videos,), `skipped` bool (num_videos,) and `class_names[_head]`
  str (num_classes,). eval_<step>_<split>.json/.npz are written too when the protocol is
  the run's own or none was written for this step and split.
  """
  name = results.get('protocol')
  prefix = results_prefix(workdir, step, split, name) if name else \
      checkpoints.eval_results_path(workdir, step, split)[:-len('.json')]
  fileio.makedirs(str(epath.Path(prefix).parent))
  legacy = name is not None and _writes_legacy(workdir, step, split, name)
  payload = {'step': step, 'split': split, **results}
  dump = lambda f: json.dump(payload, f, indent=2)  # pylint: disable=unnecessary-lambda-assignment
  paths = [prefix + '.json'] + ([checkpoints.eval_results_path(workdir, step, split)] if legacy else [])
  if agg is not None:
    sfx = lambda h: '_' + h if h else ''  # pylint: disable=unnecessary-lambda-assignment
    arrays = {f'video_scores{sfx(h)}': v for h, v in agg.video_scores().items()}
    arrays.update({f'video_labels{sfx(h)}': v for h, v in agg.video_labels.items()})
    arrays.update({f'class_names{sfx(h)}': np.array(agg.names(h)) for h in agg.heads})
    arrays['views_per_video'] = agg.counts
    arrays['skipped'] = agg.skipped
    arrays['video_ids'] = np.array(agg.video_ids or [str(i) for i in range(agg.num_videos)])
    for json_path in paths:
      fileio.atomic_write(json_path[:-len('.json')] + '.npz', lambda f: np.savez(f, **arrays), 'wb')
    for path, content in _report_files(prefix, agg):
      if isinstance(content, str):
        fileio.atomic_write_text(path, content)
      else:
        fileio.atomic_write(path, content, 'wb')
  for json_path in paths:  # last: a JSON means the evaluation's files are all there
    fileio.atomic_write(json_path, dump)
  return paths[0]
