"""The jepa task's options (`task.jepa`) and their checks: its `check` hook (`vvt.tasks.base.CheckOptions`).

Imports neither jax nor flax: `vvt.config.validation` calls `check` with the other checks of a run config, so a bad
option is one line of the config's one-run list of problems, before any heavy import. Defaults (the schema's) are
V-JEPA's ViT-L/16 pretraining config (facebookresearch/jepa `configs/pretrain/vitl16.yaml`):

  pred_depth, pred_width, pred_heads   the predictor: 12 blocks of width 384 (`model.pred_depth`,
                                       `pred_embed_dim`), 12 heads (its `vit_predictor`'s default)
  pred_mlp_ratio                       its MLP width over its width (4.0)
  mask_sets                            ((num_blocks, spatial scale), ...): ((8, 0.15), (2, 0.7)) (`mask:`)
  aspect_ratio                         (low, high) of every block's h / w: (0.75, 1.5)
  momentum                             (start, end) of the target encoder's EMA momentum: (0.998, 1.0) (`ema`)
  momentum_scale                       the ramp spans num_train_steps x this (1.25: `ipe_scale`, so the momentum
                                       ends at 0.998 + 0.002 / 1.25 = 0.9996)
  loss_exp                             the loss is mean(|z - h| ^ loss_exp) / loss_exp (1.0: L1; `loss_exp`)
  eval_mask_seed                       the seed of an evaluation's masks (the same masks at every evaluation)
"""
from __future__ import annotations

from typing import Any

from vvt.tasks import base as base_lib

PREDICTOR = 'predictor'  # the top-level params of the predictor (vvt.models.predictor), beside the backbone's
INTS = {'pred_depth': 1, 'pred_width': 1, 'pred_heads': 1, 'eval_mask_seed': 0}  # field: lowest value


def _get(obj, name: str, default=None):
  """A field of a ConfigDict or of a spec (the RunSpec's sections have the config's fields)."""
  if hasattr(obj, 'get') and not hasattr(obj, '__dataclass_fields__'):
    return obj.get(name, default)
  return getattr(obj, name, default)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _pair(path: str, value, lo: float, hi: float) -> list[str]:
  """The problems of a (low, high) pair within [lo, hi], low <= high."""
  if isinstance(value, str) or not isinstance(value, (tuple, list)) or len(value) != 2 \
      or not all(_is_number(v) for v in value):
    return [f'{path} must be a (low, high) pair of numbers, got {value!r}']
  if not (lo <= value[0] <= value[1] <= hi):
    return [f'{path} must satisfy {lo:g} <= low <= high <= {hi:g}, got {tuple(value)!r}']
  return []


def _mask_sets(sets) -> list[str]:
  path = 'task.jepa.mask_sets'
  if isinstance(sets, str) or not isinstance(sets, (tuple, list)) or not sets:
    return [f'{path} must be a non-empty tuple of (num_blocks, spatial scale) pairs, got {sets!r}']
  out = []
  for i, s in enumerate(sets):
    ok = isinstance(s, (tuple, list)) and len(s) == 2 and isinstance(s[0], int) and not isinstance(s[0], bool) \
        and _is_number(s[1])
    if not ok or s[0] < 1 or not 0 < s[1] <= 1:
      out.append(f'{path}[{i}] must be (num_blocks >= 1, 0 < spatial scale <= 1), got {s!r}')
  return out


def _options(j) -> list[str]:
  out = []
  for field, lowest in INTS.items():
    v = _get(j, field)
    if not isinstance(v, int) or isinstance(v, bool) or v < lowest:
      out.append(f'task.jepa.{field} must be an integer >= {lowest}, got {v!r}')
  width, heads = _get(j, 'pred_width'), _get(j, 'pred_heads')
  if not out and width % heads:
    out.append(f'task.jepa.pred_width={width} is not divisible by task.jepa.pred_heads={heads}')
  for field in ('pred_mlp_ratio', 'momentum_scale', 'loss_exp'):
    v = _get(j, field)
    if not _is_number(v) or v <= 0:
      out.append(f'task.jepa.{field} must be a number > 0, got {v!r}')
  out += _mask_sets(_get(j, 'mask_sets'))
  out += _pair('task.jepa.aspect_ratio', _get(j, 'aspect_ratio'), 1e-3, 1e3)
  out += _pair('task.jepa.momentum', _get(j, 'momentum'), 0.0, 1.0)
  return out


def check(config: Any) -> list[str]:
  """The problems of `config`'s jepa options (`task.jepa`) and of its model (an encoder that can drop tokens),
  one line each naming the field."""
  from vvt.models import masking
  out = _options(_get(config.task, 'jepa'))
  model = config.model
  why = masking.refusal(model.attention, _get(model, 'class_token'), _get(model, 'classifier'))
  if why:
    out.append(f'task.name=\'jepa\' runs the context encoder on the context tokens only: {why}')
  return out


def start_problems(config: Any) -> list[str]:
  """A training run's length in steps: the target encoder's momentum ramps over `num_train_steps`."""
  steps = _get(config, 'num_train_steps')
  if not isinstance(steps, int) or steps <= 0:
    return [f'num_train_steps must be set (> 0) for task.name=\'jepa\': the target encoder\'s momentum ramps '
            f'over the run\'s steps (task.jepa.momentum), got {steps!r}']
  return []


HOOKS = base_lib.ConfigHooks(check=check, start_problems=start_problems, reads_labels=False, hf_pretraining=True,
                             main_metric_goal='min', result_keys=())
