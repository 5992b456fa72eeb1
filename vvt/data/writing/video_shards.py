"""Videos listed in a CSV/TSV -> sharded DMVR TFRecords (`vvt data convert`).

Input: a CSV or TSV file with lines `path,label[,...]` and a class list file, as
`vvt.data.reading.video_lists` reads them (relative paths are taken from `root`,
by default the list's directory; a label is a class name, or an integer index
into the list). The `video_folder` source reads the same list without converting. A list of paths only
(`video_lists.read_video_rows`) and no class list (`classes=None`) write records without labels (no
`clip/label/*`; the manifest's `labelled` false), for a run that reads none.

Output, for prefix `out/train` and 16 shards:
  out/train.tfrecord-00000-of-00016 ... (read with `out/train.tfrecord@16`)
  out/train.manifest.json  the class names (`class_names`, label order: a run config
                           takes them, vvt.config.labels);
                           per video: id, path, label, frames, fps (the rate its frames
                           are stored at), status, reason, shard; per shard: videos, sha256 and a digest of
                           its rows; the options; totals; failures.

Each video is decoded with PyAV in a pool of worker processes, optionally
resampled to `fps` (the first frame at or after each time k/fps), its shorter
side resized to `short_side`, and encoded as JPEG (`jpeg_quality`).

Nothing is lost silently:

* a video that cannot be read (missing, corrupt, no frames, unknown label) is
  'failed', and one that decodes to fewer frames than its container declares
  (beyond `video_files.FRAME_TOLERANCE`: cut short) is 'partial'; both are left out of the
  shards and listed in the manifest's `failures` with the reason, and
  `convert` then raises `ConversionFailures` (the command exits non-zero)
  after writing everything else;
* every row of the list ends in exactly one shard or in `failures` (checked);
* shards are written atomically (temp file + rename) and the manifest is
  rewritten after each one, so an interrupted conversion is resumed by running
  it again: a shard that exists is kept only if the manifest says it holds
  exactly the rows the list now assigns to it and its sha256 still matches;
  otherwise it is rewritten (rows added to or removed from the list);
* changing an option that changes the records (`fps`, `short_side`,
  `jpeg_quality`, `max_frames`, the class list) while shards written with the
  old value exist raises `ValueError` naming the option, unless `overwrite`.
"""
import contextlib
import hashlib
import json
import multiprocessing
import os
import re

import numpy as np

from vvt import fileio
from vvt.data.reading import video_files
from vvt.data.reading import video_lists
from vvt.data.writing import shard_workers


class PartialVideo(ValueError):
  """A video decoded to fewer frames than its container declares."""


def check_frame_count(decoded, declared):
  """Raises PartialVideo when `decoded` falls short of `declared` by more
  than the tolerance (`video_files.falls_short`)."""
  if video_files.falls_short(decoded, declared):
    raise PartialVideo(video_files.partial_reason(decoded, declared))


class Frames(list):
  """A video's encoded frames, with `fps`: the rate they are stored at."""
  fps = None


def stored_rate(stream, fps):
  """The rate of the stored frames: `fps` when resampled, else the stream's."""
  rate = fps or stream.average_rate or stream.guessed_rate
  return round(float(rate), 3) if rate else None


def decode_video(path, fps=0.0, short_side=256, jpeg_quality=90, max_frames=0):
  """Encoded JPEG frames of one video (`Frames`, a list of bytes with the
  stored rate). Raises on failure, `PartialVideo` when it decodes to fewer
  frames than its container says."""
  import io

  import av
  from PIL import Image
  if not os.path.exists(path):
    raise FileNotFoundError('file not found')
  frames, decoded, capped = Frames(), 0, False
  with av.open(path) as container:
    if not container.streams.video:
      raise ValueError('no video stream')
    stream = container.streams.video[0]
    stream.thread_type = 'AUTO'
    declared = video_files.declared_frames(stream, container)
    frames.fps = stored_rate(stream, fps)
    next_time, size = 0.0, None
    for frame in container.decode(stream):
      decoded += 1
      if size is None:
        w, h = frame.width, frame.height
        if short_side and min(w, h) != short_side:
          scale = short_side / min(w, h)
          w, h = max(1, round(w * scale)), max(1, round(h * scale))
        size = (w, h)
      repeats = 1
      if fps:
        t = frame.time if frame.time is not None else len(frames) / fps
        repeats = 0
        while next_time <= t + 1e-6:
          repeats += 1
          next_time += 1.0 / fps
      if repeats == 0:
        continue
      rgb = frame.to_ndarray(width=size[0], height=size[1], format='rgb24')
      buf = io.BytesIO()
      Image.fromarray(rgb).save(buf, format='JPEG', quality=jpeg_quality)
      data = buf.getvalue()
      for _ in range(repeats):
        frames.append(data)
      if max_frames and len(frames) >= max_frames:
        del frames[max_frames:]
        capped = True
        break
  if not frames:
    raise ValueError('no frames could be decoded')
  if not capped:
    check_frame_count(decoded, declared)
  return frames


