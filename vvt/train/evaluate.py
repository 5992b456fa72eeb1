"""Batched multi-view evaluation, and its report.

The evaluation iterator yields every view (`num_test_clips x num_spatial_crops`;
with `num_test_clips='all'` the clips that tile each whole video, as many as its
length needs, x crops) of every video exactly once, in full global batches that
mix the views of many videos, padded at the end (`mask` 0, `video_index` -1). The
eval step returns the run's task's per-view scores (`vvt.tasks`); the task's
aggregator sums them per `video_index` over valid views and says what they mean
(classification: `vvt.tasks.multiview`, per-video top-1 / top-5, per-class
accuracy; multilabel: mAP and per-class AP).
Under `dataset.on_error='skip'` a bad video's rows come with mask 0 and its
index: it is left out of every metric and counted (`videos_skipped`, which also
counts the records past the damage of a broken TFRecord file), and one line
says how many, in which files and why (`skipped_files`, `data_skipped` in the
results; `vvt.data.reading.skips`).

`write_results` stores, named by step, split and view protocol
(`P = WORKDIR/checkpoints/eval_<step>_<split>_<clips>x<crops>`, then `_<frames>f_<size>px` where the clips'
frames or frame size differ from the run's own):

    P.json                 the metrics, class names, skipped videos (and their files)
    P.npz                  per-video scores, labels, views per video, video ids
    P_*.csv / .png         the task's report files (classification: per video with its views, per class,
                           confusion matrix)

and `eval_<step>_<split>.json` / `.npz` (what `vvt results`, sweeps and the tests
read) when the views are the run's own (WORKDIR/config.json) or no
evaluation of that step and split was written before, and the clips are the run's
frames and frame size: another protocol never overwrites the training run's results.
A task whose `ConfigHooks.results_name` is set (zero-shot, retrieval: two evaluations of one video-text
checkpoint) has it after the split in every name (`eval_<step>_<split>_zero_shot_1x1.json`,
`eval_<step>_<split>_zero_shot.json`), so that neither overwrites the other; the JSON records the `task` and its
`main_metric`.
"""
import json
import time
from typing import Callable, Optional

from etils import epath
import jax
import numpy as np

from vvt import fileio
from vvt import progress as progress_lib
from vvt.models import frame_size
from vvt.tasks.base import Aggregator
from vvt.train import checkpoints
from vvt.train import mesh as mesh_lib


def _local(x) -> np.ndarray:
  """Host copy of a fully replicated global array (works on every host)."""
  if isinstance(x, jax.Array):
    return np.asarray(x.addressable_data(0))
  return np.asarray(x)


def _clips(value):
  """num_test_clips as the results hold it: an int, or 'all' (each whole video tiled)."""
  return value if value == 'all' else int(value)


def protocol(data) -> str:
  """The view protocol of a run's dataset spec: '<num_test_clips>x<num_spatial_crops>' ('allx3': whole videos
  tiled)."""
  return f'{_clips(data.num_test_clips)}x{int(data.num_spatial_crops)}'


def _progress(total: int, enabled: bool, desc: str):
  """A bar with ETA over the evaluation batches (a no-op when disabled, or with the bars off: `vvt.progress`)."""
  return progress_lib.bar(total, desc, 'batch', disable=not enabled, mininterval=1.0, dynamic_ncols=True,
                          leave=False)


