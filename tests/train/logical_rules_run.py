"""Subprocess helper for test_logical_rules (8 forced host devices): one program under a run's logical axis rules.

argv: out_json logical_rules [out_json logical_rules ...]: pairs, one program each, one after another in this one
process (one start-up for all); the rules as a Python literal, None for the models' defaults. Builds the program of
the tiny config (scanned layers, so that the blocks constrain the batch when traced) on a `data=2, fsdp=2, model=2` mesh
and writes: the q kernel's and the batch's partition specs, whether the lowered train and eval steps shard
anything over `data` and `fsdp` together or over `model`, and the loss of one train step.
"""
import ast
import json
import sys

import jax
import numpy as np

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import train_helpers  # noqa: E402

from vvt.config import run_spec  # noqa: E402
from vvt.train import memory  # noqa: E402
from vvt.train import mesh as mesh_lib  # noqa: E402
from vvt.train import program as program_lib  # noqa: E402
from vvt.train import sharding  # noqa: E402

BATCH = 16
QUERY = 'encoder/layers/blocks/block/space_attention/query/kernel'


def config(logical_rules):
  c = train_helpers.tiny_config('unused')
  c.model.scan_layers = True
  c.batch_size = c.eval.batch_size = BATCH
  c.mesh.axes = {'data': 2, 'fsdp': 2, 'model': 2}
  c.mesh.logical_rules = logical_rules
  return c


def random_batch(c):
  rng = np.random.default_rng(0)
  t, s = c.num_frames, c.image_size
  return {'inputs': rng.integers(0, 256, size=(BATCH, t, s, s, 3)).astype(np.uint8),
          'label': rng.integers(0, 4, size=(BATCH,)).astype(np.int32),
          'mask': np.ones((BATCH,), np.float32)}


def main(out, logical_rules=None):
  c = config(logical_rules)
  run = run_spec.resolve(c)
  run_spec.check_devices(run, jax.device_count())
  program = program_lib.build_program(run, mesh_lib.make_mesh(run.mesh), num_train_videos=BATCH)
  params = {sharding.path_str(p): s for p, s in jax.tree_util.tree_flatten_with_path(
      program.training.shardings.params, is_leaf=lambda x: hasattr(x, 'spec'))[0]}
  abstract = program.abstract_state()
  train_text = program.training.step.lower(abstract, memory.abstract_batch(program, BATCH)).as_text()
  eval_text = program.eval_step.lower(abstract.params, memory.abstract_batch(program, BATCH, True)).as_text()
  state = program.init_state(jax.random.PRNGKey(0))
  _, _, status = program.training.step(state, mesh_lib.global_batch(random_batch(c), program.mesh, BATCH,
                                                                    program.logical_rules))
  json.dump({'query_spec': str(params[QUERY].spec), 'batch_spec': str(program.batch_sharding.spec),
             'data_fsdp_in_train': '{"data", "fsdp"}' in train_text,
             'data_fsdp_in_eval': '{"data", "fsdp"}' in eval_text,
             'model_in_train': '{"model"}' in train_text,
             'loss': float(status['loss'])}, open(out, 'w'))


if __name__ == '__main__':
  for out_json, rules in zip(sys.argv[1::2], sys.argv[2::2], strict=True):
    main(out_json, ast.literal_eval(rules))
