"""`config.mesh.logical_rules`: the run's mapping of the models' logical axes to mesh axes decides the batch's
sharding, the tensor-parallel specs and what the steps shard when traced; bad rules are one-line errors."""
import json
import subprocess

import jax
import pytest

import train_helpers
from vvt.cli import config as config_lib
from vvt.config import run_file
from vvt.models import axes
from vvt.train import sharding, steps, validation
from vvt.train.defaults import ConfigError

HELPER = str(train_helpers.REPO / 'tests' / 'train' / 'logical_rules_run.py')
NO_TENSOR_PARALLEL = (('batch', ('data',)), ('heads', ()), ('mlp', ()))


def load(*overrides, spec=f'{train_helpers.TINY}:unused'):
  return config_lib.load(spec, [tuple(o.split('=', 1)) for o in overrides], files=(), init=False)


def _run(out, *rules):
  proc = subprocess.run([train_helpers.PY, HELPER, str(out), *map(repr, rules)], cwd=train_helpers.REPO,
                        env=train_helpers.env(devices=8), capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return json.loads(out.read_text())


def test_the_runs_rules_decide_the_batch_and_the_tensor_parallel_shardings(tmp_path):
  """On 8 forced host devices, a data=2 x fsdp=2 x model=2 mesh: by default the q/k/v kernels are split over
  `model` and the batch over `data` and `fsdp`; with heads and MLP units mapped to () and the batch to `data` the
  kernels are replicated and nothing in the traced train or eval step (scanned blocks included) shards over
  `fsdp` and `data` together. One train step gives the same loss either way."""
  default = _run(tmp_path / 'default.json')
  assert default['query_spec'] == "P(None, None, 'model', None)"
  assert default['batch_spec'] == "P(('data', 'fsdp'),)"
  assert default['data_fsdp_in_train'] and default['data_fsdp_in_eval'] and default['model_in_train']
  custom = _run(tmp_path / 'custom.json', NO_TENSOR_PARALLEL)
  assert custom['query_spec'] == 'P(None, None, None, None)'
  assert custom['batch_spec'] == "P('data',)"
  assert not (custom['data_fsdp_in_train'] or custom['data_fsdp_in_eval'] or custom['model_in_train'])
  assert custom['loss'] == pytest.approx(default['loss'], rel=1e-5)  # two shardings of one loss: > 10x margin


# ----------------------------------------------------------------------------- specs and the batch, without JAX


SHAPES = {
    'encoder/layers/block_0/space_attention/query/kernel': (768, 12, 64),
    'encoder/layers/block_0/space_attention/out/kernel': (12, 64, 768),
    'encoder/layers/block_0/mlp/Dense_0/kernel': (768, 3072),
    'encoder/layers/block_0/mlp/Dense_1/kernel': (3072, 768),
}


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
  assert sharding.data_axes(rules) == ('data',) and sharding.data_axes() == sharding.DATA_AXES
  assert sharding.data_size((('data', 2), ('fsdp', 4)), rules) == 2
  assert sharding.tensor_parallel() == sharding.TENSOR_PARALLEL


def test_the_settings_of_a_config_carry_its_rules():
  c = load("mesh.logical_rules=(('batch', ('data',)), ('heads', ()), ('mlp', ()))")
  assert steps.TrainSettings.of(c).logical_rules == steps.EvalSettings.of(c).logical_rules == (
      sharding.check_logical_rules(NO_TENSOR_PARALLEL))
  assert steps.TrainSettings.of(load()).logical_rules == axes.DEFAULT_RULES
  saved = run_file.as_saved(c)  # config.json: the lists read back as tuples, the same rules
  assert sharding.logical_rules_of(saved.mesh) == sharding.logical_rules_of(c.mesh)


def test_traced_under_enters_the_rules_when_jax_traces():
  """The rules active when a step is wrapped (or those given) are active at its trace, called outside them."""
  seen = []

  def step(x):
    seen.append(axes.active_rules())
    return x

  mesh = jax.sharding.Mesh(jax.devices()[:1], ('data',))
  given = axes.with_defaults(NO_TENSOR_PARALLEL)
  jax.jit(steps.traced_under(mesh, given)(step))(1.0)
  with axes.axis_rules((('batch', ()),)):
    wrapped = steps.traced_under(mesh)(step)
  jax.jit(wrapped)(2.0)
  assert seen == [given, axes.with_defaults((('batch', ()),))]
  assert axes.active_rules() == axes.DEFAULT_RULES


# ----------------------------------------------------------------------------- the command line


def test_the_batch_divisibility_check_follows_the_batch_rule():
  with pytest.raises(ConfigError, match='is not divisible by the 6 batch shards'):
    load("mesh.axes={'data': 2, 'fsdp': 3}")
  c = load("mesh.axes={'data': 2, 'fsdp': 3}", "mesh.logical_rules=(('batch', ('data',)),)")
  validation.validate(c, 6)  # the batch over data=2 only: 8 divides


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
