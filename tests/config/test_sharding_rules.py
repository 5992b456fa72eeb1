"""`config.mesh` without JAX (vvt.config.sharding): the mesh axes, the logical axis rules, the sharding rules
and each parameter's partition spec as pure functions, and their errors, one line naming the field, when a config
loads or is validated (vvt.config.validation)."""
import sys

import pytest

from tests.conftest import REPO
from vvt.config import loader as config_lib
from vvt.config import run_spec
from vvt.config import sharding
from vvt.config import validation
from vvt.config.errors import ConfigError
from vvt.models import axes

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import train_helpers  # noqa: E402

NO_TENSOR_PARALLEL = (('batch', ('data',)), ('heads', ()), ('mlp', ()))


def load(*overrides, spec=f'{train_helpers.TINY}:unused'):
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


# ----------------------------------------------------------------------------- logical axis rules


def test_param_specs_follow_the_logical_rules():
  sizes = {'data': 1, 'fsdp': 2, 'model': 4}
  default = sharding.param_specs(SHAPES, sizes)
  assert default == sharding.param_specs(SHAPES, sizes, logical_rules=axes.DEFAULT_RULES)
  assert default['encoder/layers/block_0/space_attention/query/kernel'] == ('fsdp', 'model', None)
  off = sharding.param_specs(SHAPES, sizes, logical_rules=sharding.check_logical_rules(NO_TENSOR_PARALLEL))
  assert off['encoder/layers/block_0/space_attention/query/kernel'] == ('fsdp', None, None)  # FSDP only
  assert off['encoder/layers/block_0/mlp/Dense_0/kernel'] == (None, 'fsdp')
  # MLP units over fsdp: the tensor-parallel spec takes the fsdp axis, FSDP adds it nowhere else
  mlp_fsdp = sharding.param_specs(SHAPES, sizes, logical_rules=sharding.check_logical_rules((('mlp', 'fsdp'),)))
  assert mlp_fsdp['encoder/layers/block_0/mlp/Dense_0/kernel'] == (None, 'fsdp')
  assert mlp_fsdp['encoder/layers/block_0/mlp/Dense_1/kernel'] == ('fsdp', None)


def test_rules_not_given_keep_the_models_defaults():
  rules = sharding.check_logical_rules([['batch', 'data'], ['embed', ['fsdp']]])  # config.json gives lists
  assert dict(rules) == {'batch': ('data',), 'heads': ('model',), 'mlp': ('model',), 'head_dim': (),
                         'embed': ('fsdp',)}
  assert sharding.check_logical_rules(None) == sharding.check_logical_rules(()) == axes.DEFAULT_RULES
  assert axes.batch_axes(rules) == ('data',) and axes.batch_axes() == axes.BATCH_AXES
  assert sharding.data_size((('data', 2), ('fsdp', 4)), rules) == 2
  assert sharding.tensor_parallel() == sharding.TENSOR_PARALLEL


# ----------------------------------------------------------------------------- loading and validating a config


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
  c = load("mesh.axes={'data': 2, 'fsdp': 4}")
  with pytest.raises(ConfigError, match='needs 8 devices, but the mesh has 1'):
    validation.validate(c, 1)
  run = run_spec.resolve(c)  # the trainer's check, once the devices are known
  with pytest.raises(ConfigError, match='needs 8 devices, but the mesh has 1'):
    run_spec.check_devices(run, 1)
  run_spec.check_devices(run, 8)
  with pytest.raises(ConfigError) as e:  # every problem at once, one line each
    run_spec.check_devices(run, 8, num_processes=3)
  assert e.value.problems == ('batch_size=8 must be divisible by the 3 processes',
                              'eval.batch_size=16 must be divisible by the 3 processes')


def test_the_batch_divisibility_check_follows_the_batch_rule():
  with pytest.raises(ConfigError, match='is not divisible by the 6 batch shards'):
    load("mesh.axes={'data': 2, 'fsdp': 3}")
  c = load("mesh.axes={'data': 2, 'fsdp': 3}", "mesh.logical_rules=(('batch', ('data',)),)")
  validation.validate(c, 6)  # the batch over data=2 only: 8 divides
  run_spec.check_devices(run_spec.resolve(c), 6)
  c = load("mesh.axes={'data': -1}")
  with pytest.raises(ConfigError, match='is not divisible by the 3 batch shards'):
    run_spec.check_devices(run_spec.resolve(c), 3)  # -1: the rest, known with the devices


@pytest.mark.parametrize('rules, message', [
    ("(('batches', ('data',)),)", "mesh.logical_rules[0]: unknown logical axis 'batches' (did you mean batch?)"),
    ("(('heads', ()), ('mlp', ('tensor',)))", "mesh.logical_rules[1]: unknown mesh axis 'tensor' for 'mlp'"),
    ("(('heads',),)", 'mesh.logical_rules[0] must be a (logical name, mesh axes) pair'),
    ("('heads', 'model')", 'mesh.logical_rules[0] must be a (logical name, mesh axes) pair'),
    ("(('mlp', 3),)", "mesh.logical_rules[0]: the mesh axes of 'mlp' must be a tuple of axis names"),
    ("(('batch', ('data', 'data')),)", "mesh.logical_rules[0]: 'batch' names a mesh axis twice"),
    ("(('mlp', ()), ('mlp', ('model',)))", "mesh.logical_rules[1]: 'mlp' is given twice"),
    ("(('head_dim', ('model',)),)", "mesh.logical_rules[0]: 'heads' and 'head_dim' would both be sharded over "
                                    "mesh axis 'model'"),
    ("(('heads', ('fsdp',)),)", "mesh.logical_rules[0]: 'batch' and 'heads' would both be sharded over mesh "
                                "axis 'fsdp'"),
    ("'batch'", 'mesh.logical_rules must be (logical name, mesh axes) pairs'),
])
def test_bad_logical_rules_are_one_line_errors_naming_the_entry(rules, message):
  with pytest.raises(ConfigError) as e:
    load(f'mesh.logical_rules={rules}')
  assert message in str(e.value) and '\n' not in str(e.value)
