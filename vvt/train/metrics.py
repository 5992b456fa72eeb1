"""Metric writers (TensorBoard + JSON lines), console progress with ETA, curves PNG.

`WORKDIR/metrics.jsonl` has one JSON object per line:
`{"step": 100, "kind": "train", "loss": ..., "accuracy": ..., ...}` with kind
`train` or `eval`. TensorBoard event files go to `WORKDIR/tensorboard/`.
`WORKDIR/training_curves.png` is drawn from the JSON lines at the end of a run. The workdir may be a
local path or a URL (`vvt.fileio`).
"""
import json
import math
import sys
import time
from typing import Callable, Mapping, Optional

from etils import epath
import jax
import numpy as np

from vvt import fileio

# The TensorBoard writer (vvt.train.event_writer) needs the tensorboard package, not TensorFlow: imported in
# make_writers only, so that vvt.train (trainer, steps) imports on a host without either
# (tests/train/test_imports_without_tf.py).

JSONL = 'metrics.jsonl'
CURVES = 'training_curves.png'


def _to_float(v):
  v = np.asarray(jax.device_get(v))
  return float(v) if v.size == 1 else v.tolist()


class JsonlWriter:
  """Appends scalars to WORKDIR/metrics.jsonl; `kind` tells train from eval.

  A clu `MetricWriter` by its methods (subclassing it would import clu.metric_writers, hence TensorFlow).
  Writes scalars only: the rest are no-ops.
  """

  def __init__(self, path: str, kind: str):
    self._path = path
    self._kind = kind

  def write_scalars(self, step, scalars):
    rec = {'step': int(step), 'kind': self._kind, 'time': time.time()}
    rec.update({k: _to_float(v) for k, v in scalars.items()})
    with epath.Path(self._path).open('a') as f:
      f.write(json.dumps(rec) + '\n')

  def write_summaries(self, step, values, metadata=None):
    pass

  def write_images(self, step, images):
    pass

  def write_videos(self, step, videos):
    pass

  def write_audios(self, step, audios, *, sample_rate):
    pass

  def write_texts(self, step, texts):
    pass

  def write_histograms(self, step, arrays, num_buckets=None):
    pass

  def write_hparams(self, hparams):
    pass

  def flush(self):
    pass

  def close(self):
    pass


def truncate_jsonl(workdir: str, after_step: int) -> None:
  """On resume: drop records logged after the restored step by the interrupted run."""
  path = fileio.join(workdir, JSONL)
  if not fileio.exists(path):
    return
  keep = []
  for line in fileio.read_text(path).splitlines(keepends=True):
    try:
      if json.loads(line)['step'] <= after_step:
        keep.append(line)
    except (ValueError, KeyError):
      continue
  fileio.atomic_write_text(path, ''.join(keep))


def read_jsonl(workdir: str) -> list[dict]:
  path = fileio.join(workdir, JSONL)
  if not fileio.exists(path):
    return []
  return [json.loads(l) for l in fileio.read_text(path).splitlines() if l.strip()]


class Writers:
  """Writes what it is given to each of `writers` (clu's `MultiWriter`, without importing clu.metric_writers)."""

  def __init__(self, writers):
    self._writers = tuple(writers)

  def write_scalars(self, step, scalars):
    for w in self._writers:
      w.write_scalars(step, scalars)

  def write_images(self, step, images):
    for w in self._writers:
      w.write_images(step, images)

  def write_texts(self, step, texts):
    for w in self._writers:
      w.write_texts(step, texts)

  def flush(self):
    for w in self._writers:
      w.flush()

  def close(self):
    for w in self._writers:
      w.close()


def make_writers(workdir: str, is_chief: bool):
  """(train_writer, eval_writer): TensorBoard (WORKDIR/tensorboard/KIND/) + JSON lines on the chief process only."""
  if not is_chief:
    w = Writers([])
    return w, w
  from vvt.train import event_writer  # the tensorboard package's protos
  return tuple(Writers([event_writer.EventWriter(fileio.join(workdir, 'tensorboard', kind)),
                        JsonlWriter(fileio.join(workdir, JSONL), kind)]) for kind in ('train', 'eval'))


