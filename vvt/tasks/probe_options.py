"""The probe task's options (`task.probe`) and their checks: its `check` hook (`vvt.tasks.base.CheckOptions`).

Imports neither jax nor flax: `vvt.config.validation` calls `check` with the other checks of a run config, so a
bad probe option is one line of the config's one-run list of problems, before any heavy import. `vvt.tasks.probe`
builds the task from the same options (`grid`).

  base           'classification' | 'multilabel': the task the probes are trained and judged by
  head           'linear' | 'attentive'
  lrs            the probes' learning rates: positive numbers (at least one)
  weight_decays  their weight decays: numbers >= 0 (at least one); the grid is every lr with every weight decay
  num_queries, depth, num_heads   the attentive probe's pooler: >= 1, >= 0, >= 1
  layers         the backbone's layers the probes read (ints, negative from the last; () : its own features)
  combine        'mean' | 'concat': the layers' tokens averaged, or concatenated along D
  backbone       the frozen backbone's weights (`vvt.config.validation` checks it with the files a run starts
                 from: `backbone_problem`)
"""
from __future__ import annotations

import itertools
from typing import Any

from vvt.models import outputs
from vvt.tasks import base as base_lib

HEADS = ('linear', 'attentive')
BASES = ('classification', 'multilabel')
# The attentive pooler's integer fields: (lowest value, what it is).
POOLER = {'num_queries': (1, 'learned query tokens'), 'depth': (0, 'self-attention blocks'),
          'num_heads': (1, 'attention heads')}
SOURCES = ('a vvt run or converted folder, a `vvt export` .safetensors file or a Hugging Face model folder')


def grid(lrs, weight_decays) -> tuple:
  """((lr, weight decay), ...): every learning rate with every weight decay, lr-major."""
  return tuple((float(lr), float(wd)) for lr, wd in itertools.product(lrs, weight_decays))


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _get(section, name: str, default=None):
  """A field of a run config's section (a ConfigDict, or its JSON values as config.json holds them); `default`
  where the section or the field is absent. These hooks read the config before it is resolved."""
  return default if section is None else section.get(name, default)


def _values(field: str, values, lowest: float, strict: bool, what: str) -> list[str]:
  """The problems of the grid field `field` (`values`: a tuple of numbers, each > or >= `lowest`)."""
  path = f'task.probe.{field}'
  if isinstance(values, str) or not isinstance(values, (tuple, list)):
    return [f'{path} must be a tuple of {what}s, got {values!r}']
  if not values:
    return [f'{path} is empty: the grid of probes needs at least one {what}']
  bound = f'> {lowest:g}' if strict else f'>= {lowest:g}'
  return [f'{path}[{i}] must be a number {bound} (a {what}), got {v!r}' for i, v in enumerate(values)
          if not _is_number(v) or (v <= lowest if strict else v < lowest)]


def option_problems(probe) -> list[str]:
  """The problems of the `task.probe` section `probe` on its own: choices, the grid, the attentive pooler."""
  out = []
  base, head = _get(probe, 'base'), _get(probe, 'head')
  if base not in BASES:
    out.append(f'task.probe.base must be one of {", ".join(map(repr, BASES))}, got {base!r}')
  if head not in HEADS:
    out.append(f'task.probe.head must be one of {", ".join(map(repr, HEADS))}, got {head!r}')
  out += _values('lrs', _get(probe, 'lrs'), 0, True, 'learning rate')
  out += _values('weight_decays', _get(probe, 'weight_decays'), 0, False, 'weight decay')
  for field, (lowest, what) in POOLER.items():
    value = _get(probe, field)
    if head == 'attentive' and _is_int(value) and value < lowest:
      out.append(f'task.probe.{field} must be >= {lowest} for an attentive probe (its {what}), got {value}')
  return out


def layer_problems(probe, model) -> list[str]:
  """The problems of `task.probe.layers` (layers of the backbone `model`, where its size is known) and `combine`."""
  out = []
  combine = _get(probe, 'combine', 'mean')
  if combine not in outputs.COMBINE:
    out.append(f'task.probe.combine must be one of {", ".join(map(repr, outputs.COMBINE))}, got {combine!r}')
  layers = _get(probe, 'layers', ())
  try:
    count = outputs.num_layers(model)
  except (AttributeError, KeyError, TypeError, ValueError):  # the model's own checks report its fields
    count = None
  return out + outputs.check_layers('task.probe.layers', layers, count)


def check(config: Any) -> list[str]:
  """The probe task's `check` hook (`vvt.tasks.base.CheckOptions`): `option_problems` of `task.probe` and the run's
  fields a probe run constrains (one classifier head, no layer-wise lr decay)."""
  probe = _get(_get(config, 'task'), 'probe')
  out = option_problems(probe)
  nc = _get(config, 'num_classes')
  nc = _get(_get(config, 'model'), 'num_classes') if nc is None else nc
  if hasattr(nc, 'items'):
    out.append(f'num_classes: the probes have one classifier head: set num_classes to an int, got {dict(nc)}')
  out += layer_problems(probe, _get(config, 'model'))
  decay = _get(_get(config, 'optimizer'), 'layer_decay')
  if _is_number(decay) and 0 < decay < 1:
    out.append(f'optimizer.layer_decay={decay}: a probe run trains no backbone layer: leave it at 1')
  return out


def backbone_problem(config: Any) -> str | None:
  """The problem of a probe run to train with neither `task.probe.backbone` nor `init_from`: its probes would read
  the features of a random backbone. None where it has one."""
  if _get(_get(_get(config, 'task'), 'probe'), 'backbone') or _get(config, 'init_from') is not None:
    return None
  return ('task.probe.backbone is not set: the probes would read the features of a randomly initialised backbone; '
          f'set it to the backbone\'s weights ({SOURCES}), or give `vvt train --init CHECKPOINT`')


def multi_hot_labels(config: Any) -> bool:
  """The probes read the labels of their base task: multi-hot for task.probe.base='multilabel'."""
  return _get(_get(_get(config, 'task'), 'probe'), 'base') == 'multilabel'


def summary_note(config: Any) -> str:
  """What a probe run's model summary leaves out: its figures are the frozen backbone's."""
  p = _get(_get(config, 'task'), 'probe')
  n = len(_get(p, 'lrs')) * len(_get(p, 'weight_decays'))
  return (f'task probe: the figures above are the frozen backbone\'s; {n} {_get(p, "head")} probe(s) '
          f'({_get(p, "base")}) train on its features and are not counted')


def start_problems(config: Any) -> list[str]:
  """A probe run needs a backbone to start from (`backbone_problem`)."""
  problem = backbone_problem(config)
  return [problem] if problem else []


HOOKS = base_lib.ConfigHooks(check=check, multi_hot_labels=multi_hot_labels, summary_note=summary_note,
                             start_problems=start_problems, backbone_field='task.probe.backbone',
                             best_of_grid=True)
