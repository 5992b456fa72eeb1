"""Frozen-backbone probes: a grid of probes trained in one run on the features of a frozen backbone.

    video (B, T, H, W, 3) -> backbone (eval mode, no gradient) -> pooled (B, D), tokens (B, L, D)
                             (its named outputs, vvt/models/outputs.py: the head's input and the final-normed
                             tokens, or with `task.probe.layers` those layers' tokens, averaged or concatenated
                             (`task.probe.combine`), and their mean)
                          -> probe_i: 'linear'     Dense(C) on the pooled features
                                      'attentive'  AttentivePooler over all the tokens -> Dense(C)
                                                   (V-JEPA 2's attentive probe: learned query token(s),
                                                   cross-attention, `depth` optional self-attention blocks)

The backbone is the model of `model` (any checkpoint vvt loads: its params keep their names, the probes are
under `probes/probe_<i>`); the features are computed once per step and shared by the N probes of the grid
`task.probe.lrs` x `task.probe.weight_decays` (as V-JEPA 2's eval configs). Each probe has its own optimiser
(`optimizer(...)`: the run's optimiser, its learning-rate schedule scaled to the probe's lr, its weight decay);
the backbone's params get `optax.set_to_zero` (no optimiser state, never changed). The probes' loss, metrics,
scores and multi-view aggregation are those of the base task `task.probe.base` ('classification' (one head) or
'multilabel'); the loss is the sum of the probes' (their params are disjoint: each probe's gradient is its own).

Results: the best probe's results (its main metric, e.g. `video_top1` or `video_map`; of probes tied on it, the one
of the smaller lr, then of the smaller weight decay: `best_of`) at the top level, with `best_probe`, `tied_probes`
(the others of its value) and `probes` (per probe: name, lr, weight decay, main metric); files: the best probe's
and P_probes.csv (the table).
"""
from __future__ import annotations

import csv
import dataclasses
import importlib
import io
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from vvt.tasks import probe_options
from vvt.tasks import registry
from vvt.tasks.base import Task

grid = probe_options.grid


def probe_names(n: int) -> tuple:
  return tuple(f'probe_{i}' for i in range(n))


class ProbeHead(nn.Module):
  """One probe: pooled (B, D) / tokens (B, L, D) -> logits (B, C)."""
  num_classes: int
  head: str                 # 'linear' | 'attentive'
  pooler: Any = None        # the AttentivePooler fields (dict) of an attentive probe

  @nn.compact
  def __call__(self, pooled, tokens):
    from vvt.models.poolers import AttentivePooler
    rep = pooled if self.head == 'linear' else AttentivePooler(**self.pooler, name='pooler')(tokens)
    return nn.Dense(self.num_classes, name='output_projection')(rep.astype(jnp.float32))


class ProbeGrid(nn.Module):
  """`num_probes` probes (`probe_<i>`) on the same features: {probe_i: logits (B, C)}."""
  num_classes: int
  num_probes: int
  head: str
  pooler: Any = None

  @nn.compact
  def __call__(self, pooled, tokens):
    return {name: ProbeHead(self.num_classes, self.head, self.pooler, name=name)(pooled, tokens)
            for name in probe_names(self.num_probes)}


def features(call, video, layers=(), combine: str = 'mean', attentive: bool = False) -> tuple:
  """(pooled (B, D'), tokens (B, L, D')) of a backbone by `call(video, names)` (its named outputs in eval mode,
  `vvt.models.outputs.features`): without `layers` the input of its classifier head (an attentive-classifier
  backbone's, `attentive`: the mean of the tokens, its pooler being its classifier's) and the tokens of its last
  encoder after the final norm (what `vvt features --tokens` writes); with `layers` their tokens, averaged or
  concatenated (D' = D * len(layers)) by `combine`, and their mean."""
  from vvt.models import outputs as outputs_lib
  pooled, tokens = outputs_lib.features(call(video, outputs_lib.layer_names(layers)), layers, combine)
  tokens = tokens.reshape(video.shape[0], -1, tokens.shape[-1])
  if attentive and not layers:
    pooled = jnp.mean(tokens, axis=1)
  return pooled, tokens


