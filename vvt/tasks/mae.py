"""Masked autoencoding (VideoMAE, Tong et al. 2022): task.name='mae', options `task.mae` (vvt/tasks/mae_options.py).

  prepare        a tube mask per clip from the step's rng (`vvt.tasks.masks.tube_mask`, or `random_mask` with
                 `task.mae.masking='random'`; resume-exact): the model's inputs are {'video', 'kept', 'masked'}; no
                 labels are read
  outputs        the decoder's predictions of the masked tubelets (B, M, P) and their targets: each masked
                 tubelet's pixels, standardised per channel with `norm_pix_loss` (`vvt.tasks.mae_model`)
  loss           the mean squared error over the masked tubelets only, per example (B,)
  evaluation     the same loss under fixed masks (`task.mae.eval_seed`), averaged per video over its views
                 (`reconstruction_loss`, lower is better); P_reconstruction_<video>.png for the first
                 `task.mae.pictures` videos: original, masked input and reconstruction, frame by frame

The targets are the model's input pixels (after `dataset.normalization`): with `norm_pix_loss` each tubelet is
standardised anyway, as VideoMAE's unnormalised-then-standardised ones are up to its 1e-6.
"""
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from vvt.tasks import eval_report
from vvt.tasks import mae_model
from vvt.tasks import mae_options
from vvt.tasks import masks
from vvt.tasks import video_views
from vvt.tasks.base import Task


@dataclasses.dataclass(frozen=True)
class Mae(Task):
  """See the module docstring."""
  decoder: mae_model.DecoderSpec
  mask_ratio: float
  norm_pix_loss: bool
  grid: tuple            # the model's token grid (n_t, n_h, n_w)
  tubelet: tuple         # (t, h, w)
  eval_seed: int = 0
  pictures: int = 2
  masking: str = 'tube'  # or 'random' (vvt.tasks.masks.KINDS)
  name = 'mae'
  own_params = ('decoder',)
  carried_params = ('decoder',)  # a VideoMAEForPreTraining's decoder continues its pretraining (`--init`)

  @property
  def heads(self) -> dict:
    return {}

  def label_specs(self, batch_size: int) -> dict:
    return {}

  def build_model(self, model_config, backend=None):
    import vvt.models
    return mae_model.mae_model(vvt.models.build(model_config, backend=backend), self.decoder)

  def prepare(self, batch, inputs, rng):
    kept, masked = masks.draw(self.masking, rng, inputs.shape[0], self.grid, self.mask_ratio)
    return {'video': inputs, 'kept': kept, 'masked': masked}, {}, {}

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    if not isinstance(inputs, dict):  # evaluation: the fixed masks of eval_seed
      kept, masked = masks.draw(self.masking, jax.random.key(self.eval_seed), inputs.shape[0], self.grid,
                                self.mask_ratio)
      inputs = {'video': inputs, 'kept': kept, 'masked': masked}
    rngs = {'dropout': rng} if train else None
    pred = module.apply({'params': params}, inputs['video'], train=train, kept=inputs['kept'],
                        masked=inputs['masked'], rngs=rngs)
    tubelets = mae_model.patches(inputs['video'], self.tubelet)
    target = jnp.take_along_axis(tubelets, inputs['masked'][..., None], axis=1)  # the masked tubelets only
    if self.norm_pix_loss:
      target = mae_model.normalised(target)
    return {'pred': pred, 'target': target, 'inputs': inputs}

  def loss(self, outputs, targets):
    return jnp.mean(jnp.square(outputs['pred'] - outputs['target'].astype(jnp.float32)), axis=(1, 2))

  def scores(self, outputs) -> dict:
    out = {'loss': self.loss(outputs, {})[:, None]}
    if self.pictures:
      out.update(self._pictures(outputs))
    return out

  def _pictures(self, outputs) -> dict:
    """The first rows' original, masked input and reconstruction (P, T, H, W, 3) of the model's input pixels."""
    n = min(self.pictures, outputs['pred'].shape[0])
    inputs = {k: v[:n] for k, v in outputs['inputs'].items()}
    video, masked, pred = inputs['video'].astype(jnp.float32), inputs['masked'], outputs['pred'][:n]
    tubelets = mae_model.patches(video, self.tubelet)
    if self.norm_pix_loss:
      pred = unnormalise(pred, jnp.take_along_axis(tubelets, masked[..., None], axis=1))
    rows = jnp.arange(n)[:, None]
    blank = tubelets.at[rows, masked].set(jnp.nan)
    shape, tub = video.shape, self.tubelet
    return {'original': video, 'masked_input': unpatch(blank, shape, tub),
            'reconstruction': unpatch(tubelets.at[rows, masked].set(pred), shape, tub)}

  def eval_labels(self, batch) -> dict:
    return {}

  def aggregator(self, num_videos: int) -> 'ReconstructionAggregator':
    return ReconstructionAggregator(num_videos, self.pictures)

  @property
  def main_metric(self) -> str:
    return 'reconstruction_loss'


