"""Orbax checkpoints: full training states and params-only checkpoints, one layout.

Layout (`WORKDIR/checkpoints/<step>/`, one orbax `CheckpointManager` step
directory per saved step, written to a temporary directory and renamed on
commit, so a killed process never leaves a half-written step behind):

  params/   the model parameters (orbax StandardSave pytree, float32)
  train/    {step, opt_state, rng} — only in full training states
  meta/     JSON: {"kind": "train_state" | "params", "step", "data_position",
            "config": the run's config (best-effort JSON)}

`vvt eval` only reads `params/` and therefore accepts both kinds; converted
weights are written with `save_params` and are params-only.
Evaluation results are written beside the step directories as
`WORKDIR/checkpoints/eval_<step>_<split>.json` (+ `.npz` per-video scores).

At scale: arrays are saved as they are sharded (each host writes its own shards; orbax's
OCDBT/Tensorstore format), a training manager saves asynchronously (`async_save=True`: `save`
returns once the arrays are off the devices; the step directory is committed when the write
finishes), and a restore takes the shardings of the abstract tree it is given, so a state written on
`fsdp=8` restores on one CPU device and the reverse. The workdir may be a URL (`gs://bucket/run`):
paths go through `etils.epath` (`os.path` only for local paths).
"""
import json
import os
from typing import Any, Optional

import jax
import orbax.checkpoint as ocp
from etils import epath

SUBDIR = 'checkpoints'


# ----------------------------------------------------------------------------- paths (local or URL)


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


def write_text(path: str, text: str) -> None:
  epath.Path(path).write_text(text)


class CheckpointNotFoundError(FileNotFoundError):
  pass


def checkpoint_dir(workdir: str) -> str:
  return join(abspath(workdir), SUBDIR)


def manager(workdir: str, keep: Optional[int] = None, create: bool = True,
            async_save: bool = False) -> ocp.CheckpointManager:
  """The orbax manager of `WORKDIR/checkpoints`; `async_save`: saves return before the write ends."""
  options = ocp.CheckpointManagerOptions(
      max_to_keep=keep if keep and keep > 0 else None,
      enable_async_checkpointing=async_save, create=create)
  return ocp.CheckpointManager(epath.Path(checkpoint_dir(workdir)), options=options)


def all_steps(workdir: str) -> list[int]:
  if not epath.Path(checkpoint_dir(workdir)).is_dir():
    return []
  return sorted(manager(workdir, create=False).all_steps())


def _config_json(config) -> Any:
  if config is None:
    return None
  try:
    return json.loads(config.to_json_best_effort())
  except Exception:  # pylint: disable=broad-except
    return str(config)


def save_state(mngr: ocp.CheckpointManager, state, *, data_position: int,
               config=None, wait: bool = True) -> None:
  """Saves a full training state (params, opt state, rng, step, data position), sharded as it is.

  `wait=False` on an asynchronous manager returns once the arrays are copied off the devices
  (the state may then be donated to the next step); `mngr.wait_until_finished()` ends the write.
  """
  step = int(jax.device_get(state.step))
  meta = {'kind': 'train_state', 'step': step, 'data_position': int(data_position),
          'config': _config_json(config)}
  train = {'step': state.step, 'opt_state': state.opt_state, 'rng': state.rng}
  mngr.save(step, args=ocp.args.Composite(
      params=ocp.args.StandardSave(state.params),
      train=ocp.args.StandardSave(train),
      meta=ocp.args.JsonSave(meta)), force=True)
  if wait:
    mngr.wait_until_finished()


def resolve_step(workdir: str, step: Optional[int] = None) -> int:
  """`step` if it was saved in `workdir` (default: the latest step).

  Raises CheckpointNotFoundError naming the directory, and the existing steps
  when `step` is not one of them.
  """
  steps = all_steps(workdir)
  if not steps:
    raise CheckpointNotFoundError(
        f'no checkpoint in {checkpoint_dir(workdir)} (the directory '
        f'{"is empty" if epath.Path(checkpoint_dir(workdir)).is_dir() else "does not exist"})')
  if step is None:
    return steps[-1]
  if step not in steps:
    raise CheckpointNotFoundError(
        f'no checkpoint for step {step} in {checkpoint_dir(workdir)}; '
        f'existing steps: {", ".join(map(str, steps))}')
  return int(step)


