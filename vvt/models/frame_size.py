"""The frame size of a clip: a config's `image_size` is an int (square frames, S x S) or a pair (H, W).

`parse` is the one place that reads either form: the specs (`ModelSpec`, `DataSpec`, `RunSpec`) hold `(H, W)`, so
code past them never asks which form a config used. `config_value` writes a size back as a config holds it (an
int where the frames are square, so a square run's config.json and checkpoint metadata are as they always were);
`label` names it in messages and file names ('224' or '48x40'). No JAX here: the config checks import it.
"""
from __future__ import annotations

SQUARE_OR_PAIR = 'a positive int (square frames) or a pair (H, W) of positive ints'


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def problem(value, name: str = 'image_size') -> str | None:
  """One line naming `name` if `value` is neither a positive int nor a pair of them, else None."""
  if _is_int(value) and value > 0:
    return None
  if isinstance(value, (tuple, list)) and len(value) == 2 and all(_is_int(v) and v > 0 for v in value):
    return None
  return f'{name} must be {SQUARE_OR_PAIR}, got {value!r}'


def parse(value, name: str = 'image_size') -> tuple[int, int]:
  """(H, W) of an int S (S, S) or a pair (H, W); ValueError naming `name` for anything else."""
  line = problem(value, name)
  if line:
    raise ValueError(line)
  return (int(value), int(value)) if _is_int(value) else (int(value[0]), int(value[1]))


def from_text(text: str, name: str = '--image-size') -> int | tuple[int, int]:
  """A size written on a command line, 'S', 'H,W', 'HxW' or '(H, W)' -> as a config holds it (`config_value`);
  ValueError naming `name` for anything else."""
  parts = [p.strip() for p in str(text).strip().strip('()[]').replace('x', ',').split(',')]
  try:
    values = [int(p) for p in parts]
  except ValueError:
    values = None
  if not values or len(values) > 2 or min(values) < 1:
    raise ValueError(f'{name} must be a positive int S (square frames) or H,W (e.g. 48,40), got {text!r}')
  return config_value(values[0] if len(values) == 1 else tuple(values))


def config_value(size) -> int | tuple[int, int]:
  """A size as a config holds it: S for square frames, else the tuple (H, W)."""
  h, w = parse(size)
  return h if h == w else (h, w)


def label(size) -> str:
  """'224' for square frames, '48x40' (H x W) otherwise."""
  h, w = parse(size)
  return str(h) if h == w else f'{h}x{w}'


def indivisible(size, patch: tuple[int, int], name: str = 'image_size') -> list[str]:
  """One line per side of `size` that the patch (h, w) of the tubelet does not divide, naming H or W (square frames:
  one line for both)."""
  (h, w), (ph, pw) = parse(size, name), patch
  if h == w:
    return [f'{name}={h} is not divisible by the tubelet ({ph}, {pw})'] if h % ph or w % pw else []
  shown = config_value((h, w))
  return [f'{name}={shown}: {side}={value} is not divisible by the patch {which} {p}'
          for side, value, p, which in (('H', h, ph, 'height'), ('W', w, pw, 'width')) if value % p]
