"""Progress bars, for every package: one factory (`bar`) and one switch that turns them all off.

Long work (evaluation batches, predicted videos, windows of a long video, converted videos) shows a tqdm bar on
stderr. `vvt COMMAND --no-progress` (every command takes it) or the environment variable `VVT_NO_PROGRESS=1`
turns every bar off; the flag sets the variable, so the processes a command starts (a sweep's trials) inherit it.
A bar's rates and ETA depend on the machine's speed: logs meant to be compared, and the tests, run without them.
"""
from __future__ import annotations

import os
from typing import Optional

ENV = 'VVT_NO_PROGRESS'
_OFF_VALUES = ('', '0', 'false', 'no', 'off')


def enabled() -> bool:
  """False when VVT_NO_PROGRESS is set to a true value (anything but '', 0, false, no, off)."""
  return os.environ.get(ENV, '').strip().lower() in _OFF_VALUES


def disable() -> None:
  """Turns the bars off in this process and in the processes it starts from now on."""
  os.environ[ENV] = '1'


def bar(total: Optional[int] = None, desc: Optional[str] = None, unit: str = 'it', *, disable: bool = False,
        **kwargs):
  """A tqdm bar on stderr (`tqdm` keyword arguments pass through); a no-op bar (same methods) when `disable` or
  when the bars are switched off (`enabled()`)."""
  from tqdm import tqdm
  return tqdm(total=total, desc=desc, unit=unit, disable=bool(disable) or not enabled(), **kwargs)