def _meta(mngr: ocp.CheckpointManager, step: int) -> dict:
  return dict(mngr.restore(step, args=ocp.args.Composite(
      meta=ocp.args.JsonRestore()))['meta'])


def read_meta(workdir: str, step: int) -> dict:
  return _meta(manager(workdir, create=False), step)


def latest(mngr: ocp.CheckpointManager) -> tuple[Optional[int], Optional[str]]:
  """(latest step, its kind 'train_state' | 'params') of a manager, or (None, None) if it has none."""
  step = mngr.latest_step()
  if step is None:
    return None, None
  return step, _meta(mngr, step).get('kind')


def restore_state(workdir: str, abstract_state, step: Optional[int] = None):
  """Restores a full training state -> (state, meta). `abstract_state` carries shardings."""
  step = resolve_step(workdir, step)
  meta = read_meta(workdir, step)
  if meta.get('kind') != 'train_state':
    raise ValueError(f'checkpoint step {step} in {checkpoint_dir(workdir)} is '
                     f'{meta.get("kind")!r}, not a training state')
  train_abstract = {'step': abstract_state.step,
                    'opt_state': abstract_state.opt_state,
                    'rng': abstract_state.rng}
  mngr = manager(workdir, create=False)
  restored = mngr.restore(step, args=ocp.args.Composite(
      params=ocp.args.StandardRestore(abstract_state.params),
      train=ocp.args.StandardRestore(train_abstract)))
  train = restored['train']
  state = abstract_state.replace(params=restored['params'], step=train['step'],
                                 opt_state=train['opt_state'], rng=train['rng'])
  return state, meta


def save_params(workdir: str, params, step: int = 0, config=None) -> str:
  """Writes a params-only checkpoint (e.g. converted weights); returns its directory."""
  mngr = manager(workdir)
  meta = {'kind': 'params', 'step': int(step), 'data_position': 0,
          'config': _config_json(config)}
  mngr.save(int(step), args=ocp.args.Composite(
      params=ocp.args.StandardSave(params), meta=ocp.args.JsonSave(meta)),
            force=True)
  mngr.wait_until_finished()
  return join(checkpoint_dir(workdir), str(int(step)))


def abstract_params_from_checkpoint(workdir: str, step: int, sharding=None):
  """ShapeDtypeStructs of a checkpoint's params (on `sharding`, default one local device)."""
  path = epath.Path(join(checkpoint_dir(workdir), str(step), 'params'))
  meta = ocp.StandardCheckpointer().metadata(path)
  tree = getattr(meta, 'item_metadata', meta)
  tree = getattr(tree, 'tree', tree)
  sharding = sharding or jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  is_leaf = lambda x: hasattr(x, 'shape') and hasattr(x, 'dtype')
  return jax.tree.map(lambda m: jax.ShapeDtypeStruct(m.shape, m.dtype, sharding=sharding),
                      tree, is_leaf=is_leaf)


def load_params(workdir: str, step: Optional[int] = None, abstract_params=None):
  """Params of a full or params-only checkpoint -> (params, step).

  With `abstract_params` (a pytree of jax.ShapeDtypeStruct with shardings)
  the arrays are restored with those shardings; without, on one local device
  (whatever the topology the checkpoint was written on).
  """
  step = resolve_step(workdir, step)
  if abstract_params is None:
    abstract_params = abstract_params_from_checkpoint(workdir, step)
  mngr = manager(workdir, create=False)
  restored = mngr.restore(step, args=ocp.args.Composite(
      params=ocp.args.StandardRestore(abstract_params)))
  return restored['params'], step


def eval_results_path(workdir: str, step: int, split: str, ext: str = 'json') -> str:
  return join(checkpoint_dir(workdir), f'eval_{step}_{split}.{ext}')