def probe_model(backbone: nn.Module, num_classes: int, num_probes: int, head: str, pooler=None, layers=(),
                combine: str = 'mean') -> nn.Module:
  """The backbone's module with `num_probes` probes on the features of `layers` (`features`): its params keep the
  backbone's names, plus `probes`; returns {probe_i: logits (B, C)}, or with `outputs` the backbone's named
  outputs (vvt/models/outputs.py)."""
  base = type(backbone)

  class ProbeModel(base):
    probe_fields: Any = None  # (num_classes, num_probes, head, pooler, layers, combine)

    def __call__(self, video, train: bool = False, outputs=None):
      if outputs is not None:
        return base.__call__(self, video, train=False, outputs=outputs)
      return self._probe(video)

    @nn.compact
    def _probe(self, video):
      nc, n, kind, pool, layers, how = self.probe_fields
      pooled, tokens = features(lambda v, names: base.__call__(self, v, train=False, outputs=names), video,
                                layers, how, attentive=self.spec.classifier == 'attentive')
      pooled, tokens = jax.lax.stop_gradient(pooled), jax.lax.stop_gradient(tokens)
      return ProbeGrid(nc, n, kind, pool, name='probes')(pooled, tokens)

  fields = {f.name: getattr(backbone, f.name) for f in dataclasses.fields(backbone)
            if f.init and f.name not in ('parent', 'name')}
  return ProbeModel(**fields, probe_fields=(num_classes, num_probes, head, pooler, tuple(layers), combine))


def pooler_fields(spec, backend, *, num_queries: int, depth: int, num_heads: int, dim=None) -> dict:
  """The AttentivePooler fields of an attentive probe on a backbone of ModelSpec `spec` whose features have `dim`
  channels (default its hidden size D; concatenated layers: k D) (V-JEPA 2's: 'block' cross-attention, head_dim
  dim / num_heads, an MLP of 4 dim)."""
  from vvt.models.video_transformer import block_fields
  d = dim or spec.hidden_size
  if d % num_heads:
    raise ValueError(f'task.probe.num_heads: {num_heads} does not divide the features\' {d} channels')
  block = block_fields(spec, ('joint',), (1, 1, 1), num_heads=num_heads, mlp_dim=4 * d, backend=backend)
  block.update(qkv_bias=True, key_bias=True, logit_cap=None)
  return dict(num_queries=num_queries, num_heads=num_heads, head_dim=d // num_heads, depth=depth, mlp_dim=4 * d,
              cross_attention='block', per_dim_scale=False, block=block)


