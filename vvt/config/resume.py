"""What may change when a run resumes: its config against the saved WORKDIR/config.json (`run_file`).

A resumed run must learn what the interrupted run would have learned, so resuming with a config
that differs in a field outside `SAFE_ON_RESUME` (learning rate, batch size, model, ...)
is refused with a `ConfigError` naming the fields, unless `allow_config_change`.
Changes to safe fields (evaluation, logging, checkpoint cadence, file locations, the mesh: a
checkpoint restores onto another mesh or device count; scanned layers, remat and the attention implementation:
the same function, and a checkpoint restores into either layer layout) are logged.
"""
from typing import Callable, Optional

from vvt.config import paths
from vvt.config import run_file
from vvt.config import schema
from vvt.config.errors import ConfigError

MAX_LISTED = 3  # changed fields named in the one-line error

Change = tuple[str, object, object]  # (field, saved value, new value)


# Fields that may change when a run resumes: they change how it is watched, not what it learns.
SAFE_ON_RESUME = ('eval.batch_size', 'eval.every_steps', 'eval.split', 'eval.average', 'eval.raw_params',
                  'log_every_steps', 'checkpoint.every_steps', 'checkpoint.keep',
                  'dataset.prefetch', 'dataset.cycle_length', 'dataset.data_dir',
                  'dataset.train_files', 'dataset.eval_files', 'dataset.cache',
                  'dataset.num_test_clips', 'dataset.num_spatial_crops', 'dataset.eval_resize',
                  'mesh', 'distributed.initialize', 'distributed.coordinator_address',
                  'distributed.num_processes', 'distributed.process_id',
                  'distributed.heartbeat_timeout_seconds', 'init_from', 'profile',
                  'class_names',
                  # how the same function is computed: the checkpoint converts between layer layouts
                  'model.scan_layers', 'model.remat', 'model.attention_impl')


def differences(old, new) -> list[Change]:
  """(field, old value, new value) for every leaf that differs between two configs."""
  a, b = paths.flatten(old), paths.flatten(new)
  missing = object()
  out = []
  for key in sorted(set(a) | set(b)):
    x, y = a.get(key, missing), b.get(key, missing)
    if x != y:
      out.append((key, None if x is missing else x, None if y is missing else y))
  return out


def is_safe(field: str) -> bool:
  """Whether `field` (a dotted path) may change on resume: it or a section above it is in SAFE_ON_RESUME."""
  return any(field == s or field.startswith(s + '.') for s in SAFE_ON_RESUME)


def unsafe_changes(old, new) -> list[Change]:
  """The differences that change what a resumed run learns (not in SAFE_ON_RESUME)."""
  return [(k, x, y) for k, x, y in differences(old, new) if not is_safe(k)]


def _without_links(changes: list[Change]) -> list[Change]:
  """Drops `model.X` / `dataset.X` when the shared top-level `X` changed the same way."""
  top = {(k, repr(a), repr(b)) for k, a, b in changes if k in schema.SHARED_FIELDS}
  def linked(k, a, b):
    section, _, field = k.partition('.')
    return section in schema.SECTIONS_WITH_SHARED_FIELDS and (field, repr(a), repr(b)) in top
  return [c for c in changes if not linked(*c)]


def _short(value, width: int = 40) -> str:
  text = repr(value)
  return text if len(text) <= width else text[:width - 3] + '...'


def describe(changes: list[Change], limit: Optional[int] = None) -> str:
  """'field: old -> new, ...' for the first `limit` changes (all by default), '(+N more)' after."""
  shown = changes if limit is None else changes[:limit]
  text = ', '.join(f'{k}: {_short(a)} -> {_short(b)}' for k, a, b in shown)
  rest = len(changes) - len(shown)
  return text + (f' (+{rest} more)' if rest else '')


def check_resume(saved, values: dict, *, allow_config_change: bool = False,
                 log: Callable = print) -> list[Change]:
  """Checks a resumed run's config (its JSON `values`, a RunSpec's `config_values`) against its `saved` one (a
  ConfigDict, `run_file.load_saved`); returns the changes (logged).

  Raises ConfigError, one line naming the first changed fields, when a field
  outside SAFE_ON_RESUME changed and not `allow_config_change`.
  """
  if saved is None:
    return []
  new = run_file.from_dict(values)
  changes = _without_links(differences(saved, new))
  unsafe = _without_links(unsafe_changes(saved, new))
  if unsafe and not allow_config_change:
    for k, a, b in unsafe:
      log(f'[train] config change refused on resume: {k}: {a!r} -> {b!r}')
    raise ConfigError(
        f'the config differs from the run\'s saved {run_file.FILENAME} in {len(unsafe)} field(s) that '
        f'change what it learns: {describe(unsafe, MAX_LISTED)}; pass --allow_config_change '
        'to resume with the new values')
  for k, a, b in changes:
    kind = 'allowed' if (k, a, b) in unsafe else 'safe'
    log(f'[train] config change on resume ({kind}): {k}: {a!r} -> {b!r}')
  return changes
