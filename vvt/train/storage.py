"""Where a run writes: the workdir checked before any work, and failed writes told as one line.

  check_workdir(workdir)       WORKDIR and WORKDIR/checkpoints are directories this process can write to
                               (a probe file is created and removed), else WriteError: one line naming the
                               path and why ("read-only file system", "permission denied", "is a file, not a
                               directory"); before anything compiles
  write_error(error, what)     a WriteError saying what could not be written and why, for an error whose cause
                               is an OSError of the storage (ENOSPC: "no space left on the device", EROFS,
                               EACCES, EDQUOT, EFBIG, ...), also where a library reports it as text (tensorstore
                               writing a checkpoint's arrays); None for any other error

A WriteError is an OSError marked as a user error: the command prints its one line (no traceback) and exits 1.
URLs (`gs://`) are created, not probed: their errors are the storage client's.
"""
from __future__ import annotations

import errno
import os
from typing import Optional

from vvt import fileio

# errno -> what the one line says (the operating system's words, in the project's style)
REASONS = {
    errno.ENOSPC: 'no space left on the device',
    errno.EROFS: 'read-only file system',
    errno.EACCES: 'permission denied',
    errno.EPERM: 'operation not permitted',
    errno.EDQUOT: 'disk quota exceeded',
    errno.EFBIG: 'file too large (over the file size limit of this process, `ulimit -f`)',
    errno.ENOTDIR: 'a path component is a file, not a directory',
    errno.EIO: 'input/output error of the device',
}
# how libraries that do not raise OSError (tensorstore) word the same errors
_TEXTS = {
    'no space left on device': errno.ENOSPC,
    'read-only file system': errno.EROFS,
    'permission denied': errno.EACCES,
    'disk quota exceeded': errno.EDQUOT,
    'file too large': errno.EFBIG,
    'not a directory': errno.ENOTDIR,
}


class WriteError(OSError):
  """A file of the run could not be written; the message names it and says why (one line)."""
  user_error = True

  def __init__(self, code: Optional[int], message: str):
    super().__init__(message)
    self.errno = code

  def __str__(self):
    return str(self.args[0])


def _chain(error: BaseException):
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    yield error
    error = error.__cause__ or error.__context__


def storage_errno(error: BaseException) -> Optional[int]:
  """The errno of the storage failure behind `error` (its cause chain, or a library's message), or None."""
  for e in _chain(error):
    if isinstance(e, OSError) and e.errno in REASONS:
      return e.errno
  for e in _chain(error):
    text = str(e).lower()
    for words, code in _TEXTS.items():
      if words in text:
        return code
  return None


def _filename(error: BaseException) -> Optional[str]:
  for e in _chain(error):
    if isinstance(e, OSError) and e.filename:
      return str(e.filename)
  return None


def write_error(error: BaseException, what: str, path: Optional[str] = None) -> Optional[WriteError]:
  """`WriteError('{what}: {reason} ({file})')` when `error` is a storage failure, else None."""
  code = storage_errno(error)
  if code is None:
    return None
  where = _filename(error) if path is None else path
  return WriteError(code, f'{what}: {REASONS[code]}' + (f' ({where})' if where else ''))


def _probe(directory: str) -> None:
  import uuid
  probe = os.path.join(directory, f'.vvt-write-test-{uuid.uuid4().hex}')  # unique across the hosts of a run
  with open(probe, 'w') as f:
    f.write('')
  os.remove(probe)


def check_workdir(workdir: str, subdir: str = 'checkpoints') -> None:
  """Creates WORKDIR if missing and checks that WORKDIR and WORKDIR/`subdir` (if it exists) can be written.

  Raises WriteError naming the path: `subdir` is a file; the workdir cannot be created or written (read-only
  file system, permission denied, no space left)."""
  if fileio.is_url(workdir):
    fileio.makedirs(workdir)
    return
  sub = os.path.join(workdir, subdir)
  if os.path.exists(sub) and not os.path.isdir(sub):
    raise WriteError(errno.ENOTDIR, f'{sub} is a file, not a directory: vvt keeps the run\'s checkpoints '
                                    'there (move the file away or choose another --workdir)')
  for directory in (workdir, sub):
    try:
      if directory == workdir:
        os.makedirs(directory, exist_ok=True)
      elif not os.path.isdir(directory):
        continue
      _probe(directory)
    except OSError as e:
      raise (write_error(e, f'cannot write to the run directory {directory}', path='') or e) from None
