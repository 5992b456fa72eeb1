"""Orbax checkpoints: full training states and params-only checkpoints, one layout.

Layout (`WORKDIR/checkpoints/<step>/`, one orbax `CheckpointManager` step
directory per saved step, written to a temporary directory and renamed on
commit, so a killed process never leaves a half-written step behind):

  params/   the model parameters (orbax StandardSave pytree, float32)
  train/    {step, opt_state, rng} — only in full training states
  ema/      the EMA of the params (`vvt.train.ema`), like params/ — only in training states of a run with
            `optimizer.ema_decay` > 0 (meta "ema": true)
  meta/     JSON: {"kind": "train_state" | "params", "step", "data_position",
            "config": the run's config (best-effort JSON)}

  checksums.json  size and SHA-256 of every file under params/, train/ and meta/, and a digest of
            the list itself; written inside the temporary directory after the arrays are final
            (orbax's post-finalization callback, in the background thread) and committed with it

`vvt eval` only reads `params/` and therefore accepts both kinds; converted
weights are written with `save_params` and are params-only.

Every load verifies the step first (`verify_step`): a missing, truncated, emptied, unreadable or
changed file, a damaged checksums.json, or a step that never committed raises
CheckpointDamagedError naming the file. `load_with_fallback` loads an explicit step or nothing, and
"latest" as the newest intact step, with a warning per damaged step skipped. A step without
checksums.json but with orbax's commit marker (written before vvt recorded checksums) loads
unverified, with a warning.
Evaluation results are written beside the step directories as
`WORKDIR/checkpoints/eval_<step>_<split>.json` (+ `.npz` per-video scores).

At scale: arrays are saved as they are sharded (each host writes its own shards; orbax's
OCDBT/Tensorstore format), a training manager saves asynchronously (`async_save=True`: `save`
returns once the arrays are off the devices; the step directory is committed when the write
finishes), and a restore takes the shardings of the abstract tree it is given, so a state written on
`fsdp=8` restores on one CPU device and the reverse. The workdir may be a URL (`gs://bucket/run`):
paths go through `etils.epath` (`os.path` only for local paths).
"""
import hashlib
import json
from typing import Any, Callable, Optional

from etils import epath
import jax
import orbax.checkpoint as ocp

from vvt import fileio
from vvt.models import layout
from vvt.train import storage

SUBDIR = 'checkpoints'


# ----------------------------------------------------------------------------- paths (local or URL): vvt.fileio's,
# importable from here as before
is_url, abspath, join, makedirs, write_text = (fileio.is_url, fileio.abspath, fileio.join, fileio.makedirs,
                                               fileio.write_text)


class CheckpointNotFoundError(FileNotFoundError):
  pass


class CheckpointDamagedError(ValueError):
  """A checkpoint step is damaged or incomplete; the message names the file."""


class CheckpointMismatchError(ValueError):
  """An intact checkpoint step that does not fit the config (another model width or depth, another optimizer):
  the message names the parameter and its shape in the checkpoint and in the config. Not damage: no fallback to
  an older step (it would not fit either), nothing is moved aside."""


def checkpoint_dir(workdir: str) -> str:
  return join(abspath(workdir), SUBDIR)


def manager(workdir: str, keep: Optional[int] = None, create: bool = True,
            async_save: bool = False) -> ocp.CheckpointManager:
  """The orbax manager of `WORKDIR/checkpoints`; `async_save`: saves return before the write ends.

  Saves go through orbax's asynchronous checkpointer either way, so that checksums.json is written
  by its post-finalization callback (the arrays are final, the step not yet committed); a
  synchronous manager (`async_save=False`) is used with `wait=True`.
  """
  pending = {'step': None}
  ckpt_dir = checkpoint_dir(workdir)
  options = ocp.CheckpointManagerOptions(
      max_to_keep=keep if keep and keep > 0 else None,
      enable_async_checkpointing=True, create=create,
      async_options=ocp.AsyncOptions(
          post_finalization_callback=lambda: _write_pending_manifest(ckpt_dir, pending)))
  mngr = ocp.CheckpointManager(epath.Path(ckpt_dir), options=options)
  mngr.vvt_pending = pending  # the step being saved, read by the callback
  _report_write_errors(mngr, workdir)
  return mngr