def evaluate(program, params, data, eval_spec, *, split: str = 'test', log=print,
             progress: Optional[bool] = None, tokenize: Optional[Callable] = None) -> tuple[dict, Aggregator]:
  """Runs multi-view evaluation of `params` with `program`'s eval step (`vvt.train.program`) and its task's
  aggregator (`program.task`, `vvt.tasks`) over `split` of the run's `data` in batches of `eval_spec.batch_size`
  (a RunSpec's `data` and `eval`); returns (metrics, aggregator).

  Skipped bad videos (on_error='skip') are left out and counted; the aggregator carries
  the class names (the run's class_names, else the dataset's), the video ids and the
  protocol for `write_results`. `progress` (default: when `log` is set, on the chief)
  shows a bar with ETA. `tokenize` (`vvt.train.texts.tokenizer`): the texts' tokenizer of a task that reads them
  (its `batch_text`: the batches' captions; its `eval_texts`: texts encoded once, the zero-shot prompts).
  """
  from vvt.data import class_names
  from vvt.data import make_eval_iterator
  from vvt.data import num_videos
  from vvt.data import video_ids
  task = program.task
  batch_size = eval_spec.batch_size
  it = make_eval_iterator(
      data, split=split, global_batch_size=batch_size,
      process_index=jax.process_index(), process_count=jax.process_count(), text=task.batch_text(tokenize))
  agg = task.aggregator(num_videos(data, split))
  agg.class_names = {h: class_names(data, h) for h in task.label_heads}
  wanted = task.eval_texts(agg.class_names)
  if wanted:  # encoded once, before the videos (zero-shot: the class prompts)
    from vvt.train import texts
    agg.set_text_embeddings(texts.encode(program, params, tokenize, wanted))
  agg.average = eval_spec.average
  t0 = time.time()
  if progress is None:
    progress = bool(log) and jax.process_index() == 0
  bar = _progress(len(it), progress, f'eval {split} {protocol(data)}')
  try:
    n_batches = _aggregate(program.eval_step, params, it, program.mesh, batch_size, agg, task.eval_labels,
                           on_batch=lambda: bar.update(1), rules=program.logical_rules)
  finally:
    bar.close()
  if jax.process_index() == 0:
    agg.video_ids = video_ids(data, split)
  res = agg.result()
  res.update(task=task.name, main_metric=task.main_metric)  # what `vvt results` reads the results by
  res.update(eval_seconds=time.time() - t0, eval_batches=n_batches, average=eval_spec.average,
             num_test_clips=_clips(data.num_test_clips), num_spatial_crops=int(data.num_spatial_crops),
             protocol=protocol(data), num_frames=int(data.num_frames),
             image_size=frame_size.config_value(data.image_size))
  line = _add_skips(res, data, split)
  if log:
    log(_summary(split, res, batch_size, task.main_metric))
    if line:
      log(line)
  return res, agg


def _add_skips(res: dict, data, split: str) -> Optional[str]:
  """Under on_error='skip': every skipped video in `res` (`videos_skipped` counts those the index holds and
  those past the damage of a broken TFRecord file; `skipped_files` and `data_skipped` say where and why);
  returns the console line naming them, or None when nothing was skipped. `data`: the run's DataSpec."""
  from vvt.data import skip_line
  from vvt.data import skip_report
  if data.on_error != 'skip':
    return None
  report = skip_report(data, split, res['skipped_video_indices'])
  res.update(videos_skipped=report['videos'], data_skipped=report['reasons'], skipped_files=report['files'])
  if not report['videos']:
    return None
  return skip_line(report, split, res['num_videos'] + report['videos'])


def _aggregate(eval_step, params, batches, mesh, batch_size: int, agg: Aggregator, labels_of: Callable,
               on_batch=lambda: None, rules=None) -> int:
  """Runs `eval_step` over `batches` (per-host numpy, placed by the logical axis rules `rules`) into `agg`, the
  labels of a batch being `labels_of(batch)` (the task's `eval_labels`); returns the number of batches.

  Each batch's scores are read while the next one runs (dispatch is asynchronous).
  """
  from vvt.data import skipped_videos

  def consume(out):
    scores, passthrough = out
    scores = {h: _local(v) for h, v in scores.items()}
    passthrough = {k: _local(v) for k, v in passthrough.items()}
    labels = labels_of(passthrough)
    agg.skip(skipped_videos(passthrough))
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


def _summary(split: str, res: dict, batch_size: int, main: str) -> str:
  """The one-line log of an evaluation: videos, views, batches, the task's main metric and time."""
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


def run_clip(workdir: str) -> Optional[tuple[int, tuple[int, int]]]:
  """(frames, (H, W)) of the run's own WORKDIR/config.json, or None without one."""
  path = fileio.join(fileio.abspath(workdir), 'config.json')
  try:
    data = json.loads(fileio.read_text(path))
    return int(data['num_frames']), frame_size.parse(data['image_size'])
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return None


