"""Files of a run, local or at a URL (`gs://bucket/run`): paths and atomic writes, for every package.

A workdir may be a local folder or a URL; everything that reads or writes under it goes through these helpers
(`etils.epath`), never through `os.path` / `open` directly. An atomic write goes to a temporary file beside the
target and is renamed over it, so a reader sees the old file or the new one, never half of one.
"""
from __future__ import annotations

import os
from typing import Any, Callable
import uuid

from etils import epath


def is_url(path: str) -> bool:
  return '://' in str(path)


def abspath(path: str) -> str:
  """An absolute local path, or the URL as it is (`gs://b/run/` -> `gs://b/run`)."""
  path = str(path)
  return path.rstrip('/') if is_url(path) else os.path.abspath(path)


def join(*parts) -> str:
  """Joins path parts; URLs keep their `scheme://` (no `os.path`)."""
  return str(epath.Path(str(parts[0])).joinpath(*map(str, parts[1:])))


def makedirs(path: str) -> None:
  epath.Path(path).mkdir(parents=True, exist_ok=True)


def exists(path: str) -> bool:
  return epath.Path(path).exists()


def read_text(path: str) -> str:
  return epath.Path(path).read_text()


def write_text(path: str, text: str) -> None:
  """Writes `text` to `path` (not atomic: see `atomic_write_text`)."""
  epath.Path(path).write_text(text)


def atomic_write(path: str, write: Callable[[Any], None], mode: str = 'w', suffix: str = '.tmp') -> None:
  """Calls `write(f)` on a temporary file beside `path`, then renames it over `path`.

  mode: 'w' (text) or 'wb' (bytes). suffix: the temporary file's suffix (keep the extension where a writer
  chooses the format by it, e.g. '.tmp.png' for matplotlib). The temporary file has a name of its own
  (several processes may write one file at once: the last rename wins) and is removed if `write` fails."""
  tmp = epath.Path(f'{path}.{uuid.uuid4().hex[:12]}{suffix}')
  try:
    with tmp.open(mode) as f:
      write(f)
    tmp.replace(str(path))
  except BaseException:
    if tmp.exists():
      tmp.unlink()
    raise


def atomic_write_text(path: str, text: str) -> None:
  atomic_write(path, lambda f: f.write(text))


def save_png(path: str, figure, dpi: int = 100) -> None:
  """A matplotlib figure written atomically to `path` as PNG."""
  atomic_write(path, lambda f: figure.savefig(f, format='png', dpi=dpi), mode='wb', suffix='.tmp.png')


def load_arrays(path: str):
  """The arrays of the numpy file `path` read whole: an ndarray of a `.npy`, {name: ndarray} of a `.npz`. Nothing
  is unpickled (`allow_pickle=False`): a file holding an object array, a truncated or damaged file, or one that is
  not a numpy file at all is a ValueError of one line naming `path`."""
  import zipfile

  import numpy as np
  try:
    with epath.Path(path).open('rb') as f:
      loaded = np.load(f, allow_pickle=False)
      if not isinstance(loaded, np.lib.npyio.NpzFile):
        return loaded
      with loaded:
        return {name: loaded[name] for name in loaded.files}
  except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise ValueError(f'{path}: not a readable numpy file ({reason}); vvt reads plain arrays and never unpickles'
                     ) from None