def _report_write_errors(mngr: ocp.CheckpointManager, workdir: str) -> None:
  """`mngr.save` and `mngr.wait_until_finished` (where an asynchronous write's error surfaces) raise a
  failed write of the storage (no space left, read-only, ...) as `storage.WriteError`, one line naming the
  step, the reason and the last intact step; the step never committed, so the steps before it stay intact."""
  save, wait = mngr.save, mngr.wait_until_finished

  def reported(call):
    def run(*args, **kwargs):
      try:
        return call(*args, **kwargs)
      except Exception as e:
        step = mngr.vvt_pending.get('step')
        error = storage.write_error(e, f'checkpoint step {step} could not be written to '
                                       f'{checkpoint_dir(workdir)}')
        if error is None:
          raise
        raise storage.WriteError(error.errno, f'{error}; {_last_intact(workdir)}') from e
    return run
  mngr.save, mngr.wait_until_finished = reported(save), reported(wait)


def _last_intact(workdir: str) -> str:
  try:
    steps = all_steps(workdir)
  except Exception:
    steps = []
  return (f'the last checkpoint, step {steps[-1]}, is intact' if steps else
          'no checkpoint was written before it')


# ----------------------------------------------------------------------------- checksums

MANIFEST = 'checksums.json'
COMMIT_MARKER = 'commit_success.txt'  # orbax's, at the step root
_NOT_CHECKSUMMED = {MANIFEST, COMMIT_MARKER, '_CHECKPOINT_METADATA'}  # orbax updates these on commit
_CHUNK = 1 << 22


def file_digest(path: epath.Path) -> tuple[int, str]:
  """(size in bytes, SHA-256 hex) of one file, read in chunks."""
  h, size = hashlib.sha256(), 0
  with path.open('rb') as f:
    while True:
      chunk = f.read(_CHUNK)
      if not chunk:
        return size, h.hexdigest()
      size += len(chunk)
      h.update(chunk)


def _files(step_dir: epath.Path) -> list[str]:
  """Relative paths of the checksummed files of a step directory (sorted)."""
  out, todo = [], [step_dir]
  while todo:
    for p in todo.pop().iterdir():
      if p.is_dir():
        todo.append(p)
      elif str(p.relative_to(step_dir)) not in _NOT_CHECKSUMMED:
        out.append(str(p.relative_to(step_dir)))
  return sorted(out)


def _list_digest(files: dict) -> str:
  return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def write_manifest(step_dir) -> str:
  """Writes `step_dir/checksums.json` (size + SHA-256 of every file, and the list's own digest)."""
  step_dir = epath.Path(step_dir)
  files = {}
  for rel in _files(step_dir):
    size, sha = file_digest(step_dir / rel)
    files[rel] = {'size': size, 'sha256': sha}
  body = json.dumps({'version': 1, 'files': files, 'digest': _list_digest(files)}, indent=1)
  fileio.atomic_write_text(str(step_dir / MANIFEST), body)
  return str(step_dir / MANIFEST)


def _write_pending_manifest(ckpt_dir: str, pending: dict) -> None:
  """Orbax's post-finalization callback: checksums of the step just written, before its commit.

  The step is still in its temporary directory (`<step>.orbax-checkpoint-tmp-*`) on a local disk,
  or in place where orbax commits with a marker file (object stores). Primary process only.
  """
  step = pending.get('step')
  if step is None or jax.process_index() != 0:
    return
  root = epath.Path(ckpt_dir)
  tmps = [p for p in root.glob(f'{step}.orbax-checkpoint-tmp*') if p.is_dir()]
  write_manifest(max(tmps, key=lambda p: p.stat().mtime) if tmps else root / str(step))