def _work(job):
  """Worker: (index, path, options) -> (index, frames or None, status, reason)."""
  index, path, options = job
  try:
    return index, decode_video(path, **options), 'ok', None
  except PartialVideo as e:
    return index, None, 'partial', str(e)
  except Exception as e:
    return index, None, 'failed', f'{type(e).__name__}: {e}'


def shard_path(prefix, shard, num_shards):
  return f'{prefix}.tfrecord-{shard:05d}-of-{num_shards:05d}'


def _sha256(path):
  h = hashlib.sha256()
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(1 << 20), b''):
      h.update(block)
  return h.hexdigest()


class ConversionFailures(ValueError):
  """Some videos failed or were partial; everything else was written."""


# Options that change the records, with the flag that sets them.
RECORD_OPTIONS = {'fps': '--fps', 'short_side': '--short-side',
                  'jpeg_quality': '--jpeg-quality', 'max_frames': '--max-frames',
                  'classes': '--classes'}
FAILED = ('failed', 'partial')


def _read_manifest(path):
  if not os.path.exists(path):
    return {}
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except ValueError as e:
    raise ValueError(f'{path}: the manifest of existing shards is not valid JSON '
                     f'({e}); remove it, or re-run with --overwrite') from None


def changed_options(previous, options):
  """[(flag, old, new)] of the record options that differ from `previous`'s."""
  old = previous.get('options', {})
  return [(RECORD_OPTIONS[k], old.get(k), options[k]) for k in RECORD_OPTIONS
          if k in old and old.get(k) != options[k]]


def rows_digest(rows):
  """sha256 of a shard's rows (path, label, extra columns) in order."""
  text = json.dumps([[p, l, sorted(e.items())] for p, l, e in rows])
  return hashlib.sha256(text.encode()).hexdigest()


def _kept_shards(output, num_shards, bounds, entries, previous, overwrite):
  """{shard: its rows' previous video entries, in order} of the shards that
  exist and hold exactly the rows the list now assigns them (same rows
  digest, file unchanged) with none failed (those are retried)."""
  if overwrite:
    return {}
  by_file = {sh['file']: sh for sh in previous.get('shards', [])}
  kept = {}
  for s in range(num_shards):
    path = shard_path(output, s, num_shards)
    old = by_file.get(os.path.basename(path))
    if (old is None or not os.path.exists(path)
        or old.get('rows_sha256') != rows_digest(entries[bounds[s]:bounds[s + 1]])
        or old.get('sha256') != _sha256(path)):
      continue
    rows = sorted((v for v in previous.get('videos', [])
                   if v.get('shard') == s), key=lambda v: v['index'])
    if len(rows) == bounds[s + 1] - bounds[s] and all(v.get('status') == 'ok' for v in rows):
      kept[s] = (old, rows)
  return kept


def _video_entries(entries, shard_of):
  out = []
  for i, (path, label, extra) in enumerate(entries):
    out.append({'index': i, 'id': path, 'path': path, 'label': label,
                'shard': int(shard_of[i]), **extra})
  return out


def _shard_entry(output, s, num_shards, videos, rows, status):
  path = shard_path(output, s, num_shards)
  return {'file': os.path.basename(path),
          'videos': sum(1 for v in videos if v.get('status') == 'ok'),
          'sha256': _sha256(path), 'rows_sha256': rows_digest(rows),
          'status': status}


