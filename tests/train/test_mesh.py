"""Mesh axes and sharding rules as pure functions; their errors from the command line, before any work."""
import os
import subprocess
import sys
import textwrap

import pytest

from vvt.config import loader as config_lib
from vvt.config import sharding
from vvt.config.errors import ConfigError
from vvt.train import checkpoints, mesh as mesh_lib

import train_helpers

TINY = train_helpers.TINY


def load(*overrides, spec=f'{TINY}:unused'):
  return config_lib.load(spec, [tuple(o.split('=', 1)) for o in overrides], files=(), init=False)


# ----------------------------------------------------------------------------- axes


def test_axes_fill_the_rest_and_add_missing_axes_of_size_one():
  assert sharding.resolve_axes({'data': -1, 'fsdp': 8}, 32) == (('data', 4), ('fsdp', 8), ('model', 1))
  assert sharding.resolve_axes((('fsdp', 4), ('model', 2)), 8) == (('fsdp', 4), ('model', 2), ('data', 1))
  assert sharding.resolve_axes(None, 8) == (('data', 8), ('fsdp', 1), ('model', 1))
  assert sharding.data_size(sharding.resolve_axes({'data': 2, 'fsdp': 2, 'model': 2}, 8)) == 4


@pytest.mark.parametrize('axes, devices, message', [
    ({'data': 3, 'fsdp': -1}, 8, 'the fixed axes (3 devices) do not divide the 8 devices'),
    ({'data': 2, 'fsdp': 2}, 8, 'needs 4 devices, but the mesh has 8'),
    ({'data': -1, 'fsdp': -1}, 8, 'at most one axis may be -1'),
    ({'tensor': 2}, 8, "unknown axis 'tensor'"),
    ({'data': 0}, 8, 'must be a positive integer or -1'),
])
def test_bad_axes_are_one_line_errors(axes, devices, message):
  with pytest.raises(ConfigError, match=message.replace('(', r'\(').replace(')', r'\)')):
    sharding.resolve_axes(axes, devices)


def test_make_mesh_has_every_axis_and_the_batch_over_the_data_like_ones():
  mesh = mesh_lib.make_mesh(load().mesh)
  assert mesh.axis_names == ('data', 'fsdp', 'model') and mesh.devices.size == 1
  assert tuple(mesh_lib.batch_sharding(mesh).spec) == (('data', 'fsdp'),)
  assert mesh_lib.make_mesh().axis_names == ('data', 'fsdp', 'model')  # default: one data axis


# ----------------------------------------------------------------------------- rules


SHAPES = {
    'embedding/conv/kernel': (2, 16, 16, 3, 768),
    'encoder/layers/block_0/space_attention/query/kernel': (768, 12, 64),
    'encoder/layers/block_0/space_attention/query/bias': (12, 64),
    'encoder/layers/block_0/space_attention/out/kernel': (12, 64, 768),
    'encoder/layers/block_0/mlp/Dense_0/kernel': (768, 3072),
    'encoder/layers/block_0/mlp/Dense_1/kernel': (3072, 768),
    'encoder/layers/block_0/mlp_norm/scale': (768,),
    'head/output_projection/kernel': (768, 400),
}


def test_default_fsdp_shards_the_largest_divisible_dimension_and_replicates_small_ones():
  specs = sharding.param_specs(SHAPES, {'data': 4, 'fsdp': 8, 'model': 1})
  assert specs['encoder/layers/block_0/mlp/Dense_0/kernel'] == (None, 'fsdp')
  assert specs['encoder/layers/block_0/mlp/Dense_1/kernel'] == ('fsdp', None)
  assert specs['embedding/conv/kernel'] == (None, None, None, None, 'fsdp')
  assert specs['encoder/layers/block_0/space_attention/query/kernel'] == ('fsdp', None, None)
  assert specs['head/output_projection/kernel'] == ('fsdp', None)  # 768 divides by 8, 400 too: larger wins
  assert specs['encoder/layers/block_0/mlp_norm/scale'] == (None,)  # below fsdp_min_size
  assert specs['encoder/layers/block_0/space_attention/query/bias'] == (None, None)
  # 12 heads do not divide by fsdp=5, 64 does not either: the 768 input dimension does not -> replicated
  assert sharding.param_specs(SHAPES, {'fsdp': 5})['encoder/layers/block_0/space_attention/query/kernel'] \
      == (None, None, None)
  assert all(all(e is None for e in s) for s in sharding.param_specs(SHAPES, {'data': 8}).values())