def _damaged(path, why: str) -> CheckpointDamagedError:
  return CheckpointDamagedError(f'damaged checkpoint file {path}: {why}')


def _read_manifest(step_dir: epath.Path) -> dict:
  path = step_dir / MANIFEST
  try:
    manifest = json.loads(path.read_text())
    files = manifest['files']
    ok = isinstance(files, dict) and manifest.get('digest') == _list_digest(files)
  except Exception as e:
    raise _damaged(path, f'the checksum file cannot be read ({type(e).__name__}: '
                         f'{str(e).splitlines()[0] if str(e) else ""})') from None
  if not ok:
    raise _damaged(path, 'the checksum file is damaged (its own digest does not match)')
  return files


def verify_step(workdir: str, step: int, log: Optional[Callable] = None) -> None:
  """Checks every file of step `step` against its checksums.json.

  Raises CheckpointDamagedError naming the first file that is missing, unreadable, of the wrong
  size (truncated, emptied) or with other bytes, or a damaged checksums.json, or a step that never
  committed. A committed step without checksums.json (older vvt) passes with a warning to `log`.
  """
  step_dir = epath.Path(join(checkpoint_dir(workdir), str(step)))
  if not step_dir.is_dir():
    raise _damaged(step_dir, 'the step directory is missing')
  if not (step_dir / MANIFEST).exists():
    if not (step_dir / COMMIT_MARKER).exists():
      raise _damaged(step_dir, f'neither {MANIFEST} nor {COMMIT_MARKER}: the step was never '
                               'committed (half-written)')
    if log:
      log(f'[checkpoints] warning: {step_dir} has no {MANIFEST} (written before vvt recorded '
          'checksums): loading it unverified')
    return
  files = _read_manifest(step_dir)
  for rel, want in sorted(files.items()):
    path = step_dir / rel
    if not path.exists():
      raise _damaged(path, 'missing')
    try:
      size, sha = file_digest(path)
    except Exception as e:
      raise _damaged(path, f'cannot be read ({type(e).__name__}: {e})') from None
    if size != want['size']:
      raise _damaged(path, f'{size} bytes, {want["size"]} written '
                           f'({"emptied" if size == 0 else "truncated" if size < want["size"] else "grown"})')
    if sha != want['sha256']:
      raise _damaged(path, 'its bytes changed since it was written (SHA-256 mismatch)')
  extra = sorted(set(_files(step_dir)) - set(files))
  if extra:
    raise _damaged(step_dir / extra[0], f'not written with this checkpoint (not in {MANIFEST})')


def load_with_fallback(workdir: str, load: Callable[[int], Any], step: Optional[int] = None,
                       log: Callable = print) -> tuple[int, Any, list]:
  """(step, load(step), damaged steps skipped): `step` verified and loaded, or else the newest
  intact step.

  An explicit `step` that is damaged raises CheckpointDamagedError (no fallback). Without one,
  each damaged step (verification or `load` raising CheckpointDamagedError) is skipped with a
  warning, newest first; if none is intact, CheckpointDamagedError lists them.
  """
  candidates = [resolve_step(workdir, step)] if step is not None else (
      list(reversed(all_steps(workdir))) or [resolve_step(workdir)])
  skipped = []
  for s in candidates:
    try:
      verify_step(workdir, s, log)
      result = load(s)
    except CheckpointDamagedError as e:
      if step is not None:
        raise
      log(f'[checkpoints] warning: step {s} skipped: {e}')
      skipped.append((s, e))
      continue
    if skipped:
      log(f'[checkpoints] warning: falling back to step {s}, the newest intact checkpoint in '
          f'{checkpoint_dir(workdir)}')
    return s, result, [x for x, _ in skipped]
  raise CheckpointDamagedError(
      f'no intact checkpoint in {checkpoint_dir(workdir)}: '
      + '; '.join(f'step {x}: {e}' for x, e in skipped))


