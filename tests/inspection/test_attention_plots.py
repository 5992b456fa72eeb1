"""The frame-to-frame attention figure: integer ticks (temporal indices) and a colour bar per stage."""
import numpy as np

from vvt.inspection import attention_maps as am
from vvt.inspection import attention_plots


def _maps(t):
  rng = np.random.default_rng(0)
  frames = {}
  for name in ('time', 'space_time'):
    m = rng.random((1, 2, t, t))
    frames[name] = m / m.sum(-1, keepdims=True)
  return am.Maps(scheme='divided', kind='rollout', grid=(t, 2, 2), tubelet_t=1, final=np.zeros((1, t, 2, 2)),
                 per_stage={}, frames=frames, stages=list(frames))


def test_the_frames_figure_has_integer_ticks_and_colour_bars(tmp_path):
  for t in (3, 8, 16):  # few indices (where matplotlib would put half-integer ticks) and many
    fig = attention_plots.frames_figure(_maps(t))
    panels = [ax for ax in fig.axes if ax.get_xlabel() == 'key index']
    bars = [ax for ax in fig.axes if ax.get_ylabel() == 'attention (heads averaged)']
    assert len(panels) == 2 and len(bars) == 2
    for ax in panels:
      for ticks in (ax.get_xticks(), ax.get_yticks()):
        inside = [v for v in ticks if -0.5 <= v <= t - 0.5]
        assert len(inside) >= 2 and all(float(v).is_integer() for v in inside), (t, ticks)
  attention_plots.frames_png(_maps(4), str(tmp_path / 'frames.png'))
  assert (tmp_path / 'frames.png').stat().st_size > 1000
