"""The models' logical axis names and the one rules table that maps them to mesh axes."""

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
  """No mesh: nothing; under the trainer's (data 2, model 2) mesh (its axes as `mesh_of_axes` resolves them for
  4 devices; tracing needs no devices): batch over data, heads over model where they divide."""
  import jax
  assert axes.traced_axes('batch', 8) == ()
  pairs = sharding.resolve_axes({'data': 2, 'model': 2}, 4)
  mesh = jax.sharding.AbstractMesh(tuple(v for _, v in pairs), tuple(k for k, _ in pairs),
                                   axis_types=(jax.sharding.AxisType.Auto,) * len(pairs))
  with jax.sharding.use_abstract_mesh(mesh):
    got = (axes.traced_axes('batch', 8), axes.traced_axes('batch', 3), axes.traced_axes('heads', 4),
           axes.traced_axes('mlp', 5))
  assert got == (('data',), (), ('model',), ())


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
