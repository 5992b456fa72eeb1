"""Videos listed in a CSV/TSV -> sharded DMVR TFRecords (`vvt data convert`).

Input: a CSV or TSV file with lines `path,label[,...]` (a header line whose
first field is `path` is allowed; relative paths are taken from `root`, by
default the list's directory) and a class list file (one name per line;
line i is label i). A label is a class name, or an integer index into the list.

Output, for prefix `out/train` and 16 shards:
  out/train.tfrecord-00000-of-00016 ... (read with `out/train.tfrecord@16`)
  out/train.manifest.json  per video: id, path, label, frames, status, reason,
                           shard; per shard: videos and sha256; totals.

Each video is decoded with PyAV in a pool of worker processes, optionally
resampled to `fps` (the first frame at or after each time k/fps), its shorter
side resized to `short_side`, and encoded as JPEG (`jpeg_quality`). A video
that cannot be read (missing, corrupt, no frames, unknown label) is recorded in
the manifest with the reason and left out; the conversion goes on. Shards are
written atomically (temp file + rename) and a shard that already exists is
kept, so an interrupted conversion is resumed by running it again.
"""
import csv
import hashlib
import json
import multiprocessing
import os

import numpy as np


def read_class_list(path):
  with open(path, encoding='utf-8') as f:
    names = [line.strip() for line in f if line.strip()]
  if not names:
    raise ValueError(f'class list {path} is empty')
  dup = {n for n in names if names.count(n) > 1}
  if dup:
    raise ValueError(f'class list {path} repeats {sorted(dup)}')
  return names


def read_video_list(path):
  """[(path, label, extra dict)] from a CSV/TSV file."""
  with open(path, encoding='utf-8', newline='') as f:
    text = f.read()
  first = text.splitlines()[0] if text.strip() else ''
  delimiter = '\t' if path.endswith('.tsv') or '\t' in first else ','
  rows = [r for r in csv.reader(text.splitlines(), delimiter=delimiter)
          if r and any(c.strip() for c in r)]
  header = None
  if rows and rows[0][0].strip().lower() == 'path':
    header, rows = [c.strip() for c in rows[0]], rows[1:]
  out = []
  for line, row in enumerate(rows, start=2 if header else 1):
    if len(row) < 2:
      raise ValueError(f'{path}: line {line}: expected path{delimiter}label, '
                       f'got {delimiter.join(row)!r}')
    names = header or [f'column{i}' for i in range(len(row))]
    extra = {names[i]: row[i].strip() for i in range(2, min(len(row), len(names)))}
    out.append((row[0].strip(), row[1].strip(), extra))
  return out


def label_index(label, classes):
  """Index of `label` (a class name or an int) or raises ValueError."""
  if label in classes:
    return classes.index(label)
  try:
    index = int(label)
  except ValueError:
    index = None
  if index is None or not 0 <= index < len(classes):
    raise ValueError(f'label {label!r} is not in the class list '
                     f'({len(classes)} classes)')
  return index


def decode_video(path, fps=0.0, short_side=256, jpeg_quality=90, max_frames=0):
  """Encoded JPEG frames of one video (list of bytes). Raises on failure."""
  import io  # pylint: disable=g-import-not-at-top
  import av  # pylint: disable=g-import-not-at-top
  from PIL import Image  # pylint: disable=g-import-not-at-top
  if not os.path.exists(path):
    raise FileNotFoundError('file not found')
  frames = []
  with av.open(path) as container:
    if not container.streams.video:
      raise ValueError('no video stream')
    stream = container.streams.video[0]
    stream.thread_type = 'AUTO'
    next_time, size = 0.0, None
    for frame in container.decode(stream):
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
        frames = frames[:max_frames]
        break
  if not frames:
    raise ValueError('no frames could be decoded')
  return frames


def _work(job):
  """Worker: (index, path, options) -> (index, frames or None, reason)."""
  index, path, options = job
  try:
    return index, decode_video(path, **options), None
  except Exception as e:  # pylint: disable=broad-except
    return index, None, f'{type(e).__name__}: {e}'


def shard_path(prefix, shard, num_shards):
  return f'{prefix}.tfrecord-{shard:05d}-of-{num_shards:05d}'


def _sha256(path):
  h = hashlib.sha256()
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(1 << 20), b''):
      h.update(block)
  return h.hexdigest()