@dataclasses.dataclass(frozen=True)
class Probe(Task):
  """See the module docstring. `base` is the task the probes are trained and judged by."""
  base: Task
  settings: tuple            # ((lr, weight decay), ...) of the probes, in order
  head: str = 'linear'
  num_queries: int = 1
  depth: int = 0
  num_heads: int = 4
  base_lr: float = 1.0       # schedule.base_lr: the probes' lr scales the schedule by lr / base_lr
  backbone: str = ''         # task.probe.backbone: the checkpoint (vvt run or converted folder) of the backbone
  layers: tuple = ()         # task.probe.layers: the backbone's layers the probes read (): its own features
  combine: str = 'mean'      # task.probe.combine: the layers' tokens averaged ('mean') or concatenated ('concat')
  name = 'probe'
  own_params = ('probes',)   # the params the task adds (the rest is the backbone's)

  @property
  def names(self) -> tuple:
    return probe_names(len(self.settings))

  @property
  def num_classes(self) -> int:
    return int(self.base.heads[''])

  @property
  def heads(self) -> dict:
    return {n: self.num_classes for n in self.names}

  @property
  def label_heads(self) -> dict:
    """The heads of the labels (the class names the evaluation reads): the base task's."""
    return self.base.heads

  def label_specs(self, batch_size: int) -> dict:
    return self.base.label_specs(batch_size)

  def build_model(self, model_config, backend=None):
    import vvt.models
    backbone = vvt.models.build(model_config, backend=backend)
    pooler = None
    if self.head == 'attentive':
      concat = len(self.layers) if self.combine == 'concat' else 1
      pooler = pooler_fields(backbone.spec, backend, num_queries=self.num_queries, depth=self.depth,
                             num_heads=self.num_heads, dim=backbone.spec.hidden_size * max(concat, 1))
    return probe_model(backbone, self.num_classes, len(self.settings), self.head, pooler, self.layers,
                       self.combine)

  def prepare(self, batch, inputs, rng):
    return self.base.prepare(batch, inputs, rng)

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    return dict(module.apply({'params': params}, inputs, train=False))  # no dropout in a frozen backbone

  def loss(self, outputs, targets):
    return sum(self.base.loss({'': outputs[n]}, targets) for n in self.names)

  @property
  def metric_names(self) -> tuple:
    return self.base.metric_names

  def train_metrics(self, outputs, labels) -> dict:
    """The base task's train metrics, averaged over the probes."""
    each = [self.base.train_metrics({'': outputs[n]}, labels) for n in self.names]
    return {k: sum(m[k] for m in each) / len(each) for k in self.metric_names}

  def scores(self, outputs) -> dict:
    return {n: self.base.scores({'': outputs[n]})[''] for n in self.names}

  def eval_labels(self, batch) -> dict:
    return self.base.eval_labels(batch)

  def aggregator(self, num_videos: int) -> 'ProbeAggregator':
    return ProbeAggregator(self, num_videos)

  @property
  def main_metric(self) -> str:
    return self.base.main_metric

  def probability_average(self, eval_average: str) -> str:
    return self.base.probability_average(eval_average)  # each probe is read as its base task

  def result_lines(self, result, files_prefix: str) -> list:
    """The winner of the grid: its lr, weight decay and main metric, the ties broken (`best_of`: the smaller lr,
    then the smaller weight decay), and the path of the table of every probe (`PREFIX_probes.csv`)."""
    best = next(r for r in result['probes'] if r['probe'] == result['best_probe'])
    key, tied = self.main_metric, result.get('tied_probes') or []
    tie = (f' (tied with {", ".join(tied)} on {key}: the smaller lr, then the smaller weight decay, wins)'
           if tied else '')
    return [f'[probe] best {best["probe"]}: lr {best["lr"]:g}, weight decay {best["weight_decay"]:g}, '
            f'{key} = {best[key]:.4f}{tie}; every probe: {files_prefix}_probes.csv']

  def param_labels(self, params) -> Any:
    """The optimiser partition of the params: 'frozen' for the backbone, the probe's name for its params."""
    return {k: (jax.tree.map(lambda _: 'frozen', v) if k != 'probes' else
                {n: jax.tree.map(lambda _, n=n: n, p) for n, p in v.items()}) for k, v in params.items()}

  def optimizer(self, make, optimizer, schedule) -> optax.GradientTransformation:
    """The backbone frozen (`optax.set_to_zero`: no state) and each probe its own optimiser: `make` (the run's
    optimiser builder, `vvt.train.optimizers.make_optimizer`) of the run's `optimizer` spec with the probe's
    weight decay, over the schedule scaled to its lr."""
    transforms = {'frozen': optax.set_to_zero()}
    for n, (lr, wd) in zip(self.names, self.settings, strict=True):
      transforms[n] = make(dataclasses.replace(optimizer, weight_decay=wd),
                           lambda step, s=lr / self.base_lr: schedule(step) * s)
    return optax.multi_transform(transforms, self.param_labels)


