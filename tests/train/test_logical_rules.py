"""`config.mesh.logical_rules`: the run's mapping of the models' logical axes to mesh axes decides the batch's
sharding, the tensor-parallel specs and what the steps shard when traced (the rules as pure functions and their
errors: tests/config/test_sharding_rules.py)."""
import json
import subprocess

import jax
import pytest
import train_helpers

from tests.command_output import HANG_S
from vvt.config import loader as config_lib
from vvt.config import run_file
from vvt.config import run_spec
from vvt.config import sharding
from vvt.models import axes
from vvt.train import steps

HELPER = str(train_helpers.REPO / 'tests' / 'train' / 'logical_rules_run.py')
NO_TENSOR_PARALLEL = (('batch', ('data',)), ('heads', ()), ('mlp', ()))


def load(*overrides, spec=f'{train_helpers.TINY}:unused'):
  return config_lib.load(spec, [tuple(o.split('=', 1)) for o in overrides], files=(), init=False)


def _run(*runs):
  """The helper's results for each (out_json, logical_rules) of `runs`, all in one process of 8 host devices."""
  proc = subprocess.run([train_helpers.PY, HELPER, *(a for out, rules in runs for a in (str(out), repr(rules)))],
                        cwd=train_helpers.REPO, env=train_helpers.env(devices=8), capture_output=True, text=True,
                        timeout=HANG_S)
  assert proc.returncode == 0, proc.stderr[-4000:]
  return [json.loads(out.read_text()) for out, _ in runs]


def test_the_runs_rules_decide_the_batch_and_the_tensor_parallel_shardings(tmp_path):
  """On 8 forced host devices, a data=2 x fsdp=2 x model=2 mesh: by default the q/k/v kernels are split over
  `model` and the batch over `data` and `fsdp`; with heads and MLP units mapped to () and the batch to `data` the
  kernels are replicated and nothing in the traced train or eval step (scanned blocks included) shards over
  `fsdp` and `data` together. One train step gives the same loss either way."""
  default, custom = _run((tmp_path / 'default.json', None), (tmp_path / 'custom.json', NO_TENSOR_PARALLEL))
  assert default['query_spec'] == "P(None, None, 'model', None)"
  assert default['batch_spec'] == "P(('data', 'fsdp'),)"
  assert default['data_fsdp_in_train'] and default['data_fsdp_in_eval'] and default['model_in_train']
  assert custom['query_spec'] == 'P(None, None, None, None)'
  assert custom['batch_spec'] == "P('data',)"
  assert not (custom['data_fsdp_in_train'] or custom['data_fsdp_in_eval'] or custom['model_in_train'])
  assert custom['loss'] == pytest.approx(default['loss'], rel=1e-5)  # two shardings of one loss: > 10x margin


# ----------------------------------------------------------------------------- the steps' rules


def test_the_settings_of_a_config_carry_its_rules():
  c = load("mesh.logical_rules=(('batch', ('data',)), ('heads', ()), ('mlp', ()))")
  run = run_spec.resolve(c)
  assert steps.TrainSettings.of(run).logical_rules == steps.EvalSettings.of(run).logical_rules == (
      sharding.check_logical_rules(NO_TENSOR_PARALLEL)) == run.mesh.logical_rules
  assert steps.TrainSettings.of(run_spec.resolve(load())).logical_rules == axes.DEFAULT_RULES
  saved = run_file.as_saved(c)  # config.json: the lists read back as tuples, the same rules
  assert sharding.mesh_spec(saved.mesh) == run.mesh


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
