"""A command's output as the tests read it: its lines less any progress bar.

The tests run with the bars off (VVT_NO_PROGRESS=1, tests/conftest.py); this filter is the second guard, for a
bar that a library or a future command draws anyway. A tqdm bar redraws its line with '\\r' and its meter ends in
`[elapsed<remaining, rate]` (`[elapsed, rate]` without a total), where the rate is `2.10it/s`, `1.34s/batch`,
`?video/s`, ... depending on the machine's speed; what it writes last before it closes may be a bare `|####|`
or a line of spaces.
"""
import re

_TIME = r'(?:\d+:)?\d{1,2}:\d\d'
# the end of a tqdm meter: '[00:01<00:01,  1.34s/batch]', '[00:00, ?window/s]', '[1:02:03<?, 3.1kit/s, loss=2]'
_METER_END = re.compile(rf'\[{_TIME}(?:<(?:{_TIME}|\?))?, *[^\]]*/[^\]]*\]')
# a bar cut before its meter (the last redraw of a killed process, a narrow terminal): ' 50%|####', '|####   |'
_BAR = re.compile(r'(?:^|[\s:])\d{1,3}%\||^\|[^|]*\|$')


def without_progress(text: str) -> list:
  """The non-empty lines of `text`, stripped, less tqdm's: `text` is split at '\\n' and '\\r'; a meter is cut off
  the front of a piece that goes on after it (a line printed while a bar was drawn)."""
  out = []
  for piece in text.replace('\r', '\n').split('\n'):
    meters = list(_METER_END.finditer(piece))
    if meters:
      piece = piece[meters[-1].end():]
    elif _BAR.search(piece.strip()):
      continue
    piece = piece.strip()
    if piece:
      out.append(piece)
  return out