def _check_accounting(videos, shards):
  """Every row in exactly one shard (status ok) or in the failures."""
  for v in videos:
    if v.get('status') not in ('ok',) + FAILED:
      raise RuntimeError(f'internal error: row {v["index"]} ({v["path"]}) has '
                         f'status {v.get("status")!r}')
  ok = sum(1 for v in videos if v['status'] == 'ok')
  written = sum(sh['videos'] for sh in shards if sh is not None)
  if ok != written:
    raise RuntimeError(f'internal error: {ok} videos ok but {written} in shards')


def _write_manifest(path, manifest):
  fileio.atomic_write(path, lambda f: json.dump(manifest, f, indent=1))


def _check_arguments(video_list, entries, num_shards, jpeg_quality):
  if not entries:
    raise ValueError(f'{video_list} lists no videos')
  if num_shards < 1:
    raise ValueError(f'num_shards must be >= 1, got {num_shards}')
  if not 1 <= jpeg_quality <= 100:
    raise ValueError(f'jpeg_quality must be in [1, 100], got {jpeg_quality}')


def _refuse_changed_options(manifest_path, output, num_shards, previous, options, overwrite):
  """ValueError naming the first record option that differs from the one existing shards were written with."""
  existing = [s for s in range(num_shards) if os.path.exists(shard_path(output, s, num_shards))]
  changed = changed_options(previous, options)
  if changed and existing and not overwrite:
    flag, old, new = changed[0]
    raise ValueError(
        f'{manifest_path}: the existing shards were written with {flag} {old!r}, '
        f'now {new!r}' + (f' (and {len(changed) - 1} more option(s))' if len(changed) > 1 else '')
        + '; re-run with --overwrite to rebuild them, or choose another --output')


def _shard_bounds(num_videos, num_shards):
  """(bounds, shard_of): shard s holds rows bounds[s]:bounds[s+1]; shard_of[i] is row i's shard."""
  bounds = np.linspace(0, num_videos, num_shards + 1).astype(int)
  shard_of = np.zeros(num_videos, int)
  for s in range(num_shards):
    shard_of[bounds[s]:bounds[s + 1]] = s
  return bounds, shard_of


def _decode_jobs(videos, shard_of, bounds, kept, root, class_names, decode_options):
  """The rows to decode: [(row, file, options)]. Rows of kept shards take their old entries; a row with an
  unknown label fails here."""
  jobs = []
  for i, entry in enumerate(videos):
    if shard_of[i] in kept:
      old = kept[shard_of[i]][1][i - bounds[shard_of[i]]]
      entry.update({k: old.get(k) for k in ('status', 'frames', 'reason', 'label_index', 'fps')})
      continue
    full = entry['path'] if os.path.isabs(entry['path']) else os.path.join(root, entry['path'])
    try:
      entry['label_index'] = None if class_names is None else video_lists.label_index(entry['label'], class_names)
    except ValueError as e:
      entry.update(status='failed', reason=str(e), frames=0)
    else:
      jobs.append((i, full, decode_options))
  return jobs


def _label_text(index, names) -> str:
  """The class name of a label index, or the names of several joined by ';' (multi-label rows)."""
  if isinstance(index, (list, tuple)):
    return video_lists.LABEL_SEPARATOR.join(names[i] for i in index)
  return names[index]


