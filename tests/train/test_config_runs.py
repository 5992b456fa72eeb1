"""The paper configs of Kinetics-600, Moments in Time, Diving-48, HowTo100M, X-ViT on Epic-Kitchens-100 and the
JFT / ViViT-H rows: each config file, every variant, loads, validates and shrinks with `runlocal=True` to a run
that trains two steps on the CPU, on the tiny synthetic data through its own training pipeline.

Runs are shared where they are the same computation: the train step comes from the one program builder
(`vvt.train.program.build_program`) once per group of runs equal in what it reads (model, clip, optimiser,
schedule, losses, normalisation, mesh), and the batches once per group equal in what the training pipeline reads
(the dataset fields but the evaluation's, batch size, seed); a run equal to one already trained in both is that
run. The K600 / Diving-48 / HowTo100M TimeSformers, whose variants differ in frames, resolution and rates that
runlocal replaces, all shrink to one program.
"""
import json

import jax
import numpy as np
import pytest
import train_helpers as common

from vvt.config import loader
from vvt.config import run_spec
from vvt.config import schema
from vvt.data import pipeline
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import program as program_lib
from vvt.train import trainer

# config file (under configs/): the variants it offers (None: the default).
CONFIGS = {
    'kinetics400/vivit_l_fe.py': ['128,init=jft'],
    'kinetics400/vivit_h.py': [None, 'views=ablation'],
    'kinetics600/vivit_l_fe.py': [None, 'init=jft', '128'],
    'kinetics600/vivit_h.py': [None],
    'kinetics600/timesformer_b.py': [None, 'hr', 'l'],
    'kinetics600/xvit_b.py': [None, '16'],
    'moments_in_time/vivit_l_fe.py': [None, 'views=ablation'],
    'diving48/timesformer_b.py': [None, 'hr', 'l'],
    'howto100m/timesformer_b.py': [None, '32', '64', '96', '96,init=imagenet21k'],
    'epic_kitchens/xvit_b.py': [None, '8'],
}
STEPS = 2
# The schedule's length: that of docs/configs.md's example run in tests/cli/test_commands.py, so that the Kinetics-600
# and Moments in Time ViViT-L FE runs (lr 0.05, as its ViViT-B) compile that test's program: one test session
# compiles it once.
SCHEDULE_STEPS = 3
# What the program of a run is built from (`build_program`, `steps.TrainSettings`): runs equal in these fields
# compile the same train step.
PROGRAM_FIELDS = ('model', 'num_frames', 'image_size', 'optimizer', 'schedule', 'loss', 'batch_size',
                  'num_train_steps', 'num_epochs', 'mesh', 'dataset.normalization')
EVAL_ONLY = ('eval_files', 'num_test_clips', 'num_spatial_crops', 'eval_resize')  # dataset fields
_PROGRAMS, _BATCHES, _RUNS = {}, {}, {}  # program key -> (Program, jitted init); data key -> batches; both -> run


def load(name, arg, *overrides):
  return loader.load(str(common.REPO / 'configs' / name) + (f':{arg}' if arg else ''), list(overrides),
                     files=(), init=False)


def shrunk(name, arg, data_dir):
  return load(name, arg, ('runlocal', 'True'), ('dataset.train_files', f'{data_dir}/train-*-of-*.tfrecord'),
              ('dataset.eval_files', f'{data_dir}/test-*-of-*.tfrecord'), ('num_train_steps', str(SCHEDULE_STEPS)),
              ('schedule.warmup_steps', '1'))


def _plain(value):
  return value.to_dict() if hasattr(value, 'to_dict') else value


def program_key(c) -> str:
  fields = {}
  for path in PROGRAM_FIELDS:
    value = c
    for part in path.split('.'):
      value = value.get(part)
    fields[path] = _plain(value)
  return json.dumps(fields, sort_keys=True, default=str)


def data_key(c) -> str:
  dataset = {k: _plain(v) for k, v in c.dataset.items() if k not in EVAL_ONLY}
  return json.dumps(dict(dataset=dataset, batch_size=c.batch_size, seed=c.seed,
                         class_names=_plain(c.get('class_names'))), sort_keys=True, default=str)


def program_of(c):
  key = program_key(c)
  if key not in _PROGRAMS:
    run = run_spec.resolve(c)
    mesh = trainer.make_mesh(run)
    program = program_lib.build_program(run, mesh, num_train_videos=pipeline.num_videos(run.data, 'train'))
    init = model_state.init_fn(program.module, program.clip, program.training.tx, ema=program.training.ema)
    _PROGRAMS[key] = program, jax.jit(init, out_shardings=program.training.shardings)
  return _PROGRAMS[key]


def batches_of(c):
  """STEPS batches of `c`'s training pipeline (numpy, per host)."""
  key = data_key(c)
  if key not in _BATCHES:
    run = run_spec.resolve(c)
    it = pipeline.make_train_iterator(run.data, global_batch_size=run.batch_size, seed=run.seed, start_step=0,
                                      process_index=0, process_count=1)
    try:
      _BATCHES[key] = [next(it) for _ in range(STEPS)]
    finally:
      it.close()
  return _BATCHES[key]


def train(c):
  """STEPS updates of run config `c` -> (losses, largest parameter change)."""
  key = (program_key(c), data_key(c))
  if key not in _RUNS:
    program, init = program_of(c)
    state = init(jax.random.PRNGKey(c.seed))
    before = jax.tree.map(np.array, state.params)  # a copy: the train step donates the state
    losses = []
    for batch in batches_of(c):
      state, _, status = program.training.step(
          state, mesh_lib.global_batch(batch, program.mesh, c.batch_size, program.logical_rules))
      losses.append(float(status['loss']))
    change = max(jax.tree.leaves(jax.tree.map(lambda a, b: float(np.abs(np.asarray(a) - b).max()),
                                              state.params, before)))
    _RUNS[key] = losses, change
  return _RUNS[key]


@pytest.mark.parametrize('name', list(CONFIGS))
def test_config_shrinks_and_trains_on_the_cpu(name, tiny_data):
  full = [load(name, arg) for arg in CONFIGS[name]]  # validated at their paper size
  runs = [shrunk(name, arg, tiny_data) for arg in CONFIGS[name]]
  for paper, c in zip(full, runs, strict=True):
    # runlocal keeps the family, scheme, classifier and heads, and shrinks the rest
    assert (c.model.family, c.model.attention, c.model.classifier) == (
        paper.model.family, paper.model.attention, paper.model.classifier)
    assert hasattr(c.num_classes, 'items') == hasattr(paper.num_classes, 'items')
    assert (c.num_frames, c.image_size, c.model.num_layers, c.model.hidden_size) == (8, 32, 2, 64)
    assert c.init_from is None and c.dataset.train_files.startswith(tiny_data)
  for c in runs:
    losses, change = train(c)
    heads = len(c.num_classes) if hasattr(c.num_classes, 'items') else 1
    assert all(np.isfinite(losses)), losses
    # the classifier starts at zero: the first loss is chance on each head, summed
    assert losses[0] == pytest.approx(heads * np.log(schema.SYNTHETIC['num_classes']), rel=1e-4)
    assert change > 0  # the second step (past the first warmup step's zero lr) moved the parameters
