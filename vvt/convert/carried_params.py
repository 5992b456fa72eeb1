"""A task's own params read from a vvt checkpoint where it has them: `vvt train --init` of a pretraining run
continues with the released decoder (task.name='mae') or predictor (task.name='jepa'), the task's `carried_params`.

  load(params, names, path, fmt) -> ({name: params}, [one line per name])

A part is loaded only whole: every tensor of the model's part present in the file with the model's shape (compared
per layer, whatever `scan_layers`); else it keeps the model's fresh initialisation and its line says why (none in
the checkpoint, or the first difference). An image checkpoint (init_from of an image ViT) has no such parts.
"""
from __future__ import annotations

import numpy as np

from vvt.convert import weight_files


def _difference(part: str, want: dict, have: dict) -> tuple[str, str]:
  """(the first difference of two flat {name: shape} dicts of `part`, the name of a tensor both have in other
  shapes or ''); ('', '') for none."""
  for name in sorted(want):
    if name not in have:
      return f'{part}/{name}: not in the checkpoint', ''
    if tuple(have[name]) != tuple(want[name]):
      return f'{part}/{name}: checkpoint {tuple(have[name])}, model {tuple(want[name])}', name
  extra = sorted(set(have) - set(want))
  return (f'{part}/{extra[0]}: not in the model' if extra else ''), ''


def load(params: dict, names, path: str, fmt: str, advice=None) -> tuple[dict, list[str]]:
  """({name: the file's params, in the model's layout} of the parts of `names` in `params` (fresh, the model's
  layout) that the vvt checkpoint `path` has whole, with the model's shapes; one line per name saying what was
  done). `fmt`: init_from.format (an image checkpoint carries nothing). `advice`: the task's `carried_advice`
  (name, checkpoint shape, model shape) -> what to set, which ends the line of a part left fresh for a shape."""
  from vvt.convert import export
  from vvt.convert import image_init
  from vvt.models import layout
  names = [n for n in names if n in params]
  if not names:
    return {}, []
  if not image_init.video_format(path, fmt):
    return {}, [f'{n}: freshly initialised (an image checkpoint has none)' for n in names]
  source, _ = export.from_safetensors(path)
  loaded, lines = {}, []
  for name in names:
    want = weight_files.flatten(layout.to_per_layer(params[name]))  # the file's layout
    have = weight_files.flatten(layout.to_per_layer(source.get(name) or {}))
    if not have:
      lines.append(f'{name}: freshly initialised (the checkpoint has none)')
      continue
    shapes = {k: np.shape(v) for k, v in want.items()}
    diff, key = _difference(name, shapes, {k: np.shape(v) for k, v in have.items()})
    if diff:
      hint = advice(f'{name}/{key}', tuple(np.shape(have[key])), tuple(shapes[key])) if key and advice else ''
      lines.append(f"{name}: freshly initialised (the checkpoint's differs from the task's: {diff})"
                   + (f'; {hint}' if hint else ''))
      continue
    flat = {k: np.asarray(v, np.asarray(want[k]).dtype) for k, v in have.items()}
    tree = weight_files.unflatten(flat)
    loaded[name] = layout.to_stacked(tree) if layout.layout_of(params[name]) == 'stacked' else tree
    lines.append(f'{name}: loaded from the checkpoint ({len(flat)} tensors)')
  return loaded, lines