class _Conversion:
  """The state of one conversion: per-row entries, shards written or kept, records waiting for their shard."""

  def __init__(self, video_list, output, num_shards, options, entries, videos, bounds, kept, worker=None):
    self.video_list, self.output, self.num_shards, self.options = video_list, output, num_shards, options
    self.entries, self.videos, self.bounds = entries, videos, bounds
    # One of several workers (vvt.data.writing.shard_workers): its own shards, rows and manifest only.
    self.worker, self.mine = worker, shard_workers.shards_of(worker, num_shards)
    self.manifest_path = shard_workers.manifest_path(output, worker)
    self.shards = [dict(kept[s][0], status='existing') if s in kept else None for s in range(num_shards)]
    self.pending = {s: [i for i in range(bounds[s], bounds[s + 1]) if videos[i].get('status') not in FAILED]
                    for s in self.mine if s not in kept}
    self.records = {s: {} for s in self.pending}
    self.done = set()

  def manifest(self):
    videos = [v for v in self.videos if v['shard'] in self.mine]
    shards = [self.shards[s] for s in sorted(self.mine)]
    ok = [v for v in videos if v.get('status') == 'ok']
    failures = [{'index': v['index'], 'path': v['path'], 'status': v['status'],
                 'reason': v.get('reason')} for v in videos if v.get('status') in FAILED]
    return {
        'input': os.path.abspath(self.video_list),
        'classes': self.options['classes'],
        'class_names': self.options['classes'],  # label order: what a run config's class_names take
        'labelled': self.options['classes'] is not None,  # False: no clip/label/* (vvt.data.unlabelled_problems)
        'options': dict(self.options, num_shards=self.num_shards),
        'pattern': f'{self.output}.tfrecord@{self.num_shards}',
        'path': self.manifest_path,
        'complete': all(sh is not None for sh in shards),
        'totals': {'videos': len(videos), 'ok': len(ok),
                   'failed': len(failures),
                   'partial': sum(1 for v in failures if v['status'] == 'partial'),
                   'existing': sum(sh['videos'] for sh in shards
                                   if sh is not None and sh['status'] == 'existing'),
                   'frames': int(sum(v['frames'] or 0 for v in ok))},
        'failures': failures,
        'shards': [sh for sh in shards if sh is not None],
        'videos': videos,
        **({'worker': list(self.worker)} if self.worker else {}),
    }

  def add(self, index, frames, status, reason):
    """One decoded row: its record waits for the rest of its shard."""
    from vvt.data.writing import dmvr_records
    entry = self.videos[index]
    if frames is None:
      entry.update(status=status, reason=reason, frames=0)
    else:
      entry.update(status='ok', reason=None, frames=len(frames))
      entry['fps'] = getattr(frames, 'fps', None)
      names, label = self.options['classes'], entry['label_index']
      self.records[entry['shard']][index] = dmvr_records.encode_sequence_example(
          frames, {} if label is None else label, video_id=entry['id'],
          label_text=None if label is None else _label_text(label, names), captions=entry.get('captions', ()))
    self.done.add(index)

  def finish_ready_shards(self):
    """Writes every shard whose rows are all decoded, then the manifest (resumable from here)."""
    from vvt.data.writing import dmvr_records
    bounds, n = self.bounds, self.num_shards
    for s in sorted(self.pending):
      if all(i in self.done for i in self.pending[s]):
        rows = [self.records[s][i] for i in sorted(self.records[s])]  # list order
        dmvr_records.write_records(shard_path(self.output, s, n), rows)
        self.shards[s] = _shard_entry(self.output, s, n, self.videos[bounds[s]:bounds[s + 1]],
                                      self.entries[bounds[s]:bounds[s + 1]], 'written')
        del self.pending[s], self.records[s]
        _write_manifest(self.manifest_path, self.manifest())


@contextlib.contextmanager
def _decoded(jobs, workers):
  """Yields (row, frames, status, reason) per job, decoded in a pool of `workers` processes (0: one per CPU)."""
  num_workers = workers or os.cpu_count() or 1
  if not jobs or num_workers <= 1:
    yield map(_work, jobs)
    return
  pool = multiprocessing.get_context('spawn').Pool(min(num_workers, len(jobs)))
  try:
    yield pool.imap(_work, jobs, chunksize=1)
  finally:
    pool.close()
    pool.join()


class LabelsMismatch(ValueError):
  """A list with labels and no class list, or a list of paths only with one (`vvt data convert` exits 2)."""
  bad_input = True