def quarantine(workdir: str, step: int) -> str:
  """Moves a damaged step out of the way (to WORKDIR/damaged_checkpoints/<step>[.n]): kept, not
  deleted, and no longer in the way of a new save of that step. Returns the new path."""
  src = epath.Path(join(checkpoint_dir(workdir), str(step)))
  base = epath.Path(join(abspath(workdir), 'damaged_checkpoints'))
  base.mkdir(parents=True, exist_ok=True)
  dst, n = base / str(step), 0
  while dst.exists():
    n += 1
    dst = base / f'{step}.{n}'
  src.rename(dst)
  return str(dst)


def _restore(mngr: ocp.CheckpointManager, workdir: str, step: int, **items):
  """mngr.restore, with any failure (bad JSON, wrong shapes, a file orbax cannot read) as a
  CheckpointDamagedError naming the step directory."""
  try:
    return mngr.restore(step, args=ocp.args.Composite(**items))
  except (KeyboardInterrupt, CheckpointDamagedError):
    raise
  except Exception as e:
    lines = [l.strip() for l in str(e).splitlines() if l.strip()]
    raise _damaged(join(checkpoint_dir(workdir), str(step), *items.keys() if len(items) == 1 else ()),
                   f'cannot be restored ({type(e).__name__}: {lines[0] if lines else ""})') from None


def steps_on_disk(workdir: str) -> list[int]:
  """The committed steps, from the directory listing alone (no orbax manager, no collective among processes):
  step directories with checksums.json or orbax's commit marker."""
  root = epath.Path(checkpoint_dir(workdir))
  if not root.is_dir():
    return []
  return sorted(int(p.name) for p in root.iterdir() if p.name.isdigit() and p.is_dir() and (
      (p / MANIFEST).exists() or (p / COMMIT_MARKER).exists()))


def all_steps(workdir: str) -> list[int]:
  if not epath.Path(checkpoint_dir(workdir)).is_dir():
    return []
  return sorted(manager(workdir, create=False).all_steps())


def save_state(mngr: ocp.CheckpointManager, state, *, data_position: int,
               config: Optional[dict] = None, wait: bool = True) -> None:
  """Saves a full training state (params, opt state, rng, step, data position), sharded as it is, and `config`
  (the run config's JSON values, a RunSpec's `config_values`) in its meta.

  `wait=False` on an asynchronous manager returns once the arrays are copied off the devices
  (the state may then be donated to the next step); `mngr.wait_until_finished()` ends the write.
  """
  step = int(jax.device_get(state.step))
  mngr.wait_until_finished()  # the previous save (orbax's save would wait for it too)
  mngr.vvt_pending['step'] = step
  meta = {'kind': 'train_state', 'step': step, 'data_position': int(data_position), 'config': config}
  train = {'step': state.step, 'opt_state': state.opt_state, 'rng': state.rng}
  ema = {}
  if getattr(state, 'ema_params', None) is not None:
    meta['ema'] = True
    ema = {'ema': ocp.args.StandardSave(state.ema_params)}
  mngr.save(step, args=ocp.args.Composite(
      params=ocp.args.StandardSave(state.params),
      train=ocp.args.StandardSave(train),
      meta=ocp.args.JsonSave(meta), **ema), force=True)
  if wait:
    mngr.wait_until_finished()


def resolve_step(workdir: str, step: Optional[int] = None) -> int:
  """`step` if it was saved in `workdir` (default: the latest step).

  Raises CheckpointNotFoundError naming the directory, and the existing steps
  when `step` is not one of them.
  """
  steps = all_steps(workdir)
  if not steps:
    path = epath.Path(checkpoint_dir(workdir))
    state = 'is empty' if path.is_dir() else 'is a file, not a directory' if path.exists() else 'does not exist'
    raise CheckpointNotFoundError(f'no checkpoint in {checkpoint_dir(workdir)} (the directory {state})')
  if step is None:
    return steps[-1]
  if step not in steps:
    raise CheckpointNotFoundError(
        f'no checkpoint for step {step} in {checkpoint_dir(workdir)}; '
        f'existing steps: {", ".join(map(str, steps))}')
  return int(step)


