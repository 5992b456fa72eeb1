"""A checkpoint evaluated at another clip length or frame size than it was written for.

`vvt eval --workdir DIR --config.num_frames=16` (or `--config.image_size=...`) on a checkpoint whose position
tables have other sizes: the step's params are read at their own shapes, their tables resized as the model's
reference does (`vvt.convert.retarget`: TimeSformer nearest, ViViT bicubic, nothing for sinusoidal / RoPE /
run-time tables), then placed on the evaluation's shardings. The model attends over the whole new clip.
"""
from __future__ import annotations

from typing import Callable, Optional

import jax

from vvt.train import checkpoints


def stored_model(workdir: str, step: int) -> Optional[dict]:
  """The model section of the config step `step` was written with (None without one)."""
  saved = checkpoints.read_meta(workdir, step).get('config')  # the config's JSON, as written beside the step
  model = saved.get('model') if isinstance(saved, dict) else None
  return model if isinstance(model, dict) else None


def clip_change(stored: Optional[dict], model) -> Optional[tuple]:
  """((frames, (H, W)) stored, (frames, (H, W)) of the ModelSpec `model`) when the same architecture runs at another
  clip length or frame size; None when nothing differs (or the stored config does not say)."""
  if not stored or any(stored.get(f) not in (None, getattr(model, f)) for f in ('family', 'attention')):
    return None
  from vvt.models import frame_size
  if stored.get('num_frames') is None or stored.get('image_size') is None:
    return None
  old = (stored['num_frames'], frame_size.parse(stored['image_size']))
  new = (model.num_frames, frame_size.parse(model.image_size))
  return (old, new) if old != new else None


def load_eval_params(workdir: str, step: int, abstract_params, model, raw: bool = False,
                     log: Callable = print):
  """`checkpoints.load_eval_params` -> (params, weights) for `model` (a run's ModelSpec), its position tables
  resized first where the step was written for another clip length or frame size."""
  from vvt.convert import retarget
  import vvt.models
  from vvt.models import frame_size
  from vvt.models import layout
  stored = stored_model(workdir, step)
  change = clip_change(stored, model)
  if change is None:
    params, _, weights = checkpoints.load_eval_params(workdir, step, abstract_params, raw=raw, verify=False)
    return params, weights
  params, _, weights = checkpoints.load_eval_params(workdir, step, None, raw=raw, verify=False)
  source = vvt.models.resolve(vvt.models.get_config(**stored))
  params = jax.tree.map(lambda x: x, layout.to_per_layer(jax.device_get(params)))
  params, _, notes = retarget.retarget(params, source, model.num_frames, model.image_size)
  params = layout.to_model_layout(params, model)
  (frames0, size0), (frames1, size1) = change
  how = '; '.join(f'{name} {how}' for name, how in notes) or 'no position table to resize'
  log(f'[eval] checkpoint written for {frames0} frames of {frame_size.label(size0)}px, run at {frames1} frames of '
      f'{frame_size.label(size1)}px: {how}')
  shardings = jax.tree.map(lambda a: a.sharding, abstract_params)
  return jax.device_put(params, shardings), weights
