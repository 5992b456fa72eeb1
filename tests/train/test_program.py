"""`vvt.train.program`: one build of the model, optimiser, shardings and steps; nothing is compiled here."""
import jax
import pytest
import train_helpers

from vvt.config import run_spec
from vvt.train import memory
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import program as program_lib


def test_steps_per_epoch_and_total_steps():
  assert program_lib.steps_per_epoch(48, 8) == 6 and program_lib.steps_per_epoch(49, 8) == 7
  assert program_lib.steps_per_epoch(3, 8) == 1
  assert program_lib.total_steps(12, 3.0, 6) == 12  # num_train_steps wins
  assert program_lib.total_steps(-1, 2.5, 6) == 15 and program_lib.total_steps(-1, 0.01, 6) == 1


def test_an_evaluation_program_has_no_optimiser_and_shards_as_training_does():
  c = run_spec.resolve(train_helpers.tiny_config('unused'))  # nothing reads the dataset
  mesh = mesh_lib.make_mesh()
  evaluation = program_lib.build_program(c, mesh)
  assert evaluation.training is None
  with pytest.raises(ValueError, match='no optimiser'):
    evaluation.abstract_state()
  training = program_lib.build_program(c, mesh, num_train_videos=48)
  assert (training.training.steps_per_epoch, training.training.total_steps) == (6, 12)
  assert training.clip == model_state.ClipShape(num_frames=8, image_size=(32, 32))
  assert jax.tree.structure(training.abstract_state().params) == jax.tree.structure(evaluation.abstract_params())
  assert training.param_shardings == evaluation.param_shardings
  assert training.task.heads == {'': 4} and training.task.average == 'logits' and training.task.name == 'classification'


def test_memory_names_the_schedule_it_assumes_without_the_training_files(tiny_data):
  assert memory.training_set_size(run_spec.resolve(train_helpers.tiny_config(tiny_data)).data) == (
      48, 'dataset.train_files')
  videos, why = memory.training_set_size(run_spec.resolve(train_helpers.tiny_config('unused')).data)
  assert videos is None and why.startswith('dataset.train_files: no file matches')