def read_meta(workdir: str, step: int) -> dict:
  """The `meta/` JSON of step `step`: kind ('train_state' | 'params'), step, data position, config."""
  meta = _restore(manager(workdir, create=False), workdir, step, meta=ocp.args.JsonRestore())['meta']
  if not isinstance(meta, dict) or meta.get('kind') not in ('train_state', 'params'):
    raise _damaged(join(checkpoint_dir(workdir), str(step), 'meta'),
                   f'not a vvt checkpoint description (kind {getattr(meta, "get", dict().get)("kind")!r})')
  return dict(meta)


def restore_state(workdir: str, abstract_state, step: Optional[int] = None, verify: bool = True):
  """Restores a full training state -> (state, meta). `abstract_state` carries shardings.

  The step is checked against its checksums first (`verify`), CheckpointDamagedError if damaged. Params and
  optimiser state come in the encoder layout of `abstract_state` whichever the step was written in. An
  `abstract_state` with EMA params restores the step's (`ema/`), or, from a step without them (meta "ema"
  absent), starts them at the restored params.
  """
  step = resolve_step(workdir, step)
  if verify:
    verify_step(workdir, step)
  meta = read_meta(workdir, step)
  if meta.get('kind') != 'train_state':
    raise ValueError(f'checkpoint step {step} in {checkpoint_dir(workdir)} is '
                     f'{meta.get("kind")!r}, not a training state')
  train_abstract = {'step': abstract_state.step,
                    'opt_state': abstract_state.opt_state,
                    'rng': abstract_state.rng}
  target = {'params': abstract_state.params, 'train': train_abstract}
  if getattr(abstract_state, 'ema_params', None) is not None and meta.get('ema'):
    target['ema'] = abstract_state.ema_params
  stored = _in_stored_layout(workdir, step, target, params_key=True)
  check_train_fits(workdir, step, (stored or target)['train'])
  restored = _restore(manager(workdir, create=False), workdir, step,
                      **{k: ocp.args.StandardRestore(v) for k, v in (stored or target).items()})
  if stored is not None:
    restored = _to_layout_of({k: restored[k] for k in target}, target)
  train = restored['train']
  state = abstract_state.replace(params=restored['params'], step=train['step'],
                                 opt_state=train['opt_state'], rng=train['rng'])
  if getattr(abstract_state, 'ema_params', None) is not None:
    state = state.replace(ema_params=restored['ema'] if 'ema' in target else jax.tree.map(
        lambda x: x.copy(), restored['params']))
  return state, meta


def save_params(workdir: str, params, step: int = 0, config: Optional[dict] = None) -> str:
  """Writes a params-only checkpoint (e.g. converted weights) with `config` (JSON values: a run config's or a
  model config's) in its meta; returns its directory."""
  mngr = manager(workdir)
  mngr.vvt_pending['step'] = int(step)
  meta = {'kind': 'params', 'step': int(step), 'data_position': 0, 'config': config}
  mngr.save(int(step), args=ocp.args.Composite(
      params=ocp.args.StandardSave(params), meta=ocp.args.JsonSave(meta)),
            force=True)
  mngr.wait_until_finished()
  return join(checkpoint_dir(workdir), str(int(step)))


def abstract_params_from_checkpoint(workdir: str, step: int, sharding=None):
  """ShapeDtypeStructs of a checkpoint's params (on `sharding`, default one local device)."""
  path = epath.Path(join(checkpoint_dir(workdir), str(step), 'params'))
  try:
    meta = ocp.StandardCheckpointer().metadata(path)
  except Exception as e:
    raise _damaged(path, f'its array metadata cannot be read ({type(e).__name__})') from None
  tree = getattr(meta, 'item_metadata', meta)
  tree = getattr(tree, 'tree', tree)
  sharding = sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  is_leaf = lambda x: hasattr(x, 'shape') and hasattr(x, 'dtype')
  return jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=sharding),
                      tree, is_leaf=is_leaf)


