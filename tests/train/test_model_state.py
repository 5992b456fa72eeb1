"""One build of the model and its abstract state; the trainer's early checks (no compilation)."""
import chex
import jax
import optax
import pytest
import train_helpers as common

from vvt.config import run_spec
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train import trainer


def test_abstract_state_is_the_init_state_and_follows_the_shared_fields():
  c = common.tiny_config('unused')
  c.model.positional_embedding = 'joint'  # a learned table: its size follows the clip shape
  tx = optax.adamw(1e-3)
  run = run_spec.resolve(c)
  module, clip = model_state.build_model(run.model), model_state.ClipShape.of(run)
  rep = mesh_lib.replicated(mesh_lib.make_mesh())
  abstract = model_state.abstract_state(module, clip, tx, rep)
  state = jax.jit(model_state.init_fn(module, clip, tx))(jax.random.PRNGKey(0))
  chex.assert_trees_all_equal_shapes_and_dtypes(abstract, state)
  assert all(x.sharding == rep for x in jax.tree.leaves(abstract))
  params = model_state.abstract_params(module, clip)
  chex.assert_trees_all_equal_shapes_and_dtypes(params, abstract.params)
  chex.assert_trees_all_close(state.params, jax.jit(
      lambda r: model_state.init_params(module, clip, r))(jax.random.PRNGKey(0)))
  assert model_state.dummy_input(clip).shape == (1, 8, 32, 32, 3)
  c.num_frames, c.image_size = 4, 64  # the shared fields move the model's input
  c.dataset.train_min_resize = c.dataset.train_max_resize = c.dataset.eval_resize = 64  # crops of 64^2 fit
  run = run_spec.resolve(c)
  clip = model_state.ClipShape.of(run)
  assert clip == model_state.ClipShape.of(run.model) and model_state.dummy_input(clip).shape == (1, 4, 64, 64, 3)
  bigger = model_state.abstract_params(model_state.build_model(run.model), clip)
  pos = lambda p: [x.shape for path, x in jax.tree_util.tree_flatten_with_path(p)[0]  # noqa: E731
                   if 'pos' in jax.tree_util.keystr(path)]
  assert pos(bigger) != pos(params)


def test_a_missing_dataset_path_is_named_before_anything_compiles(tiny_data, tmp_path):
  c = common.tiny_config(str(tmp_path / 'nowhere'))
  with pytest.raises(FileNotFoundError, match=r'dataset.train_files: no file matches .*nowhere/train-'):
    trainer.train_and_evaluate(run_spec.resolve(c), str(tmp_path / 'run'), log=lambda *a, **k: None)
  c.dataset.train_files = f'{tiny_data}/train-*'
  with pytest.raises(FileNotFoundError, match=r'dataset.eval_files: no file matches .*nowhere/test-'):
    trainer.train_and_evaluate(run_spec.resolve(c), str(tmp_path / 'run'), log=lambda *a, **k: None)