def test_model_axis_splits_heads_and_mlp_units_then_fsdp_takes_another_dimension():
  specs = sharding.param_specs(SHAPES, {'data': 1, 'fsdp': 2, 'model': 4})
  assert specs['encoder/layers/block_0/space_attention/query/kernel'] == ('fsdp', 'model', None)
  assert specs['encoder/layers/block_0/space_attention/query/bias'] == ('model', None)
  assert specs['encoder/layers/block_0/space_attention/out/kernel'] == ('model', None, 'fsdp')
  assert specs['encoder/layers/block_0/mlp/Dense_0/kernel'] == ('fsdp', 'model')
  assert specs['encoder/layers/block_0/mlp/Dense_1/kernel'] == ('model', 'fsdp')


def test_user_rules_come_first_and_the_optimiser_state_follows_its_parameter():
  rules = ((r'^head/', 'replicate'), (r'mlp/Dense_1/kernel', (None, ('fsdp', 'model'))),
           (r'mlp_norm', 'fsdp'))
  specs = sharding.param_specs(SHAPES, {'fsdp': 4, 'model': 2}, rules)
  assert specs['head/output_projection/kernel'] == ()
  assert specs['encoder/layers/block_0/mlp/Dense_1/kernel'] == (None, ('fsdp', 'model'))
  assert specs['encoder/layers/block_0/mlp_norm/scale'] == ('fsdp',)  # 'fsdp' ignores the minimum
  path = 'opt_state/0/trace/encoder/layers/block_0/mlp/Dense_1/kernel'
  assert sharding.follow(path, 2, specs) == (None, ('fsdp', 'model'))
  assert sharding.follow('opt_state/1/count', 0, specs) == ()


def test_stacked_layers_shard_like_one_layer_and_keep_the_layer_axis_whole():
  """`model.scan_layers`: leaves (L, *shape) under `blocks/block/` get one layer's spec after an unsharded L."""
  layers = 32  # divisible by fsdp=8 and the largest dimension of the norm stack: still never sharded
  stacked = {k.replace('block_0', 'blocks/block'): (layers,) + s for k, s in SHAPES.items() if 'block_0' in k}
  for sizes in ({'data': 4, 'fsdp': 8, 'model': 1}, {'data': 1, 'fsdp': 2, 'model': 4}):
    per_layer = sharding.param_specs(SHAPES, sizes)
    specs = sharding.param_specs(stacked, sizes)
    for path, spec in specs.items():
      assert spec == (None,) + per_layer[path.replace('blocks/block', 'block_0')], (path, spec, sizes)
  # the whole stack counts towards fsdp_min_size: 32 x 768 norm scales = 24576 elements
  specs = sharding.param_specs(stacked, {'fsdp': 8}, min_size=20000)
  assert specs['encoder/layers/blocks/block/mlp_norm/scale'] == (None, 'fsdp')
  # so do `mesh.rules`: written for one layer's shape, the same rules give each layout the same sharding
  sizes = {'data': 1, 'fsdp': 2, 'model': 4}
  rules = ((r'mlp/Dense_0/kernel', (None, 'model')), (r'mlp/Dense_1/kernel', 'fsdp'), (r'norm', 'replicate'))
  per_layer = sharding.param_specs(SHAPES, sizes, rules)
  specs = sharding.param_specs(stacked, sizes, rules)
  assert specs['encoder/layers/blocks/block/mlp/Dense_0/kernel'] == (None, None, 'model')
  for path, spec in specs.items():
    assert spec == ((None,) + per_layer[path.replace('blocks/block', 'block_0')] if spec else ()), path
  with pytest.raises(ConfigError, match=r'has 3 entries but .* per layer'):
    sharding.param_specs(stacked, sizes, ((r'mlp/Dense_0/kernel', (None, None, 'model')),))


