"""Fault class 5: damaged checkpoints.

A real run (`vvt train`, tiny config, checkpoints at steps 4 and 8) is copied and its newest step is
damaged on disk in each of the ways below. Each damage must be found when the step is loaded (every
file has its size and SHA-256 in checksums.json, written before the step commits), named as a file
in one line, with no fallback for an explicit `vvt eval --step 8`; "latest" falls back to step 4 (the
newest intact step) with a warning and loads exactly the step-4 arrays; `vvt eval` and a resumed
`vvt train` go on from step 4. Nothing is deleted: a resumed run moves the damaged step aside.
"""
import contextlib
import io
import json
import os
import pickle
import shutil
import sys
import tempfile
import threading

import chex
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'train'))
import train_helpers as common  # noqa: E402

from tests.cli.test_sweep import vvt_in_process  # noqa: E402
from vvt.cli import main as vvt_main  # noqa: E402
from vvt.train import checkpoints  # noqa: E402

GOOD, BAD = 4, 8
ARGS = common.ARGS_8_STEPS  # the shared run's (conftest.trained_8_steps)


def _copy(trained, dst):
  shutil.copytree(trained, dst)
  return str(dst)


def _step_dir(wd, step=BAD):
  return os.path.join(checkpoints.checkpoint_dir(wd), str(step))


def _biggest_array_file(wd, step=BAD):
  """The largest array data file of `params/` (an OCDBT data file)."""
  files = []
  for root, _, names in os.walk(os.path.join(_step_dir(wd, step), 'params')):
    files += [os.path.join(root, n) for n in names if os.sep + 'd' + os.sep in os.path.join(root, n)]
  return max(files, key=os.path.getsize)


def _other_run_params(wd, tmp_path):
  """params/ of another run whose arrays have other shapes (saved by the real save_params)."""
  params, _ = checkpoints.load_params(wd, GOOD)
  other = jax_tree_map(lambda x: np.zeros(tuple(s + 1 for s in x.shape), np.float32), params)
  out = str(tmp_path / 'other_run')
  checkpoints.save_params(out, other, step=BAD)
  return os.path.join(_step_dir(out), 'params')


def jax_tree_map(fn, tree):
  import jax
  return jax.tree.map(fn, tree)


# --------------------------------------------------------------------------------- the damage kinds
# Each returns the path that the one-line error must name.

def byte_flip(wd, tmp_path):
  path = _biggest_array_file(wd)
  with open(path, 'r+b') as f:
    f.seek(os.path.getsize(path) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x01]))
  return path