def _is_array(x) -> bool:
  return hasattr(x, 'shape') and hasattr(x, 'dtype')


def _key(entry) -> str:
  for attr in ('key', 'idx', 'name'):
    if hasattr(entry, attr):
      return str(getattr(entry, attr))
  return str(entry)


def _flat_shapes(tree) -> dict[str, tuple]:
  """{'encoder/layers/block_0/.../kernel': shape} of a tree of arrays or array metadata."""
  leaves = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_array)[0]
  return {'/'.join(_key(k) for k in path): tuple(x.shape) for path, x in leaves if _is_array(x)}


def _shape_differences(stored: dict, wanted: dict) -> list[str]:
  out = []
  for name in sorted(set(stored) | set(wanted)):
    if name not in wanted:
      out.append(f'parameter {name} is in the checkpoint (shape {stored[name]}) but not in the config\'s model')
    elif name not in stored:
      out.append(f'parameter {name} of the config\'s model (shape {wanted[name]}) is not in the checkpoint')
    elif stored[name] != wanted[name]:
      out.append(f'parameter {name} has shape {stored[name]} in the checkpoint and {wanted[name]} in the config')
  return out


def _train_shapes(workdir: str, step: int) -> Optional[list]:
  """The shapes of the arrays saved in `train/` of a step, sorted (None: a params-only step, or unreadable)."""
  path = epath.Path(join(checkpoint_dir(workdir), str(step), 'train'))
  if not path.is_dir():
    return None
  try:
    meta = ocp.StandardCheckpointer().metadata(path)
  except Exception:
    return None
  tree = getattr(meta, 'item_metadata', meta)
  tree = getattr(tree, 'tree', tree)
  return sorted(_flat_shapes(tree).values())


def _optimizer_shapes(workdir: str, step: int) -> Optional[set]:
  shapes = _train_shapes(workdir, step)
  return None if shapes is None else set(shapes)


def check_train_fits(workdir: str, step: int, wanted_train) -> None:
  """CheckpointMismatchError when the optimizer state saved in an intact step has other arrays than the config's
  optimizer makes (another `optimizer.name`, momentum on or off): not damage."""
  stored, wanted = _train_shapes(workdir, step), sorted(_flat_shapes(wanted_train).values())
  if stored is None or stored == wanted:
    return
  raise CheckpointMismatchError(
      f'checkpoint step {step} in {checkpoint_dir(workdir)} does not fit the config (its files are intact): its '
      f'optimizer state holds {len(stored)} arrays, the config\'s optimizer makes {len(wanted)} (another '
      f'optimizer); the optimizer fields must be those the checkpoint was written with (see '
      f'{join(abspath(workdir), "config.json")})')


def check_fits(workdir: str, step: int, stored_params, wanted_params) -> None:
  """Compares the params of an intact step (`stored_params`, its array metadata) with the model's
  (`wanted_params`, abstract, in the step's layout) before restoring.

  Another set of names or shapes raises CheckpointMismatchError naming the first parameter that differs, with
  its shape in the checkpoint and in the config. Where the step's own optimizer state (Adam's moments, SGD's
  momentum) has none of the shapes of its params, the params are not those written with it: CheckpointDamagedError.
  """
  stored, wanted = _flat_shapes(stored_params), _flat_shapes(wanted_params)
  diffs = _shape_differences(stored, wanted)
  if not diffs:
    return
  opt_shapes = _optimizer_shapes(workdir, step)
  moments = {shape for shape in (opt_shapes or ()) if len(shape) > 1}
  if moments and not {shape for shape in stored.values() if len(shape) > 1} <= opt_shapes:
    raise _damaged(join(checkpoint_dir(workdir), str(step), 'params'),
                   f'its arrays are not those saved with its optimizer state ({diffs[0]})')
  more = f' ({len(diffs)} differences in {len(set(stored) | set(wanted))} parameters)' if len(diffs) > 1 else ''
  raise CheckpointMismatchError(
      f'checkpoint step {step} in {checkpoint_dir(workdir)} does not fit the config (its files are intact): '
      f'{diffs[0]}{more}; the model fields must be those the checkpoint was written with '
      f'(see {join(abspath(workdir), "config.json")})')