@pytest.mark.parametrize('rules, message', [
    (((r'attention/qkv', 'replicate'),), r"mesh.rules\[0\] 'attention/qkv' matches no parameter"),
    (((r'Dense_0/kernel', ('fsdp', 'fsdp', None)),), r'mesh.rules\[0\]: spec .* has 3 entries'),
    (((r'output_projection/kernel', (None, 'model')),), r'mesh.rules\[0\]: spec .* does not divide'),
    (((r'head', ('tensor',)),), r"names unknown axis 'tensor'"),
    (((r'(', 'replicate'),), r'mesh.rules\[0\]: bad regex'),
    ((r'head',), r'mesh.rules\[0\] must be a \(regex, spec\) pair'),
])
def test_bad_rules_are_one_line_errors_naming_the_rule(rules, message):
  with pytest.raises(ConfigError, match=message):
    sharding.param_specs(SHAPES, {'fsdp': 2, 'model': 3}, rules)


# ----------------------------------------------------------------------------- the command line


def test_mesh_fields_from_the_command_line():
  c = load("mesh.axes={'data': -1, 'fsdp': 4}", "mesh.rules=(('head/', 'replicate'),)",
           'mesh.fsdp_min_size=1024')
  assert sharding.axes_of(c.mesh.axes) == (('data', -1), ('fsdp', 4))
  assert tuple(c.mesh.rules) == (('head/', 'replicate'),) and c.mesh.fsdp_min_size == 1024
  c = load("mesh.axes=(('fsdp', 2), ('model', 2))")
  assert sharding.axes_of(c.mesh.axes) == (('fsdp', 2), ('model', 2))


@pytest.mark.parametrize('overrides, message', [
    (("mesh.axes={'data': -1, 'fsdp': 3}",), 'batch_size/accumulation_steps=8 is not divisible by the 3 '
                                             'batch shards of the data axes of the mesh (fsdp=3)'),
    (("mesh.axes={'fsdp': 4}", 'eval.batch_size=6'), 'eval.batch_size=6 must be a multiple of the 4'),
    (("mesh.axes={'dta': -1}",), "unknown axis 'dta'"),
    (("mesh.rules=(('head', 'shard'),)",), "names unknown axis 'shard'"),
    (('mesh.fsdp_min_size=0',), 'mesh.fsdp_min_size must be positive'),
])
def test_bad_mesh_configs_fail_when_loaded(overrides, message):
  with pytest.raises(ConfigError) as e:
    load(*overrides)
  assert message in str(e.value)


def test_a_mesh_that_does_not_divide_the_devices_fails_before_compiling():
  from vvt.config import validation  # pylint: disable=g-import-not-at-top
  c = load("mesh.axes={'data': 2, 'fsdp': 4}")
  with pytest.raises(ConfigError, match='needs 8 devices, but the mesh has 1'):
    validation.validate(c, 1)


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
  from vvt.models import axes  # pylint: disable=g-import-not-at-top
  assert mesh_lib.batch_spec(mesh_lib.make_mesh())[0] == axes.BATCH_AXES == ('data', 'fsdp')  # the trainer's
  code = textwrap.dedent("""
      import jax, jax.numpy as jnp
      from vvt.models import blocks
      from vvt.train import mesh as mesh_lib
      mesh = mesh_lib.make_mesh({'axes': {'data': 2, 'fsdp': -1}})
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