def _run_protocol(workdir: str) -> Optional[str]:
  """The view protocol of the run's own WORKDIR/config.json, or None without one."""
  path = fileio.join(fileio.abspath(workdir), 'config.json')
  try:
    data = json.loads(fileio.read_text(path)).get('dataset', {})
    return f'{_clips(data["num_test_clips"])}x{int(data["num_spatial_crops"])}'
  except (OSError, ValueError, KeyError, TypeError, AttributeError):
    return None


def protocol_name(workdir: str, results: dict) -> Optional[str]:
  """The results' protocol as the file names say it: '<clips>x<crops>', and '_<frames>f_<size>px' after it when
  the clips' frames or frame size differ from the run's own (so that no evaluation overwrites another's)."""
  name = results.get('protocol')
  frames, size = results.get('num_frames'), results.get('image_size')
  run = run_clip(workdir)
  if name and None not in (frames, size) and run is not None and (frames, frame_size.parse(size)) != run:
    name += f'_{frames}f_{frame_size.label(size)}px'
  return name


def _writes_legacy(workdir: str, step: int, split: str, protocol_name: Optional[str]) -> bool:
  """eval_<step>_<split>.json holds the run's own protocol: written for it, or when absent."""
  if protocol_name is None or protocol_name == _run_protocol(workdir):
    return True
  return not fileio.exists(checkpoints.eval_results_path(workdir, step, split))


def named_split(split: str, results: dict) -> str:
  """The split as the results' file names say it: `split`, then `_<results_name>` where the results' task names
  its files (its `ConfigHooks.results_name`: zero-shot and retrieval, two evaluations of one video-text
  checkpoint); a classification's (and any results without a `task`) as they always were."""
  from vvt.tasks import registry
  name = registry.hooks_named(str(results.get('task') or '')).results_name
  return f'{split}_{name}' if name else split


def files_prefix(workdir: str, step: int, split: str, results: dict) -> str:
  """The path of the results' files without their suffixes (`write_results`): the protocol-named one."""
  name, split = protocol_name(workdir, results), named_split(split, results)
  return (results_prefix(workdir, step, split, name) if name else
          checkpoints.eval_results_path(workdir, step, split)[:-len('.json')])


def write_results(workdir: str, step: int, split: str, results: dict, agg: Optional[Aggregator] = None) -> str:
  """Writes the evaluation's files (see the module doc); returns the protocol-named JSON path.

  The npz holds the aggregator's `arrays()` (classification: `video_scores[_head]` float32 (num_videos,
  num_classes), `video_labels[_head]` int64 (num_videos,), `views_per_video` int64 (num_videos,),
  `video_ids` str (num_videos,), `skipped` bool (num_videos,) and `class_names[_head]` str (num_classes,)).
  eval_<step>_<split>.json/.npz are written too when the protocol is the run's own or none was written for this
  step and split, and the clips are the run's frames and frame size (other ones are named in the file names:
  eval_<step>_<split>_<clips>x<crops>_<frames>f_<size>px.json). The JSON records the views, `num_frames` and
  `image_size`; its `split` is the data split (the raw params' results of a run with an EMA: written under
  `<split>_raw`, `weights` 'raw').
  """
  name, named = protocol_name(workdir, results), named_split(split, results)
  prefix = files_prefix(workdir, step, split, results)
  fileio.makedirs(str(epath.Path(prefix).parent))
  legacy = name is not None and name == results.get('protocol') and _writes_legacy(workdir, step, named, name)
  # the data split evaluated: 'test' for the raw params' results written under 'test_raw' (their `weights`: 'raw')
  data_split = split[:-len('_raw')] if results.get('weights') == 'raw' and split.endswith('_raw') else split
  payload = {'step': step, 'split': data_split, **results}
  dump = lambda f: json.dump(payload, f, indent=2)
  paths = [prefix + '.json'] + ([checkpoints.eval_results_path(workdir, step, named)] if legacy else [])
  if agg is not None:
    arrays = agg.arrays()
    for json_path in paths:
      fileio.atomic_write(json_path[:-len('.json')] + '.npz', lambda f: np.savez(f, **arrays), 'wb')
    for path, content in agg.report_files(prefix):
      if isinstance(content, str):
        fileio.atomic_write_text(path, content)
      else:
        fileio.atomic_write(path, content, 'wb')
  for json_path in paths:  # last: a JSON means the evaluation's files are all there
    fileio.atomic_write(json_path, dump)
  return paths[0]