def _in_stored_layout(workdir: str, step: int, target, params_key: bool = False):
  """`target` (abstract, mirroring the params) in the encoder layout the step's params were written in, or None
  if it already has it (`vvt.models.layout`: per layer, or stacked by `model.scan_layers`). The step's params
  must fit the target's (`check_fits`: CheckpointMismatchError naming the parameter otherwise)."""
  wanted = layout.layout_of(target)
  stored_params = abstract_params_from_checkpoint(workdir, step)
  stored = layout.layout_of(stored_params)
  if stored == wanted or {stored, wanted} != {'per_layer', 'stacked'}:
    in_stored = None
  else:
    in_stored = layout.to_stacked(target) if stored == 'stacked' else layout.to_per_layer(target)
  mirrored = target if in_stored is None else in_stored
  check_fits(workdir, step, stored_params, mirrored['params'] if params_key else mirrored)
  return in_stored


def _to_layout_of(tree, target):
  """`tree`, restored in the other encoder layout, in `target`'s layout and on its shardings."""
  convert = layout.to_stacked if layout.layout_of(target) == 'stacked' else layout.to_per_layer
  return jax.jit(convert, out_shardings=jax.tree.map(lambda a: a.sharding, target))(tree)


def load_params(workdir: str, step: Optional[int] = None, abstract_params=None,
                verify: bool = True, item: str = 'params'):
  """Params of a full or params-only checkpoint -> (params, step).

  With `abstract_params` (a pytree of jax.ShapeDtypeStruct with shardings)
  the arrays are restored with those shardings and in its encoder layout (per layer or stacked for
  `model.scan_layers`, whichever the step was written in); without, on one local device
  (whatever the topology the checkpoint was written on), in the step's own layout. The step is checked against its
  checksums first (`verify`): CheckpointDamagedError naming the file if it is damaged. `item='ema'` reads the
  EMA params of a training state instead (`has_ema`).
  """
  step = resolve_step(workdir, step)
  if verify:
    verify_step(workdir, step)
  stored = None
  if abstract_params is None:
    abstract_params = abstract_params_from_checkpoint(workdir, step)
  else:
    stored = _in_stored_layout(workdir, step, abstract_params)
  restored = _restore(manager(workdir, create=False), workdir, step,
                      **{item: ocp.args.StandardRestore(abstract_params if stored is None else stored)})
  if stored is not None:
    return _to_layout_of(restored[item], abstract_params), step
  return restored[item], step


def has_ema(workdir: str, step: int) -> bool:
  """Whether step `step` holds EMA params (`ema/`, a training state of a run with `optimizer.ema_decay`)."""
  return bool(read_meta(workdir, step).get('ema'))


def load_eval_params(workdir: str, step: Optional[int] = None, abstract_params=None, raw: bool = False,
                     verify: bool = True):
  """The params an evaluation or export reads -> (params, step, weights): the EMA params of a step that has
  them ('ema') unless `raw` ('raw'), else its params ('params': a step without EMA). As `load_params`."""
  step = resolve_step(workdir, step)
  if verify:
    verify_step(workdir, step)
  weights = ('raw' if raw else 'ema') if has_ema(workdir, step) else 'params'
  params, step = load_params(workdir, step, abstract_params, verify=False,
                             item='ema' if weights == 'ema' else 'params')
  return params, step, weights


def eval_results_path(workdir: str, step: int, split: str, ext: str = 'json') -> str:
  return join(checkpoint_dir(workdir), f'eval_{step}_{split}.{ext}')
