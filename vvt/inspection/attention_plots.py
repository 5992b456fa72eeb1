"""Pictures of attention maps (`vvt.inspection.attention_maps.Maps`) over the frames of one clip.

  grid_png(frames, maps, path)     rows: frames; columns: the frame, each stage of each layer (attention
                                   received per patch, heads averaged), the final map (class token / rollout)
  heads_png(frames, maps, path)    rows: frames; columns: the heads of the last layer's stages
  frames_png(maps, path)           the temporal part: frame-to-frame attention (query frame -> key frame) of
                                   every stage, heads averaged (integer ticks, a colour bar per stage)
  gif(frames, maps, path)          the final map overlaid on the frames, animated

One colour scale per column (the column's maximum), so a column shows which frames as well as where.
"""
from __future__ import annotations

import numpy as np

from vvt.inspection import attention_maps as am


def _pyplot():
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  return plt


def _pixel(m, maps, size):
  """(T, nh, nw) -> (F, H, W) per-frame map, size = (H, W), scaled to [0, 1] by its maximum."""
  up = am.upsample(np.asarray(m), maps.tubelet_t, size)
  return up / max(float(up.max()), 1e-12)


def overlay(frame, heat, alpha=0.55, cmap='jet'):
  """uint8 (H, W, 3) frame blended with a [0, 1] heat map (H, W) -> uint8 (H, W, 3)."""
  import matplotlib
  colour = matplotlib.colormaps[cmap](heat)[..., :3] * 255
  return np.clip((1 - alpha) * frame.astype(np.float32) + alpha * colour, 0, 255).astype(np.uint8)


def _panel_grid(frames, columns, path, title):
  """columns: [(name, (F, S, S) heat or None for the frame itself)]."""
  plt = _pyplot()
  f = frames.shape[0]
  fig, axes = plt.subplots(f, len(columns), figsize=(1.3 * len(columns) + 0.4, 1.3 * f + 0.6), squeeze=False)
  for j, (name, heat) in enumerate(columns):
    for i in range(f):
      ax = axes[i, j]
      ax.imshow(frames[i] if heat is None else overlay(frames[i], heat[i]), interpolation='nearest')
      ax.set_xticks([])
      ax.set_yticks([])
      if i == 0:
        ax.set_title(name, fontsize=7)
      if j == 0:
        ax.set_ylabel(f'frame {i}', fontsize=7)
  fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def grid_png(frames, maps: am.Maps, path: str, example: int = 0) -> None:
  """PNG: frames x (frame, every stage of every layer, final map)."""
  size = frames.shape[1:3]
  cols = [('frame', None)]
  for name, m in maps.per_stage.items():
    cols.append((name, _pixel(m[example].mean(axis=0), maps, size)))
  cols.append((f'{maps.kind.replace("_", " ")}', _pixel(maps.final[example], maps, size)))
  _panel_grid(frames, cols, path, f'{maps.scheme}: attention received per patch, by layer and stage')


def heads_png(frames, maps: am.Maps, path: str, example: int = 0) -> None:
  """PNG: frames x (frame, every head of the last layer's stages)."""
  size = frames.shape[1:3]
  last = max(s.layer for s in maps.stages if s.encoder == maps.stages[-1].encoder)
  cols = [('frame', None)]
  for st in maps.stages:
    if st.encoder != maps.stages[-1].encoder or st.layer != last or st.name not in maps.per_stage:
      continue
    m = maps.per_stage[st.name][example]
    for h in range(m.shape[0]):
      cols.append((f'{st.stage} h{h} ({st.head_stages[h]})' if st.stage == 'factorised_dot_product'
                   else f'{st.stage} head {h}', _pixel(m[h], maps, size)))
  _panel_grid(frames, cols, path, f'{maps.scheme}: last layer, per head')


def frames_figure(maps: am.Maps, example: int = 0):
  """The figure of `frames_png`: one panel per stage, integer ticks (temporal indices), each with its colour bar."""
  plt = _pyplot()
  from matplotlib import ticker
  items = list(maps.frames.items())
  fig, axes = plt.subplots(1, len(items), figsize=(2.4 * len(items) + 0.4, 2.5), squeeze=False)
  for ax, (name, m) in zip(axes[0], items, strict=True):
    image = ax.imshow(m[example].mean(axis=0), vmin=0, vmax=1, cmap='viridis')
    ax.set_title(name, fontsize=7)
    ax.set_xlabel('key index', fontsize=7)
    ax.set_ylabel('query index', fontsize=7)
    for axis in (ax.xaxis, ax.yaxis):
      axis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.tick_params(labelsize=6)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.ax.tick_params(labelsize=6)
    bar.set_label('attention (heads averaged)', fontsize=6)
  fig.suptitle(f'{maps.scheme}: which temporal indices a token attends to', fontsize=9)
  fig.tight_layout()
  return fig


def frames_png(maps: am.Maps, path: str, example: int = 0) -> None:
  """PNG: the frame-to-frame attention (temporal part) of every stage, heads averaged (`frames_figure`)."""
  fig = frames_figure(maps, example)
  fig.savefig(path, dpi=110)
  _pyplot().close(fig)


def gif(frames, maps: am.Maps, path: str, example: int = 0, scale: int = 4, duration_ms: int = 250) -> None:
  """Animated GIF: the frame and the final map overlaid, side by side, `scale` x larger."""
  from PIL import Image
  heat = _pixel(maps.final[example], maps, frames.shape[1:3])
  images = []
  for i in range(frames.shape[0]):
    pair = np.concatenate([frames[i], overlay(frames[i], heat[i])], axis=1)
    pair = np.repeat(np.repeat(pair, scale, axis=0), scale, axis=1)
    images.append(Image.fromarray(pair))
  images[0].save(path, save_all=True, append_images=images[1:], duration=duration_ms, loop=0)