def unnormalise(pred, target_pixels, channels: int = 3, eps: float = 1e-6):
  """Predictions of standardised tubelets (B, M, P) back to pixels, with the mean and std of the true tubelets."""
  b, m, p = pred.shape
  x = target_pixels.reshape(b, m, p // channels, channels)
  mean, std = x.mean(axis=2, keepdims=True), jnp.sqrt(x.var(axis=2, keepdims=True, ddof=1))
  return (pred.reshape(b, m, p // channels, channels) * (std + eps) + mean).reshape(b, m, p)


def unpatch(tubelets, shape, tubelet):
  """Inverse of `mae_model.patches`: (B, n_t * N, t * h * w * C) -> (B, T, H, W, C) of `shape`."""
  b, tt, hh, ww, c = shape
  t, h, w = tubelet
  x = tubelets.reshape(b, tt // t, hh // h, ww // w, t, h, w, c).transpose(0, 1, 4, 2, 5, 3, 6, 7)
  return x.reshape(shape)


class ReconstructionAggregator(video_views.VideoViews):
  """The reconstruction loss of every view, averaged per video, then over the videos; the pictures of the first
  `pictures` videos (their first valid view)."""

  def __init__(self, num_videos: int, pictures: int = 0):
    super().__init__({}, num_videos)
    self.sums = np.zeros((self.num_videos,), np.float64)
    self.pictures, self.drawn = int(pictures), {}

  def add(self, scores, video_index, mask, labels) -> None:
    got = self._valid_views(video_index, mask)
    if got is None:
      return
    valid, vi = got
    np.add.at(self.sums, vi, np.asarray(scores['loss'], np.float64)[valid, 0])
    self._count_views(vi)
    for row in np.flatnonzero(valid)[:len(scores.get('original', ()))]:
      v = int(np.asarray(video_index)[row])
      if v < self.pictures and v not in self.drawn:
        self.drawn[v] = tuple(np.asarray(scores[k][row]) for k in ('original', 'masked_input', 'reconstruction'))

  def video_loss(self) -> np.ndarray:
    return self.sums / np.maximum(self.counts, 1)

  def result(self) -> dict:
    keep = self._kept()
    return {'reconstruction_loss': float(self.video_loss()[keep].mean()), **self._view_stats(keep)}

  def arrays(self) -> dict:
    return {'video_loss': self.video_loss().astype(np.float32), 'views': self.counts}

  def report_files(self, prefix: str) -> list:
    ids = self._id_list()
    return [(f'{prefix}_reconstruction_{v}.png', functools.partial(reconstruction_png, rows=rows, title=ids[v]))
            for v, rows in sorted(self.drawn.items())]


def reconstruction_png(path_or_file, rows, title: str) -> None:
  """Original, masked input (masked tubelets grey) and reconstruction (3 rows), frame by frame (columns), each
  video's pixels scaled to [0, 1] by the original's range."""
  original = rows[0]
  lo, hi = float(np.nanmin(original)), float(np.nanmax(original))
  frames = original.shape[0]
  fig, axes = eval_report.new_figure((1.6 * frames, 5.0))
  fig.clf()
  grid = fig.subplots(3, frames, squeeze=False)
  for r, (name, video) in enumerate(zip(('original', 'masked', 'reconstruction'), rows, strict=True)):
    shown = np.clip((np.nan_to_num(video, nan=(lo + hi) / 2) - lo) / max(hi - lo, 1e-6), 0, 1)
    for t in range(frames):
      ax = grid[r, t]
      ax.imshow(shown[t])
      ax.set_xticks([])
      ax.set_yticks([])
      if t == 0:
        ax.set_ylabel(name)
  eval_report.save_png(fig, grid[0, 0], path_or_file, title)


def from_config(config) -> Mae:
  """The mae task of a RunSpec or a run config (`task.mae`, the model's grid and tubelet). ValueError: the problems
  of its options (`vvt.tasks.mae_options.check`, which the config's validation reports first), one line each."""
  problems = mae_options.check(config)
  if problems:
    raise ValueError('\n'.join(problems))
  model = config.model
  if not hasattr(model, 'grid'):
    import vvt.models
    from vvt.models import spec as spec_lib
    model = spec_lib.spec_of(vvt.models.resolve(model))
  o = config.task.mae
  t, h, w = model.tubelet
  decoder = mae_model.DecoderSpec(depth=int(o.decoder_depth), width=int(o.decoder_width),
                                  num_heads=int(o.decoder_heads), patch_dim=t * h * w * 3)
  return Mae(decoder=decoder, mask_ratio=float(o.mask_ratio), norm_pix_loss=bool(o.norm_pix_loss),
             grid=tuple(model.grid), tubelet=tuple(model.tubelet), eval_seed=int(o.eval_seed),
             pictures=int(o.pictures), masking=str(o.masking))
