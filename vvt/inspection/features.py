"""Per-video embeddings of a split (`vvt features`), streamed to shards so a split of any size never sits in memory.

    index = extract(run, workdir, output, split='test', fmt='npz', shard_size=1024, tokens=False, layers=(),
                    combine='mean')
    emb, ids, labels = read(output)                      # all shards concatenated (for a split that fits)

The embedding of a view is the model's video representation, its named output 'pooled' (vvt/models/outputs.py):
what its classifier head reads (the class token, the pooled tokens, the attentive pooler's output, X-ViT's
temporal-attention output; (D,) per view). The views of a video (`num_test_clips x num_spatial_crops`, the
evaluation's sampling) are averaged. `tokens=True` adds every token of one view (`tokens_view`, default 0: the
first clip's first crop): the last encoder's tokens after its final LayerNorm ('encoded': what an attentive pooler
reads, and a probe run's probes), (n_t, N, D). `layers` (e.g. (8, 11)) takes the features inside the network
instead: each layer's tokens through its encoder's final LayerNorm ('encoded<i>'), averaged (`combine='mean'`) or
concatenated along D ('concat': D * k), the embedding their mean over the tokens (as a probe's `task.probe.layers`).

OUTPUT/ holds `features-00000.npz` ... (or `.safetensors`), each with up to `shard_size` videos in the split's
order: `embedding` (n, D) float32, `video_index` (n,) int64 (the record's index in the split), a label per head
(`label` (n,), or `label_<head>` for multi-head data) and with tokens `tokens` (n, n_t, N, D); the video ids as
`video_id` (npz: a unicode array) or the metadata `video_ids` (safetensors: a JSON list); multi-label data's
`label` is (n, C) multi-hot. `features.json` names the shards and the checkpoint, split, view protocol, sizes, the
videos left out as bad records, the `layers` and their `combine`, and the names of the labels' classes
(`class_names`: the data's own where it names them, `class_names_from` 'dataset', else the config's, 'config';
`label_names`).
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np

from vvt import fileio
from vvt import progress as progress_lib
from vvt.models import frame_size
from vvt.models import outputs as outputs_lib

FORMATS = ('npz', 'safetensors')
INDEX = 'features.json'


# ----------------------------------------------------------------------------------- the step


def features_step_fn(module, normalization: str, tokens: bool, layers=(), combine: str = 'mean',
                     video_text: bool = False):
  """`step(params, batch) -> (features, passthrough)` before jit: features {'embedding': (B, D') float32 [,
  'tokens': (B, n_t, N, D') float32]} of the model's named outputs (`vvt.models.outputs.features` of `layers`),
  or of a video-text model (`video_text`) its video embeddings (`encode_video`, (B, E)); passthrough the batch
  without 'inputs'."""
  from vvt.data import normalize
  from vvt.models import outputs as outputs_lib

  def step(params, batch):
    inputs = normalize(batch['inputs'], normalization)
    if video_text:  # a video-text model: its video embedding (encode_video), what its texts are compared with
      embedding = module.apply({'params': params}, inputs, method='encode_video')
      return {'embedding': embedding.astype(jnp.float32)}, {k: v for k, v in batch.items() if k != 'inputs'}
    got = module.apply({'params': params}, inputs, train=False, outputs=outputs_lib.layer_names(layers))
    pooled, toks = outputs_lib.features(got, layers, combine)
    out = {'embedding': pooled.astype(jnp.float32)}
    if tokens:
      out['tokens'] = toks.astype(jnp.float32)
    return out, {k: v for k, v in batch.items() if k != 'inputs'}

  return step


# ----------------------------------------------------------------------------------- streaming


class ShardWriter:
  """Per-video sums of streamed views -> complete videos -> shards of `shard_size` videos (only these in memory)."""

  def __init__(self, output: str, fmt: str, shard_size: int, views: int, video_ids: list, tokens_view: int):
    if fmt not in FORMATS:
      raise ValueError(f'format must be one of {FORMATS}, got {fmt!r}')
    if shard_size < 1:
      raise ValueError(f'shard_size must be a positive int, got {shard_size!r}')
    self.output, self.fmt, self.shard_size, self.views = output, fmt, int(shard_size), int(views)
    self.video_ids, self.tokens_view = video_ids, int(tokens_view)
    self.open: dict[int, dict] = {}   # video index -> partial sums of its views
    self.done: list[dict] = []        # complete videos waiting for a shard
    self.shards: list[str] = []
    self.skipped: set[int] = set()
    self.num_videos = 0
    self.dim = None
    os.makedirs(output, exist_ok=True)

  def add(self, features: dict, passthrough: dict) -> None:
    """One batch: features {'embedding': (B, D), ['tokens': (B, ...)]}, passthrough with video_index, view_index,
    mask and the labels."""
    vi = np.asarray(passthrough['video_index']).astype(np.int64)
    mask = np.asarray(passthrough['mask']) > 0
    self.skipped.update(int(i) for i in vi[(~mask) & (vi >= 0)])
    labels = {k: np.asarray(v) for k, v in passthrough.items() if k == 'label' or k.startswith('label/')}
    emb = np.asarray(features['embedding'], np.float64)
    self.dim = emb.shape[-1]
    for row in np.flatnonzero(mask):
      i = int(vi[row])
      video = self.open.setdefault(i, {'sum': np.zeros(emb.shape[-1]), 'count': 0,
                                       'labels': {k: _label(v[row]) for k, v in labels.items()}})
      video['sum'] += emb[row]
      video['count'] += 1
      if 'tokens' in features and int(passthrough['view_index'][row]) == self.tokens_view:
        video['tokens'] = np.asarray(features['tokens'][row], np.float32)
      if video['count'] == self.views:
        self._complete(i)

  def _complete(self, i: int) -> None:
    video = self.open.pop(i)
    if i in self.skipped:
      return
    self.done.append({'index': i, **video})
    if len(self.done) >= self.shard_size:
      self._write(self.done[:self.shard_size])
      self.done = self.done[self.shard_size:]

  def close(self) -> None:
    """Writes what is left (videos with fewer views than expected too: the split's last ones)."""
    for i in sorted(self.open):
      self._complete(i)
    for start in range(0, len(self.done), self.shard_size):
      self._write(self.done[start:start + self.shard_size])
    self.done = []

  def _write(self, videos: list) -> None:
    videos = [v for v in videos if v['index'] not in self.skipped]
    if not videos:
      return
    index = np.array([v['index'] for v in videos], np.int64)
    arrays = {'embedding': np.stack([v['sum'] / v['count'] for v in videos]).astype(np.float32),
              'video_index': index}
    for key in videos[0]['labels']:
      name = 'label' if key == 'label' else 'label_' + key.split('/', 1)[1]
      arrays[name] = np.array([v['labels'][key] for v in videos], np.int64)
    if any('tokens' in v for v in videos):
      missing = [int(v['index']) for v in videos if 'tokens' not in v]
      if missing:
        raise ValueError(f'video {missing[0]} has no view {self.tokens_view} (tokens_view) to take the tokens of')
      arrays['tokens'] = np.stack([v['tokens'] for v in videos])
    ids = [self.video_ids[i] if i < len(self.video_ids) else str(i) for i in index]
    name = f'features-{len(self.shards):05d}.{self.fmt}'
    path = os.path.join(self.output, name)
    if self.fmt == 'npz':
      np.savez(path, video_id=np.array(ids, dtype=str), **arrays)
    else:
      from safetensors.numpy import save_file
      save_file(arrays, path, metadata={'video_ids': json.dumps(ids)})
    self.shards.append(name)
    self.num_videos += len(videos)


def _label(value):
  """A video's label: an int (single-label), or its multi-hot vector int64 (C,) (multi-label data)."""
  return int(value) if np.ndim(value) == 0 else np.asarray(value, np.int64)


# ----------------------------------------------------------------------------------- the command


def label_names(run) -> tuple:
  """(class names, where from) of the labels the features carry: the data's own names (its manifest, classes.txt or
  video list: the names its labels were encoded with, `names.dataset_class_names`) and 'dataset', else the run's
  `class_names` and 'config' (data that names no classes: its labels are the config's), else (None, None); a
  multi-head run: (None, None). The checkpoint's names are not the data's when it is pointed at other data."""
  from vvt.data import dataset_class_names
  if hasattr(run.data.num_classes, 'items'):
    return None, None
  names = dataset_class_names(run.data)
  if names:
    return list(names), 'dataset'
  return (list(run.class_names), 'config') if run.class_names else (None, None)


def _contents(run, writer: ShardWriter, fmt: str, tokens: bool, tokens_view: int) -> dict:
  """What features.json says of the shards: format, sizes, skipped videos, tokens, clip, the labels' class names."""
  names, names_from = label_names(run)
  return dict(format=fmt, dim=writer.dim, num_videos=writer.num_videos, shards=writer.shards,
              videos_skipped=sorted(writer.skipped), tokens=bool(tokens),
              tokens_view=int(tokens_view) if tokens else None, num_frames=run.model.num_frames,
              image_size=frame_size.config_value(run.model.image_size), class_names=names, class_names_from=names_from)


def _stream(batches, step: Callable, writer: Optional[ShardWriter], bar) -> None:
  """Every batch through `step` (-> (features, passthrough)), this host's rows to `writer` (the chief's)."""
  from vvt.train import evaluate
  try:
    for batch in batches:
      feats, passthrough = step(batch)
      if writer is not None:
        writer.add({k: evaluate._local(v) for k, v in feats.items()},
                   {k: evaluate._local(v) for k, v in passthrough.items()})
      bar.update(1)
  finally:
    bar.close()


def _check(run, tokens: bool, tokens_view: int, layers, combine: str) -> int:
  """The views per video of `run`'s data; ValueError (one line each) for a layer its model does not have, an unknown
  `combine`, or a `tokens_view` its videos do not have."""
  data = run.data
  views = int(data.num_test_clips) * int(data.num_spatial_crops)
  problems = outputs_lib.check_layers('layers', layers, outputs_lib.num_layers(run.model))
  if combine not in outputs_lib.COMBINE:
    problems.append(f'combine must be one of {", ".join(outputs_lib.COMBINE)}, got {combine!r}')
  if tokens and not 0 <= tokens_view < views:
    problems.append(f'tokens_view={tokens_view} is not a view of the {views} per video '
                    f'(num_test_clips x num_spatial_crops)')
  if problems:
    raise ValueError('\n'.join(problems))
  return views


@dataclasses.dataclass(frozen=True)
class FeaturesModel:
  """A checkpoint loaded for features: `apply(batch)` -> (features, passthrough) of a global batch of
  `batch_size` rows ({'inputs': uint8 (B, T, H, W, 3), ...}; see `features_step_fn`), sharded over the run's mesh."""
  apply: Callable
  step: int
  weights: str
  batch_size: int
  program: Any = None   # the program the checkpoint was built by (`vvt.train.program.Program`)
  params: Any = None    # its params (a video-text model's text tower encodes texts with them)


def load_model(run, workdir: str, step: Optional[int] = None, tokens: bool = False, layers=(),
               combine: str = 'mean', log: Callable = print) -> FeaturesModel:
  """The checkpoint of `workdir` (a run or a converted checkpoint) at `step` (default: the newest intact one) as
  RunSpec `run` builds it on its mesh: its EMA params where it has them unless eval.raw_params; written for another
  clip: its tables resized (`vvt.train.clip_resize`)."""
  from vvt.train import checkpoints
  from vvt.train import clip_resize
  from vvt.train import mesh as mesh_lib
  from vvt.train import steps
  from vvt.train import trainer
  from vvt.train.program import build_program
  mesh = trainer.make_mesh(run)
  program = build_program(run, mesh)
  abstract = program.abstract_params()
  raw = run.eval.raw_params
  step, (params, weights), _ = checkpoints.load_with_fallback(
      workdir, lambda s: clip_resize.load_eval_params(workdir, s, abstract, run.model, raw=raw, log=log),
      step=step, log=log)
  video_text = run.model.text is not None
  fn = steps.jit_eval_step(features_step_fn(program.module, run.data.normalization, tokens, layers, combine,
                                            video_text), mesh, program.param_shardings, program.logical_rules)
  batch_size = run.eval.batch_size
  return FeaturesModel(
      apply=lambda batch: fn(params, mesh_lib.global_batch(batch, mesh, batch_size, program.logical_rules)),
      step=int(step), weights=weights, batch_size=batch_size, program=program, params=params)


def extract(run, workdir: str, output: str, *, split: Optional[str] = None, step: Optional[int] = None,
            fmt: str = 'npz', shard_size: int = 1024, tokens: bool = False, tokens_view: int = 0, layers=(),
            combine: str = 'mean', log: Callable = print, progress: Optional[bool] = None, queries=()) -> dict:
  """Embeddings of every video of `split` (default eval.split) of RunSpec `run` by the checkpoint of `workdir`
  (`load_model`) -> shards in `output`; returns the index written to features.json. `layers`, `combine`: the
  features of those layers (see the module docstring); ValueError for a layer the model does not have. A
  video-text model's embeddings are its video embeddings (`encode_video`, features.json `video_text`); its
  `queries` (texts) are encoded too, into `texts.npz` (`vvt.inspection.search.write_texts`)."""
  from vvt.data import make_eval_iterator
  from vvt.data import video_ids
  from vvt.train import checkpoints
  from vvt.train import evaluate
  from vvt.train import trainer
  if fmt not in FORMATS:
    raise ValueError(f'format must be one of {FORMATS}, got {fmt!r}')
  data = run.data
  views = _check(run, tokens, tokens_view, layers, combine)
  split = split or run.eval.split
  workdir = checkpoints.abspath(workdir)
  checkpoints.resolve_step(workdir, step)  # first: a wrong --step is the commonest mistake
  trainer.require_files(data, fields=('eval_files',))
  model = load_model(run, workdir, step, tokens, layers, combine, log)
  it = make_eval_iterator(data, split=split, global_batch_size=model.batch_size,
                          process_index=jax.process_index(), process_count=jax.process_count())
  chief = jax.process_index() == 0
  writer = ShardWriter(output, fmt, shard_size, views, video_ids(data, split) if chief else [],
                       tokens_view) if chief else None
  if progress is None:
    progress = bool(log) and chief
  bar = progress_lib.bar(len(it), f'features {split}', 'batch', disable=not progress, mininterval=1.0, leave=False)
  _stream(it, model.apply, writer, bar)
  if writer is None:
    return {}
  writer.close()
  index = dict(checkpoint=workdir, step=model.step, weights=model.weights, split=split,
               protocol=evaluate.protocol(data), layers=[int(i) for i in layers], combine=combine if layers else None,
               video_text=run.model.text is not None, **_contents(run, writer, fmt, tokens, tokens_view))
  if queries:
    from vvt.inspection import search
    from vvt.train import texts
    tokenize = texts.tokenizer(data, run.model, workdir, run.init_from)
    index['texts'] = search.write_texts(output, queries, texts.encode(model.program, model.params, tokenize,
                                                                      queries))
  with open(os.path.join(output, INDEX), 'w') as f:
    json.dump(index, f, indent=1, default=str)
  if log:
    log(f'[features] {split} {index["protocol"]}: {writer.num_videos} videos x {writer.dim} in '
        f'{len(writer.shards)} shard(s) -> {output}')
  return index


def read(output: str) -> tuple[np.ndarray, list, dict]:
  """Every shard of `output` (a `vvt features --output` folder, as its features.json lists them), concatenated in
  the split's order. Returns (embeddings, video_ids, rest):

    embeddings   float32 (n, D): each video's representation, averaged over its views
    video_ids    list of n str: the records' ids (or their index in the split, as text)
    rest         {'video_index': int64 (n,) the record's index in the split,
                  'label': int64 (n,), or (n, C) multi-hot for multi-label data (multi-head data:
                  'label_<head>' (n,) per head),
                  'tokens': float32 (n, n_t, N, D) where written with --tokens}

  n is the number of videos written (the split's, less the bad records left out: features.json's
  `videos_skipped`); with no shard, (0, D) embeddings, [] and {}. The class names of the labels are features.json's
  `class_names`."""
  with open(os.path.join(output, INDEX)) as f:
    index = json.load(f)
  parts, ids = [], []
  for name in index['shards']:
    path = os.path.join(output, name)
    if index['format'] == 'npz':
      part = fileio.load_arrays(path)  # a damaged shard, or one that would need pickle: ValueError naming it
      ids += [str(x) for x in part.pop('video_id')]
    else:
      from safetensors import safe_open
      with safe_open(path, framework='numpy') as f:
        part = {k: f.get_tensor(k) for k in f.keys()}
        ids += json.loads(f.metadata()['video_ids'])
    parts.append(part)
  if not parts:
    return np.zeros((0, index['dim'] or 0), np.float32), [], {}
  rest = {k: np.concatenate([p[k] for p in parts]) for k in parts[0] if k != 'embedding'}
  return np.concatenate([p['embedding'] for p in parts]), ids, rest
