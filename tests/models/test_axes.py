"""The models' logical axis names and the one rules table that maps them to mesh axes."""
import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO
from vvt.config import sharding
from vvt.models import axes


def test_the_trainers_axes_are_the_rules():
  assert axes.BATCH_AXES == axes.batch_axes() == ('data', 'fsdp')
  assert tuple((p, axes.mesh_spec(names)) for p, names in axes.PARAM_AXES) == sharding.TENSOR_PARALLEL


def test_mesh_spec_follows_the_rules():
  assert axes.mesh_spec(('batch', 'embed', 'heads')) == (('data', 'fsdp'), None, 'model')
  rules = (('batch', ('data',)), ('heads', ()), ('mlp', ('model', 'fsdp')))
  assert axes.mesh_spec(('batch', 'heads', 'mlp'), rules) == ('data', None, ('model', 'fsdp'))


def test_traced_axes_follow_the_mesh_the_caller_is_traced_under():
  """No mesh: nothing; under a (data 2, model 2) mesh: batch over data, heads over model where they divide."""
  assert axes.traced_axes('batch', 8) == ()
  code = textwrap.dedent("""
      import jax
      from vvt.models import axes
      from vvt.train import mesh as mesh_lib
      mesh = mesh_lib.mesh_of_axes({'data': 2, 'model': 2})
      with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
        print(axes.traced_axes('batch', 8), axes.traced_axes('batch', 3), axes.traced_axes('heads', 4),
              axes.traced_axes('mlp', 5))
  """)
  env = dict(os.environ, XLA_FLAGS='--xla_force_host_platform_device_count=4', JAX_PLATFORMS='cpu')
  res = subprocess.run([sys.executable, '-c', code], cwd=str(REPO), env=env, capture_output=True, text=True,
                       timeout=300)
  assert res.stdout.split() == ["('data',)", '()', "('model',)", '()'], res.stdout + res.stderr[-2000:]


def test_axis_rules_context_decides_what_the_traced_model_shards():
  """`axis_rules` (names not given keep DEFAULT_RULES) is read by traced_axes / mesh_axes / mesh_spec; nested
  contexts restore the outer rules on exit."""
  import jax
  mesh = jax.sharding.AbstractMesh((2, 2, 2), ('data', 'fsdp', 'model'))
  with jax.sharding.use_abstract_mesh(mesh):
    assert (axes.traced_axes('batch', 8), axes.traced_axes('heads', 4)) == (('data', 'fsdp'), ('model',))
    with axes.axis_rules((('batch', ('data',)), ('heads', ()))):
      assert (axes.traced_axes('batch', 8), axes.traced_axes('heads', 4)) == (('data',), ())
      assert axes.mesh_spec(('batch', 'heads', 'mlp')) == ('data', None, 'model')
      with axes.axis_rules(None):
        assert axes.active_rules() == axes.DEFAULT_RULES
      assert axes.mesh_axes('batch') == ('data',)
    assert axes.active_rules() == axes.DEFAULT_RULES and axes.mesh_axes('batch') == axes.BATCH_AXES