def format_duration(seconds: float) -> str:
  if not math.isfinite(seconds):
    return '?'
  seconds = int(round(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f'{h}h{m:02d}m{s:02d}s' if h else (f'{m}m{s:02d}s' if m else f'{s}s')


class Progress:
  """Console progress lines with throughput and ETA (chief process only)."""

  def __init__(self, total_steps: int, start_step: int, batch_size: int,
               enabled: bool = True, stream=None, extra: Optional[Callable[[int], dict]] = None):
    self.total = total_steps
    self.extra = extra  # step -> more scalars of the interval (vvt.train.profile: TFLOP/s, MFU, input wait)
    self.batch_size = batch_size
    self.enabled = enabled
    self.stream = stream or sys.stdout
    self._t0 = None
    self._s0 = start_step
    self._last_t = None
    self._last_s = start_step

  def start(self, step: int) -> None:
    """Call after the first (compiling) step so the ETA ignores compilation."""
    self._t0 = self._last_t = time.time()
    self._s0 = self._last_s = step

  def rates(self, step: int) -> dict:
    now = time.time()
    if self._last_t is None or step <= self._last_s:
      return {}
    dt = now - self._last_t
    steps_per_sec = (step - self._last_s) / max(dt, 1e-9)
    self._last_t, self._last_s = now, step
    out = {'steps_per_sec': steps_per_sec, 'clips_per_sec': steps_per_sec * self.batch_size}
    if self.extra is not None:
      out.update(self.extra(step))
    return out

  def eta(self, step: int) -> float:
    if self._t0 is None or step <= self._s0:
      return float('nan')
    per_step = (time.time() - self._t0) / (step - self._s0)
    return per_step * (self.total - step)

  def report(self, step: int, scalars: Mapping[str, float]) -> None:
    if not self.enabled:
      return
    pct = 100.0 * step / max(self.total, 1)
    parts = [f'step {step}/{self.total} ({pct:.0f}%)']
    for key in sorted(scalars):
      if key in ('steps_per_sec', 'clips_per_sec'):
        continue
      v = scalars[key]
      fmt = '.2e' if key == 'learning_rate' else '.4f'
      parts.append(f'{key} {v:{fmt}}')
    if 'clips_per_sec' in scalars:
      parts.append(f'{scalars["clips_per_sec"]:.1f} clips/s '
                   f'{scalars["steps_per_sec"]:.2f} steps/s')
    parts.append(f'ETA {format_duration(self.eta(step))}')
    print('[train] ' + ' | '.join(parts), file=self.stream, flush=True)


def plot_curves(workdir: str, out_path: Optional[str] = None) -> Optional[str]:
  """Draws training loss/accuracy, learning rate and eval accuracy to a PNG."""
  records = read_jsonl(workdir)
  if not records:
    return None
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt

  # Last record wins per (kind, step) (a resumed run re-logs some steps).
  by_key = {}
  for r in records:
    by_key[(r['kind'], r['step'])] = r
  train = sorted((r for (k, _), r in by_key.items() if k == 'train'),
                 key=lambda r: r['step'])
  evals = sorted((r for (k, _), r in by_key.items() if k == 'eval'),
                 key=lambda r: r['step'])

  def series(rs, key):
    pts = [(r['step'], r[key]) for r in rs if isinstance(r.get(key), (int, float))]
    return ([p[0] for p in pts], [p[1] for p in pts])

  fig, axes = plt.subplots(1, 3, figsize=(15, 4))
  xs, ys = series(train, 'loss')
  axes[0].plot(xs, ys, label='train loss')
  axes[0].set_title('training loss')
  axes[0].set_xlabel('step')
  for key in sorted({k for r in train for k in r if k.startswith(('accuracy', 'top1_positive'))}):
    xs, ys = series(train, key)
    axes[1].plot(xs, ys, label=f'train {key}')
  for key in sorted({k for r in evals for k in r
                     if k.startswith(('top1', 'video_top1', 'clip_top1', 'video_map', 'clip_map'))}):
    xs, ys = series(evals, key)
    axes[1].plot(xs, ys, 'o-', label=f'eval {key}')
  axes[1].set_title('accuracy')
  axes[1].set_xlabel('step')
  axes[1].set_ylim(0, 1)
  axes[1].legend(fontsize=7)
  xs, ys = series(train, 'learning_rate')
  axes[2].plot(xs, ys)
  axes[2].set_title('learning rate')
  axes[2].set_xlabel('step')
  fig.tight_layout()
  out_path = out_path or fileio.join(workdir, CURVES)
  fileio.save_png(out_path, fig)
  plt.close(fig)
  return out_path
