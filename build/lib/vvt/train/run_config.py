"""WORKDIR/config.json: the run's saved config, what changed on resume, and rewriting it.

A resumed run must learn what the interrupted run would have learned, so resuming with a config
that differs in a field outside `SAFE_ON_RESUME` (learning rate, batch size, model, ...)
is refused with a `defaults.ConfigError` naming the fields, unless `allow_config_change`.
Changes to safe fields (evaluation, logging, checkpoint cadence, file locations, the mesh: a
checkpoint restores onto another mesh or device count; scanned layers, remat and the attention implementation:
the same function, and a checkpoint restores into either layer layout) are logged. Workdirs may be URLs
(`gs://bucket/run`): files go through `etils.epath`, never `os.path`.
"""
import json
from typing import Callable, Optional

from etils import epath
import ml_collections

from vvt.train import defaults

FILENAME = 'config.json'
MAX_LISTED = 3  # changed fields named in the one-line error

Change = tuple[str, object, object]  # (field, saved value, new value)


# Fields that may change when a run resumes: they change how it is watched, not what it learns.
SAFE_ON_RESUME = ('eval.batch_size', 'eval.every_steps', 'eval.split', 'eval.average',
                  'log_every_steps', 'checkpoint.every_steps', 'checkpoint.keep',
                  'dataset.prefetch', 'dataset.cycle_length', 'dataset.data_dir',
                  'dataset.train_files', 'dataset.eval_files', 'dataset.cache',
                  'dataset.num_test_clips', 'dataset.num_spatial_crops', 'dataset.eval_resize',
                  'mesh', 'distributed.initialize', 'distributed.coordinator_address',
                  'distributed.num_processes', 'distributed.process_id', 'init_from',
                  'class_names',
                  # how the same function is computed: the checkpoint converts between layer layouts
                  'model.scan_layers', 'model.remat', 'model.attention_impl')


def flatten(config, prefix='') -> dict:
  """{'a.b': value} for every leaf (sections that are None are leaves)."""
  out = {}
  items = config.items() if isinstance(config, (ml_collections.ConfigDict, dict)) else ()
  for key, value in items:
    path = f'{prefix}{key}'
    if isinstance(value, (ml_collections.ConfigDict, dict)) and value and path != 'num_classes' \
        and not path.endswith('.num_classes'):
      out.update(flatten(value, path + '.'))
    else:
      value = defaults.plain(value)
      out[path] = tuple(value) if isinstance(value, list) else value
  return out


def differences(old, new) -> list[tuple[str, object, object]]:
  """(field, old value, new value) for every leaf that differs between two configs."""
  a, b = flatten(old), flatten(new)
  missing = object()
  out = []
  for key in sorted(set(a) | set(b)):
    x, y = a.get(key, missing), b.get(key, missing)
    if x != y:
      out.append((key, None if x is missing else x, None if y is missing else y))
  return out


def unsafe_changes(old, new) -> list[tuple[str, object, object]]:
  """The differences that change what a resumed run learns (not in SAFE_ON_RESUME)."""
  return [(k, x, y) for k, x, y in differences(old, new)
          if not any(k == s or k.startswith(s + '.') for s in SAFE_ON_RESUME)]


def path(workdir: str) -> str:
  """WORKDIR/config.json (a local path or a URL such as gs://bucket/run/config.json)."""
  return str(epath.Path(str(workdir)) / FILENAME)


def load_saved(workdir: str):
  """The config saved in `workdir` (links restored by `defaults.from_dict`), or None."""
  file = epath.Path(path(workdir))
  if not file.exists():
    return None
  return defaults.from_dict(json.loads(file.read_text()))


def write(workdir: str, config) -> None:
  """Writes `config` as WORKDIR/config.json (atomically: a temporary file renamed over it)."""
  file = epath.Path(path(workdir))
  tmp = file.parent / (FILENAME + '.tmp')
  tmp.write_text(config.to_json_best_effort(indent=2))
  tmp.replace(file)


def _as_saved(config):
  """`config` as it would read back from config.json, so both sides compare alike."""
  return defaults.from_dict(json.loads(config.to_json_best_effort()))


def _without_links(changes: list[Change]) -> list[Change]:
  """Drops `model.X` / `dataset.X` when the shared top-level `X` changed the same way."""
  top = {(k, repr(a), repr(b)) for k, a, b in changes if k in defaults.SHARED_FIELDS}
  def linked(k, a, b):
    section, _, field = k.partition('.')
    return section in ('model', 'dataset') and (field, repr(a), repr(b)) in top
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


def check_resume(saved, config, *, allow_config_change: bool = False,
                 log: Callable = print) -> list[Change]:
  """Checks a resumed run's `config` against its `saved` one; returns the changes (logged).

  Raises defaults.ConfigError, one line naming the first changed fields, when a field
  outside SAFE_ON_RESUME changed and not `allow_config_change`.
  """
  if saved is None:
    return []
  new = _as_saved(config)
  changes = _without_links(differences(saved, new))
  unsafe = _without_links(unsafe_changes(saved, new))
  if unsafe and not allow_config_change:
    for k, a, b in unsafe:
      log(f'[train] config change refused on resume: {k}: {a!r} -> {b!r}')
    raise defaults.ConfigError(
        f'the config differs from the run\'s saved {FILENAME} in {len(unsafe)} field(s) that '
        f'change what it learns: {describe(unsafe, MAX_LISTED)}; pass --allow_config_change '
        'to resume with the new values')
  for k, a, b in changes:
    kind = 'allowed' if (k, a, b) in unsafe else 'safe'
    log(f'[train] config change on resume ({kind}): {k}: {a!r} -> {b!r}')
  return changes
