"""The device mesh of a run config, the batch sharding under it, and the workdir's paths (the axes and rules as
pure functions: tests/config/test_sharding_rules.py)."""
import jax
import jax.numpy as jnp
import train_helpers

from vvt.config import loader as config_lib
from vvt.config import sharding
from vvt.models import axes
from vvt.models import blocks
from vvt.train import checkpoints
from vvt.train import mesh as mesh_lib

TINY = train_helpers.TINY


def load(*overrides, spec=f'{TINY}:unused'):
  return config_lib.load_run(spec, [tuple(o.split('=', 1)) for o in overrides], files=(), init=False)


# ----------------------------------------------------------------------------- mesh


def test_make_mesh_has_every_axis_and_the_batch_over_the_data_like_ones():
  mesh = mesh_lib.make_mesh(load().mesh)
  assert mesh.axis_names == ('data', 'fsdp', 'model') and mesh.devices.size == 1
  assert tuple(mesh_lib.batch_sharding(mesh).spec) == (('data', 'fsdp'),)
  assert mesh_lib.make_mesh().axis_names == ('data', 'fsdp', 'model')  # default: one data axis


# ----------------------------------------------------------------------------- workdir paths


def test_workdir_urls_keep_their_scheme():
  assert checkpoints.abspath('gs://bucket/runs/a/') == 'gs://bucket/runs/a'
  assert checkpoints.checkpoint_dir('gs://bucket/runs/a') == 'gs://bucket/runs/a/checkpoints'
  assert checkpoints.eval_results_path('gs://b/r', 4, 'test') == 'gs://b/r/checkpoints/eval_4_test.json'
  assert checkpoints.join('gs://b/r', 'x', 3) == 'gs://b/r/x/3'
  assert checkpoints.abspath('runs/x').startswith('/')


def test_scanned_layers_keep_the_batch_sharded_under_the_steps_mesh():
  """`vvt.models.blocks.constrain_batch`: the batch axis over the mesh's data-like axes when traced under a mesh
  (the train / eval steps trace under theirs), a no-op without one; its axis names are the trainer's.
  Under the abstract mesh of `{'data': 2, 'fsdp': -1}` on 4 devices (sized as the trainer sizes it): lowering needs
  no devices, so this process's one does."""
  assert mesh_lib.batch_spec(mesh_lib.make_mesh())[0] == axes.BATCH_AXES == ('data', 'fsdp')  # the trainer's
  names, shape = zip(*sharding.resolve_axes({'data': 2, 'fsdp': -1}, 4), strict=True)
  assert dict(zip(names, shape, strict=True)) == {'data': 2, 'fsdp': 2, 'model': 1}
  mesh = jax.sharding.AbstractMesh(shape, names, axis_types=(jax.sharding.AxisType.Auto,) * len(names))
  x = jnp.ones((8, 3))
  assert 'sharding_constraint' not in jax.jit(blocks.constrain_batch).lower(x).as_text()
  with jax.sharding.use_abstract_mesh(mesh):
    text = jax.jit(blocks.constrain_batch).lower(x).as_text()
    odd = jax.jit(blocks.constrain_batch).lower(jnp.ones((6, 3))).as_text()
  assert 'sharding_constraint' in text and '[{"data", "fsdp"}, {}]' in text, text
  assert 'sharding_constraint' not in odd, odd  # 6 rows do not divide over 4 devices: left as they are