def _class_names(video_list, entries, classes):
  """The class names of a conversion: None for a list of paths only without `classes` (records without labels);
  LabelsMismatch naming the list when it has labels and no `classes`, or paths only and `classes`."""
  unlabelled = video_lists.unlabelled(entries)
  if classes is None and not unlabelled:
    raise LabelsMismatch(f'{video_list}: its rows have labels: give --classes (a class list, one name a line), or list '
                     'paths only (a header `path` alone) to write records without labels')
  if classes is not None and unlabelled:
    raise LabelsMismatch(f'{video_list}: a list of paths only gives no labels: leave out --classes to write records '
                     'without labels, or give path,label rows')
  if classes is None:
    return None
  return video_lists.read_class_list(classes) if isinstance(classes, str) else list(classes)


def convert(video_list, output, classes, num_shards=16, fps=0.0,
            short_side=256, jpeg_quality=90, workers=0, root='',
            max_frames=0, progress=True, overwrite=False, check=True, worker=None):
  """Converts the videos of `video_list`; returns the manifest (a dict).

  The manifest's 'pattern' (`output.tfrecord@num_shards`) is what
  dataset.train_files / eval_files take. With `check` (the command), raises
  `ConversionFailures` after writing the shards and manifest when any video
  failed or was partial; a changed record option (see the module doc) raises
  ValueError naming it unless `overwrite`. `worker=(i, n)`: convert only the
  shards of worker i of n (`vvt.data.writing.shard_workers`) into its own manifest;
  the last worker to finish assembles the one manifest.
  """
  entries = video_lists.read_video_list(video_list)
  class_names = _class_names(video_list, entries, classes)
  _check_arguments(video_list, entries, num_shards, jpeg_quality)
  root = root or os.path.dirname(os.path.abspath(video_list))
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  worker = shard_workers.checked_worker(worker, num_shards)
  manifest_path = shard_workers.manifest_path(output, worker)
  decode_options = dict(fps=fps, short_side=short_side, jpeg_quality=jpeg_quality, max_frames=max_frames)
  options = dict(decode_options, classes=class_names)
  previous = _read_manifest(manifest_path) or (_read_manifest(f'{output}.manifest.json') if worker else {})
  _refuse_changed_options(manifest_path, output, num_shards, previous, options, overwrite)

  bounds, shard_of = _shard_bounds(len(entries), num_shards)
  kept = _kept_shards(output, num_shards, bounds, entries, previous, overwrite)
  videos = _video_entries(entries, shard_of)
  jobs = _decode_jobs(videos, shard_of, bounds, kept, root, class_names, decode_options)
  run = _Conversion(video_list, output, num_shards, options, entries, videos, bounds, kept, worker)
  jobs = [j for j in jobs if shard_of[j[0]] in run.mine]
  from vvt import progress as progress_lib
  with progress_lib.bar(len(jobs), f'convert {os.path.basename(video_list)}', 'video',
                        disable=not progress) as bar, _decoded(jobs, workers) as stream:
    run.finish_ready_shards()
    for decoded in stream:
      run.add(*decoded)
      bar.update(1)
      run.finish_ready_shards()

  result = run.manifest()
  _check_accounting(result['videos'], result['shards'])
  _write_manifest(manifest_path, result)
  if worker:
    result = shard_workers.assemble_if_complete(output, worker[1]) or result
  failures = result['failures']
  if check and failures:
    kinds = '; '.join(f'{n} x {reason} (first: {path})' for n, reason, path in failure_kinds(failures))
    raise ConversionFailures(f'{len(failures)} of {len(videos)} videos failed or were partial and are in no shard '
                             f'(reasons in {manifest_path}): {kinds}')
  return result


def _kind(reason) -> str:
  """A failure reason without what differs between files of one kind (quoted names, paths, numbers)."""
  return re.sub(r'\d+', 'N', re.sub(r"'[^']*'|\"[^\"]*\"", "'...'", str(reason)))


def failure_kinds(failures) -> list[tuple[int, str, str]]:
  """[(number of videos, the first one's reason, the first one's path)] per kind of reason (the same reason but for
  file names and numbers), the commonest first (then in list order)."""
  groups = {}
  for f in failures:
    groups.setdefault(_kind(f['reason']), []).append(f)
  ranked = sorted(groups.values(), key=lambda g: -len(g))  # stable: ties keep the order of their first video
  return [(len(g), str(g[0]['reason']), g[0]['path']) for g in ranked]