def best_of(table: list, key: str) -> tuple:
  """(the best probe of `table` (rows {probe, lr, weight_decay, key}), the other probes tied with it): the highest
  `key` (NaN counts lowest); among equal ones the smaller lr, then the smaller weight decay, then the first."""
  def score(row):
    value = float(row[key])
    return value if value == value else float('-inf')
  top = max(score(r) for r in table)
  tied = sorted((r for r in table if score(r) == top), key=lambda r: (r['lr'], r['weight_decay']))
  return tied[0]['probe'], tuple(r['probe'] for r in tied[1:])


class ProbeAggregator:
  """One base-task aggregator per probe (`vvt.tasks.base.Aggregator`); the results of the best probe (by the
  base task's main metric) with the table of all."""

  def __init__(self, task: Probe, num_videos: int):
    self.task, self.num_videos = task, int(num_videos)
    self.each = {n: task.base.aggregator(num_videos) for n in task.names}
    self.video_ids, self.average = None, 'logits'
    self._class_names = {'': None}

  @property
  def class_names(self) -> dict:
    return self._class_names

  @class_names.setter
  def class_names(self, names) -> None:
    names = dict(names or {})
    self._class_names = {'': next((v for v in names.values() if v), None)}

  def _first(self):
    return next(iter(self.each.values()))

  @property
  def skipped(self):
    return self._first().skipped

  @property
  def counts(self):
    return self._first().counts

  def add(self, scores, video_index, mask, labels) -> None:
    for n, agg in self.each.items():
      agg.add({'': scores[n]}, video_index, mask, labels)

  def skip(self, indices) -> None:
    for agg in self.each.values():
      agg.skip(indices)

  def _sync(self) -> None:
    for agg in self.each.values():
      agg.class_names, agg.video_ids, agg.average = self._class_names, self.video_ids, self.average

  def table(self) -> list:
    """[{probe, lr, weight_decay, <main metric>}] of every probe."""
    self._sync()
    key = self.task.main_metric
    return [dict(probe=n, lr=lr, weight_decay=wd, **{key: agg.result()[key]})
            for (n, agg), (lr, wd) in zip(self.each.items(), self.task.settings, strict=True)]

  def best(self) -> str:
    return best_of(self.table(), self.task.main_metric)[0]

  def result(self) -> dict:
    """The best probe's results, with `best_probe`, `tied_probes` (the others of its main metric) and `probes`."""
    table = self.table()
    best, tied = best_of(table, self.task.main_metric)
    res = dict(self.each[best].result())
    res.update(best_probe=best, tied_probes=list(tied), probes=table)
    return res

  def arrays(self) -> dict:
    self._sync()
    return self.each[self.best()].arrays()

  def report_files(self, prefix: str) -> list:
    """The best probe's files and P_probes.csv (probe, lr, weight decay, main metric)."""
    table = self.table()
    out = io.StringIO()
    w = csv.writer(out, lineterminator='\n')
    key = self.task.main_metric
    w.writerow(('probe', 'lr', 'weight_decay', key))
    w.writerows((r['probe'], r['lr'], r['weight_decay'], f'{r[key]:.6f}') for r in table)
    return self.each[self.best()].report_files(prefix) + [(f'{prefix}_probes.csv', out.getvalue())]


def from_config(run) -> Probe:
  """The probe task of a RunSpec `run`: its `task.probe` (a ProbeSpec: base, head, the grid of lrs and weight
  decays, the attentive pooler, backbone, layers, combine) and the base task, built from `run` as that task builds
  it. The config's validation checked the options (`vvt.tasks.probe_options.check`) before `run` was resolved."""
  p = run.task.probe
  base = importlib.import_module(registry.TASKS[p.base]).from_config(run)
  return Probe(base=base, settings=grid(p.lrs, p.weight_decays), head=p.head, num_queries=p.num_queries,
               depth=p.depth, num_heads=p.num_heads, base_lr=run.schedule.base_lr, backbone=p.backbone,
               layers=p.layers, combine=p.combine)