def truncated_array(wd, tmp_path):
  path = _biggest_array_file(wd)
  os.truncate(path, os.path.getsize(path) // 2)
  return path


def deleted_file(wd, tmp_path):
  path = _biggest_array_file(wd)
  os.remove(path)
  return path


def deleted_meta_dir(wd, tmp_path):
  path = os.path.join(_step_dir(wd), 'meta')
  shutil.rmtree(path)
  return path


def deleted_params_dir(wd, tmp_path):
  path = os.path.join(_step_dir(wd), 'params')
  shutil.rmtree(path)
  return path


def emptied_file(wd, tmp_path):
  path = _biggest_array_file(wd)
  open(path, 'w').close()
  return path


def garbage_meta_json(wd, tmp_path):
  path = os.path.join(_step_dir(wd), 'meta', 'metadata')
  with open(path, 'w') as f:
    f.write('{"kind": "train_state", "step": 8, "data_pos')
  return path


def half_written(wd, tmp_path):
  """A step directory whose write never committed: no checksums.json, no orbax commit marker."""
  os.remove(os.path.join(_step_dir(wd), checkpoints.MANIFEST))
  os.remove(os.path.join(_step_dir(wd), checkpoints.COMMIT_MARKER))
  return _step_dir(wd)


def read_denied(wd, tmp_path):
  path = _biggest_array_file(wd)
  os.chmod(path, 0)
  return path


def wrong_shape_from_other_run(wd, tmp_path):
  params = os.path.join(_step_dir(wd), 'params')
  src = _other_run_params(wd, tmp_path)
  shutil.rmtree(params)
  shutil.copytree(src, params)
  return params


def wrong_shape_rechecksummed(wd, tmp_path):
  """The same, with checksums.json rewritten to match: the shapes are what is wrong now."""
  params = wrong_shape_from_other_run(wd, tmp_path)
  checkpoints.write_manifest(_step_dir(wd))
  return params


def checksum_file_flipped(wd, tmp_path):
  path = os.path.join(_step_dir(wd), checkpoints.MANIFEST)
  text = open(path).read()
  i = text.index('"sha256": "') + len('"sha256": "')
  with open(path, 'w') as f:  # still valid JSON, one hex digit changed
    f.write(text[:i] + ('0' if text[i] != '0' else '1') + text[i + 1:])
  return path


def checksum_file_garbage(wd, tmp_path):
  path = os.path.join(_step_dir(wd), checkpoints.MANIFEST)
  os.truncate(path, os.path.getsize(path) // 3)
  return path


DAMAGE = [byte_flip, truncated_array, deleted_file, deleted_meta_dir, deleted_params_dir,
          emptied_file, garbage_meta_json, half_written, read_denied, wrong_shape_from_other_run,
          wrong_shape_rechecksummed, checksum_file_flipped, checksum_file_garbage]


def _as_nobody(fn):
  """Runs `fn()` in a forked child without root's override of file permissions -> its result."""
  r, w = os.pipe()
  pid = os.fork()
  if pid == 0:  # child
    os.close(r)
    try:
      os.setgid(65534)
      os.setuid(65534)
      out = ('ok', fn())
    except BaseException as e:
      out = ('raised', f'{type(e).__name__}: {e}')
    with os.fdopen(w, 'wb') as f:
      pickle.dump(out, f)
    os._exit(0)
  os.close(w)
  with os.fdopen(r, 'rb') as f:
    out = pickle.load(f)
  os.waitpid(pid, 0)
  return out


@pytest.mark.filterwarnings('ignore:os.fork')
@pytest.mark.parametrize('damage', DAMAGE, ids=lambda f: f.__name__)
def test_damage_is_named_and_latest_falls_back(trained, tmp_path, damage):
  if damage is read_denied and os.geteuid() == 0:  # root reads anything: check as nobody
    base = tempfile.mkdtemp(dir='/tmp')
    os.chmod(base, 0o755)
    wd = _copy(trained, os.path.join(base, 'run'))
  else:
    wd = _copy(trained, tmp_path / 'run')
  named = damage(wd, tmp_path)

  # what the model expects (vvt eval and resume load onto the model's abstract params)
  abstract = checkpoints.abstract_params_from_checkpoint(trained, GOOD)

  # the step itself: one error naming the file (verification, or the load for a consistent step)
  def check_bad():
    try:
      checkpoints.verify_step(wd, BAD)
      checkpoints.load_params(wd, BAD, abstract, verify=False)
    except checkpoints.CheckpointDamagedError as e:
      return str(e)
    return None

  def fallback():
    logs = []
    step, params, skipped = checkpoints.load_with_fallback(
        wd, lambda s: checkpoints.load_params(wd, s, abstract, verify=False)[0], log=logs.append)
    return step, skipped, logs, params

  if damage is read_denied and os.geteuid() == 0:
    kind, msg = _as_nobody(check_bad)
    assert kind == 'ok', msg
    kind, chosen = _as_nobody(lambda: checkpoints.verify_step(wd, GOOD))
    assert kind == 'ok', chosen
    assert 'PermissionError' in msg
  else:
    msg = check_bad()
    step, skipped, logs, params = fallback()
    assert (step, skipped) == (GOOD, [BAD])
    assert any(named in l and 'warning' in l for l in logs), logs
    assert any('falling back to step 4' in l for l in logs), logs
    ref, _ = checkpoints.load_params(trained, GOOD)
    chex.assert_trees_all_equal(params, ref)
  assert msg is not None, f'{damage.__name__}: the damaged step loaded'
  assert named in msg and '\n' not in msg, msg

  if damage is not read_denied:  # explicit --step: one line naming the file, exit 1, no fallback
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
      code = vvt_main(['eval', '--workdir', wd, '--step', str(BAD)])
    lines = err.getvalue().strip().splitlines()
    assert code == 1 and len(lines) == 1, err.getvalue()
    assert lines[0].startswith('vvt eval: error: damaged checkpoint file') and named in lines[0]
    assert 'Traceback' not in err.getvalue()
    assert not os.path.exists(checkpoints.eval_results_path(wd, GOOD, 'test'))
  assert sorted(os.listdir(checkpoints.checkpoint_dir(wd))) == sorted(
      os.listdir(checkpoints.checkpoint_dir(trained))), 'a load deleted something'


def test_intact_steps_verify_and_have_checksums_of_every_file(trained):
  """The control: both steps verify; checksums.json lists every file of params/, train/, meta/."""
  for step in (GOOD, BAD):
    checkpoints.verify_step(trained, step)
    manifest = json.load(open(os.path.join(_step_dir(trained, step), checkpoints.MANIFEST)))
    on_disk = {os.path.relpath(os.path.join(r, n), _step_dir(trained, step))
               for r, _, ns in os.walk(_step_dir(trained, step)) for n in ns}
    assert set(manifest['files']) == {f for f in on_disk if f.split(os.sep)[0] in
                                      ('params', 'train', 'meta')}


def test_eval_latest_of_a_byte_flipped_run_falls_back_with_a_warning(trained, tmp_path, capsys):
  """Before: the flipped step evaluated, exit 0, wrong numbers. Now: step 4 is evaluated."""
  wd = _copy(trained, tmp_path / 'run')
  named = byte_flip(wd, tmp_path)
  for name in os.listdir(checkpoints.checkpoint_dir(wd)):
    if name.startswith('eval_'):
      os.remove(os.path.join(checkpoints.checkpoint_dir(wd), name))
  proc = vvt_in_process(capsys, 'eval', '--workdir', wd)
  out = proc.stdout + proc.stderr
  assert proc.returncode == 0, out[-3000:]
  assert 'warning' in out and named in out and 'falling back to step 4' in out, out
  assert os.path.exists(checkpoints.eval_results_path(wd, GOOD, 'test'))
  assert not os.path.exists(checkpoints.eval_results_path(wd, BAD, 'test'))


def test_resume_falls_back_keeps_the_damaged_step_and_finishes(trained, tiny_data, tmp_path, capsys):
  wd = _copy(trained, tmp_path / 'run')
  named = truncated_array(wd, tmp_path)
  proc = vvt_in_process(capsys, 'train', '--config', f'{common.TINY}:{tiny_data}', '--workdir', wd, *ARGS)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert f'resumed from {checkpoints.checkpoint_dir(wd)}/{GOOD}' in proc.stdout, proc.stdout
  assert named in proc.stdout and 'falling back to step 4' in proc.stdout
  moved = os.path.join(wd, 'damaged_checkpoints', str(BAD))
  assert os.path.isdir(moved), 'the damaged step was not kept'
  assert checkpoints.all_steps(wd) == [GOOD, BAD]
  checkpoints.verify_step(wd, BAD)
  steps = [(r['kind'], r['step']) for r in map(json.loads, open(os.path.join(wd, 'metrics.jsonl')))]
  assert len(steps) == len(set(steps)), steps


def test_checksums_are_written_off_the_training_thread(tmp_path, monkeypatch):
  """An asynchronous save returns before checksums.json exists; the callback runs in orbax's
  background thread, after the arrays are final and before the step is committed."""
  import jax
  import jax.numpy as jnp
  seen, release = [], threading.Event()
  real = checkpoints.write_manifest

  def slow_manifest(step_dir):
    seen.append((threading.current_thread() is threading.main_thread(), str(step_dir),
                 os.path.exists(os.path.join(str(step_dir), 'params'))))
    release.wait(30)
    return real(step_dir)
  monkeypatch.setattr(checkpoints, 'write_manifest', slow_manifest)

  class State:  # what save_state reads of a TrainState
    step = jnp.int32(3)
    params = {'w': jnp.ones((64, 64))}
    opt_state = {'m': jnp.zeros((64, 64))}
    rng = jax.random.PRNGKey(0)
  mngr = checkpoints.manager(str(tmp_path), async_save=True)
  checkpoints.save_state(mngr, State(), data_position=3, wait=False)
  assert not os.path.exists(_step_dir(str(tmp_path), 3)), 'the save blocked until its commit'
  release.set()
  mngr.wait_until_finished()
  assert len(seen) == 1 and seen[0][0] is False and 'orbax-checkpoint-tmp' in seen[0][1] and seen[0][2]
  checkpoints.verify_step(str(tmp_path), 3)
  mngr.close()
