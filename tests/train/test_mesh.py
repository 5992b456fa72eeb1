"""The device mesh of a run config, the batch sharding under it, and the workdir's paths (the axes and rules as
pure functions: tests/config/test_sharding_rules.py)."""
import os
import subprocess
import sys
import textwrap

import train_helpers

from vvt.config import loader as config_lib
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
  On 4 forced host devices, in a subprocess."""
  from vvt.models import axes
  assert mesh_lib.batch_spec(mesh_lib.make_mesh())[0] == axes.BATCH_AXES == ('data', 'fsdp')  # the trainer's
  code = textwrap.dedent("""
      import jax, jax.numpy as jnp
      from vvt.models import blocks
      from vvt.train import mesh as mesh_lib
      mesh = mesh_lib.mesh_of_axes({'data': 2, 'fsdp': -1})
      x = jnp.ones((8, 3))
      print('none', 'sharding_constraint' in jax.jit(blocks.constrain_batch).lower(x).as_text())
      with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
        text = jax.jit(blocks.constrain_batch).lower(x).as_text()
        odd = jax.jit(blocks.constrain_batch).lower(jnp.ones((6, 3))).as_text()
      print('mesh', 'sharding_constraint' in text and '[{"data", "fsdp"}, {}]' in text)
      print('odd', 'sharding_constraint' in odd)
  """)
  env = dict(os.environ, XLA_FLAGS='--xla_force_host_platform_device_count=4', JAX_PLATFORMS='cpu')
  res = subprocess.run([sys.executable, '-c', code], cwd=str(train_helpers.REPO), env=env, capture_output=True,
                       text=True, timeout=300)
  assert res.stdout.split() == ['none', 'False', 'mesh', 'True', 'odd', 'False'], res.stdout + res.stderr