def convert(video_list, output, classes, num_shards=16, fps=0.0,
            short_side=256, jpeg_quality=90, workers=0, root='',
            max_frames=0, progress=True, overwrite=False):
  """Converts the videos of `video_list`; returns the manifest (a dict).

  The manifest's 'pattern' (`output.tfrecord@num_shards`) is what
  dataset.train_files / eval_files take.
  """
  from vvt.data import tfrecord  # pylint: disable=g-import-not-at-top
  class_names = read_class_list(classes) if isinstance(classes, str) else list(classes)
  entries = read_video_list(video_list)
  if not entries:
    raise ValueError(f'{video_list} lists no videos')
  if num_shards < 1:
    raise ValueError(f'num_shards must be >= 1, got {num_shards}')
  if not 1 <= jpeg_quality <= 100:
    raise ValueError(f'jpeg_quality must be in [1, 100], got {jpeg_quality}')
  root = root or os.path.dirname(os.path.abspath(video_list))
  out_dir = os.path.dirname(os.path.abspath(output))
  os.makedirs(out_dir, exist_ok=True)
  manifest_path = f'{output}.manifest.json'
  previous = {}
  if os.path.exists(manifest_path):
    with open(manifest_path) as f:
      previous = {v['index']: v for v in json.load(f).get('videos', [])}

  bounds = np.linspace(0, len(entries), num_shards + 1).astype(int)
  shard_of = np.zeros(len(entries), int)
  for s in range(num_shards):
    shard_of[bounds[s]:bounds[s + 1]] = s
  done_shards = {s for s in range(num_shards)
                 if not overwrite and os.path.exists(shard_path(output, s, num_shards))}

  videos, jobs = [], []
  options = dict(fps=fps, short_side=short_side, jpeg_quality=jpeg_quality,
                 max_frames=max_frames)
  for i, (path, label, extra) in enumerate(entries):
    entry = {'index': i, 'id': path, 'path': path, 'label': label,
             'shard': int(shard_of[i]), **extra}
    full = path if os.path.isabs(path) else os.path.join(root, path)
    if shard_of[i] in done_shards:
      old = previous.get(i, {})
      entry.update(status=old.get('status', 'existing'),
                   frames=old.get('frames'), reason=old.get('reason'),
                   label_index=old.get('label_index'))
    else:
      try:
        entry['label_index'] = label_index(label, class_names)
      except ValueError as e:
        entry.update(status='failed', reason=str(e), frames=0)
      else:
        jobs.append((i, full, options))
    videos.append(entry)

  results = {}
  writers, shard_pending = {}, {}
  for s in range(num_shards):
    if s not in done_shards:
      shard_pending[s] = [i for i in range(bounds[s], bounds[s + 1])
                          if videos[i].get('status') != 'failed']
  shard_records = {s: [] for s in shard_pending}

  def finish_ready_shards():
    for s in sorted(shard_pending):
      if all(i in results for i in shard_pending[s]):
        tfrecord.write_records(shard_path(output, s, num_shards), shard_records[s])
        del shard_pending[s]
        del shard_records[s]

  bar = None
  if progress:
    from tqdm import tqdm  # pylint: disable=g-import-not-at-top
    bar = tqdm(total=len(jobs), desc=f'convert {os.path.basename(video_list)}',
               unit='video')
  pool = None
  num_workers = workers or os.cpu_count() or 1
  if jobs and num_workers > 1:
    pool = multiprocessing.get_context('spawn').Pool(min(num_workers, len(jobs)))
    stream = pool.imap(_work, jobs, chunksize=1)
  else:
    stream = map(_work, jobs)
  try:
    for index, frames, reason in stream:
      entry = videos[index]
      if frames is None:
        entry.update(status='failed', reason=reason, frames=0)
      else:
        entry.update(status='ok', reason=None, frames=len(frames))
        shard_records[entry['shard']].append(tfrecord.encode_sequence_example(
            frames, entry['label_index'], video_id=entry['id'],
            label_text=class_names[entry['label_index']]))
      results[index] = True
      if bar is not None:
        bar.update(1)
      finish_ready_shards()
    finish_ready_shards()
  finally:
    if pool is not None:
      pool.close()
      pool.join()
    if bar is not None:
      bar.close()

  shards = []
  for s in range(num_shards):
    path = shard_path(output, s, num_shards)
    shards.append({'file': os.path.basename(path),
                   'videos': sum(1 for v in videos[bounds[s]:bounds[s + 1]]
                                 if v.get('status') == 'ok'),
                   'sha256': _sha256(path),
                   'status': 'existing' if s in done_shards else 'written'})
  ok = [v for v in videos if v.get('status') == 'ok']
  manifest = {
      'input': os.path.abspath(video_list),
      'classes': class_names,
      'options': dict(options, num_shards=num_shards),
      'pattern': f'{output}.tfrecord@{num_shards}',
      'path': manifest_path,
      'totals': {'videos': len(videos), 'ok': len(ok),
                 'failed': sum(1 for v in videos if v.get('status') == 'failed'),
                 'existing': sum(1 for v in videos if v.get('status') == 'existing'),
                 'frames': int(sum(v['frames'] or 0 for v in ok))},
      'shards': shards,
      'videos': videos,
  }
  tmp = f'{manifest_path}.tmp'
  with open(tmp, 'w') as f:
    json.dump(manifest, f, indent=1)
  os.replace(tmp, manifest_path)
  return manifest
