"""The mae task's options (`task.mae`) and their checks: its `check` hook (`vvt.tasks.base.CheckOptions`).

Imports neither jax nor flax: `vvt.config.validation` calls `check` with the other checks of a run config.

  mask_ratio      the share of spatial positions masked in every temporal index (tube masking), in (0, 1);
                  VideoMAE's 0.9; with masking='random' the share of all the clip's tokens
  masking         'tube' (VideoMAE's) or 'random' (each token on its own: a masked patch may be seen in the
                  neighbouring frames; joint attention only, `vvt.tasks.masks`)
  decoder_depth   the decoder's blocks (>= 1); decoder_width its width (a multiple of decoder_heads)
  norm_pix_loss   the targets are each tubelet's pixels standardised per channel (VideoMAE's default) or raw
  eval_seed       the seed of the fixed masks an evaluation reconstructs under
  pictures        videos an evaluation draws as PNGs (original, masked input, reconstruction; 0: none)
"""
from __future__ import annotations

from typing import Any

from vvt.models import masking
from vvt.models import schemes
from vvt.tasks import base as base_lib

DECODER = 'decoder'  # the top-level params of the decoder (vvt.tasks.mae_model), beside the backbone's
INTS = {'decoder_depth': 1, 'decoder_width': 1, 'decoder_heads': 1, 'pictures': 0}
MASKINGS = ('tube', 'random')  # vvt.tasks.masks.KINDS (this module imports no JAX)


def _get(obj, name: str, default=None):
  """A field of a ConfigDict or of a spec (the RunSpec's sections have the config's fields)."""
  if hasattr(obj, 'get') and not hasattr(obj, '__dataclass_fields__'):
    return obj.get(name, default)
  return getattr(obj, name, default)


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def model_problem(model) -> str | None:
  """Why the model cannot be pretrained by masked reconstruction (one line naming model.attention), or None."""
  attention = _get(model, 'attention')
  try:
    scheme = schemes.get(attention)
  except ValueError:
    return None  # the model's own check names it
  if scheme.two_encoders and not scheme.temporal_over_positions:
    return (f'task.name=\'mae\': model.attention={attention!r} ({scheme.paper}) pools every frame to one token: '
            'no per-token output to reconstruct the masked tubelets from')
  why = masking.refusal(attention, _get(model, 'class_token'), _get(model, 'classifier'))
  return f'task.name=\'mae\': {why}' if why else None


def option_problems(options) -> list[str]:
  """The problems of `task.mae`'s own fields, one line each naming the field."""
  out = []
  ratio = _get(options, 'mask_ratio')
  if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 < ratio < 1.0:
    out.append(f'task.mae.mask_ratio must be in (0, 1), got {ratio!r}')
  for field, lowest in INTS.items():
    value = _get(options, field)
    if not _is_int(value) or value < lowest:
      out.append(f'task.mae.{field} must be an int >= {lowest}, got {value!r}')
  width, heads = _get(options, 'decoder_width'), _get(options, 'decoder_heads')
  if _is_int(width) and _is_int(heads) and heads > 0 and width % heads:
    out.append(f'task.mae.decoder_width={width} must be a multiple of task.mae.decoder_heads={heads}')
  if not isinstance(_get(options, 'norm_pix_loss'), bool):
    out.append(f'task.mae.norm_pix_loss must be True or False, got {_get(options, "norm_pix_loss")!r}')
  if not _is_int(_get(options, 'eval_seed')):
    out.append(f'task.mae.eval_seed must be an int, got {_get(options, "eval_seed")!r}')
  if masking_of(options) not in MASKINGS:
    out.append(f'task.mae.masking must be one of {", ".join(MASKINGS)}, got {_get(options, "masking")!r}')
  return out


def masking_of(options) -> str:
  """`task.mae.masking` of a section or spec ('tube' where a run's config predates the field)."""
  return _get(options, 'masking', 'tube')


def masking_problem(options, model) -> str | None:
  """Why `task.mae.masking='random'` cannot go with the model's scheme (one line), or None."""
  attention = _get(model, 'attention')
  if masking_of(options) != 'random':
    return None
  try:
    scheme = schemes.get(attention)
  except ValueError:
    return None  # the model's own check names it
  if scheme.two_encoders or masking.tube_only(scheme.stages):
    return (f"task.mae.masking='random' needs joint attention (any set of kept tokens): model.attention="
            f"{attention!r} ({scheme.paper}) runs space and time stages on a tube mask's layout")
  return None


def check(config: Any) -> list[str]:
  """`CheckOptions` of task.name='mae': the options of `task.mae` and the model's scheme (module docstring)."""
  options, model = _get(_get(config, 'task'), 'mae'), _get(config, 'model')
  problems = [model_problem(model), masking_problem(options, model)]
  return option_problems(options) + [p for p in problems if p]


def hf_pretraining_fields(config: Any) -> dict:
  """The `VideoMAEForPreTraining` config.json fields the run's options decide: `norm_pix_loss` (the targets its
  loss standardises per tubelet or not)."""
  value = _get(_get(_get(config, 'task'), 'mae'), 'norm_pix_loss')
  return {} if value is None else {'norm_pix_loss': bool(value)}


HOOKS = base_lib.ConfigHooks(check=check, reads_labels=False, hf_pretraining=True,
                             main_metric_goal='min', result_keys=('reconstruction_loss',),
                             hf_pretraining_fields=hf_pretraining_fields)
