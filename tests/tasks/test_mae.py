"""Masked autoencoding (task.name='mae'): tube masks (fixed count, the same spatial positions in every temporal
index, a function of the rng), the config check's refusals in one run, the loss over the masked tubelets only, and
a tiny pretraining run on videos whose labels are not read: its loss falls, its reconstruction PNG is written, and
it is the frozen backbone of a probe with nothing else to set."""
import json
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import common
from tests import specs
from tests.conftest import REPO
from vvt.config import run_spec
from vvt.config import validation
from vvt.data.writing import synthetic
from vvt.tasks import mae_model
from vvt.tasks import masks
from vvt.train import checkpoints
from vvt.train import trainer

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import tiny_config  # noqa: E402


def test_tube_masks_keep_a_fixed_count_of_the_same_positions_in_every_frame():
  grid, ratio = (3, 4, 5), 0.75
  kept, masked = masks.tube_mask(jax.random.key(7), 6, grid, ratio)
  assert masks.counts(grid, ratio) == (5, 15) and kept.shape == (6, 3 * 5) and masked.shape == (6, 3 * 15)
  for k, m in zip(np.asarray(kept), np.asarray(masked), strict=True):
    assert sorted(set(k) | set(m)) == list(range(60)) and not set(k) & set(m)
    spatial = k.reshape(3, 5) % 20
    assert (spatial == spatial[0]).all() and (np.diff(k) > 0).all()  # a tube, time-major, sorted
    assert (k.reshape(3, 5) // 20 == np.arange(3)[:, None]).all()
  again, _ = masks.tube_mask(jax.random.key(7), 6, grid, ratio)
  other, _ = masks.tube_mask(jax.random.key(8), 6, grid, ratio)
  np.testing.assert_array_equal(again, kept)  # the step's rng decides: a resumed run draws the same masks
  assert (np.asarray(other) != np.asarray(kept)).any() and len({tuple(r) for r in np.asarray(kept)}) > 1
  flags = masks.boolean(masked, 60)
  assert flags.sum() == 6 * 45 and bool(flags[0, masked[0, 0]]) and not bool(flags[0, kept[0, 0]])


def test_random_masks_draw_each_token_on_its_own_and_the_task_uses_them():
  grid, ratio = (4, 4, 4), 0.75
  kept, masked = masks.random_mask(jax.random.key(7), 8, grid, ratio)
  assert kept.shape == (8, 16) and masked.shape == (8, 48)
  for k, m in zip(np.asarray(kept), np.asarray(masked), strict=True):
    assert sorted(set(k) | set(m)) == list(range(64)) and (np.diff(k) > 0).all() and (np.diff(m) > 0).all()
  per_frame = [[set(k[k // 16 == t] % 16) for t in range(4)] for k in np.asarray(kept)]
  assert any(len({frozenset(s) for s in clip}) > 1 for clip in per_frame)  # not a tube: frames keep other places
  np.testing.assert_array_equal(masks.random_mask(jax.random.key(7), 8, grid, ratio)[0], kept)
  c = _config('/nowhere')
  c.task.name, c.task.mae.mask_ratio, c.task.mae.masking = 'mae', ratio, 'random'
  task, video = specs.task_for(c), jnp.zeros((8, 4, 32, 32, 3))
  inputs, _, _ = task.prepare({}, video, jax.random.key(7))  # the step's rng through the task: its random mask
  np.testing.assert_array_equal(inputs['kept'], masks.random_mask(jax.random.key(7), 8, task.grid, ratio)[0])
  c.task.mae.masking = 'tube'
  tube, _, _ = specs.task_for(c).prepare({}, video, jax.random.key(7))
  np.testing.assert_array_equal(tube['kept'], masks.tube_mask(jax.random.key(7), 8, task.grid, ratio)[0])


def test_norm_pix_targets_and_the_loss_over_masked_tubelets():
  video = jax.random.uniform(jax.random.key(0), (2, 4, 16, 16, 3))
  tubelets = mae_model.patches(video, (2, 8, 8))
  assert tubelets.shape == (2, 2 * 2 * 2, 2 * 8 * 8 * 3)
  np.testing.assert_array_equal(tubelets[0, 0].reshape(2, 8, 8, 3), video[0, :2, :8, :8])
  np.testing.assert_array_equal(tubelets[1, 3].reshape(2, 8, 8, 3), video[1, :2, 8:, 8:])  # (t, h, w) token order
  norm = np.asarray(mae_model.normalised(tubelets)).reshape(2, 8, 128, 3)
  np.testing.assert_allclose(norm.mean(axis=2), 0, atol=1e-5)
  np.testing.assert_allclose(norm.std(axis=2, ddof=1), 1, atol=1e-4)
  c = _config('/nowhere')
  c.task.name = 'mae'
  task = specs.task_for(c)
  target = jnp.ones((2, 5, 7))
  assert np.asarray(task.loss({'pred': target, 'target': target}, {})).tolist() == [0.0, 0.0]
  np.testing.assert_allclose(task.loss({'pred': target + 2 * (jnp.arange(2)[:, None, None]), 'target': target},
                                       {}), [0.0, 4.0])


def test_the_check_names_every_problem_of_a_pretraining_config_in_one_run():
  c = common.synthetic_config('space_time_mixing', 'data/synthetic', family='xvit', hidden_size=32, num_layers=1,
                              num_heads=2, mlp_dim=64)
  c.task.name = 'mae'
  c.task.mae.mask_ratio, c.task.mae.decoder_width, c.task.mae.decoder_heads = 1.5, 30, 4
  lines = validation.problems(c, purpose='train')
  want = ["task.mae.mask_ratio must be in (0, 1), got 1.5",
          'task.mae.decoder_width=30 must be a multiple of task.mae.decoder_heads=4',
          "task.name='mae': model.attention='space_time_mixing' (X-ViT eq. 9-10) shifts keys and values in from the "
          'same spatial positions of neighbouring frames: the encoder cannot drop tokens']
  assert all(line in lines for line in want), lines
  c = common.synthetic_config('factorised_encoder', 'data/synthetic', hidden_size=32, num_layers=1, num_heads=2,
                              mlp_dim=64)
  c.task.name, c.num_classes = 'mae', 0
  assert validation.problems(c, purpose='train') == [
      "task.name='mae': model.attention='factorised_encoder' (ViViT Model 2) pools every frame to one token: no "
      'per-token output to reconstruct the masked tubelets from']  # and no classes needed
  c = common.synthetic_config('factorised_self_attention', 'data/synthetic', hidden_size=32, num_layers=1,
                              num_heads=2, mlp_dim=64)
  c.task.name, c.num_classes, c.task.mae.masking = 'mae', 0, 'random'
  assert validation.problems(c, purpose='train') == [
      "task.mae.masking='random' needs joint attention (any set of kept tokens): model.attention="
      "'factorised_self_attention' (ViViT Model 3) runs space and time stages on a tube mask's layout"]
  c.task.mae.masking = 'per_frame'
  assert validation.problems(c, purpose='train') == ["task.mae.masking must be one of tube, random, got 'per_frame'"]


def _config(data):
  c = tiny_config.get_config(f'{data},spatiotemporal')
  c.num_frames, c.image_size, c.dataset.stride, c.model.tubelet = 4, 32, 1, (2, 8, 8)
  c.dataset.train_min_resize, c.dataset.train_max_resize, c.dataset.eval_resize = 34, 36, 34
  c.num_train_steps, c.checkpoint.every_steps, c.log_every_steps = 8, 8, 2
  c.optimizer.name, c.schedule.base_lr = 'adamw', 1e-3
  return c


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory):
  """(workdir, data) of a finished 8-step mae run that reads no labels (num_classes unset)."""
  tmp = tmp_path_factory.mktemp('mae')
  data = str(tmp / 'data')
  synthetic.write_synthetic(data, num_classes=4, train_clips=16, test_clips=4, num_frames=4, frame_size=32, seed=2,
                            train_shards=1, test_shards=1)
  c = _config(data)
  c.task.name, c.num_classes, c.class_names = 'mae', 0, None
  c.model.num_classes = c.dataset.num_classes = 0
  c.task.mae.decoder_depth, c.task.mae.decoder_width, c.task.mae.decoder_heads = 1, 32, 2
  c.task.mae.mask_ratio = 0.75
  workdir = str(tmp / 'run')
  result = trainer.train_and_evaluate(run_spec.resolve(c), workdir, log=lambda *a: None)
  return workdir, data, result


def test_a_tiny_pretraining_run_learns_and_draws_its_reconstructions(pretrained):
  workdir, _, result = pretrained
  losses = [r['loss'] for r in map(json.loads, open(f'{workdir}/metrics.jsonl')) if r.get('kind') == 'train']
  assert len(losses) == 4 and losses[-1] < 0.95 * losses[0], losses
  assert result['reconstruction_loss'] > 0 and result['num_videos'] == 4
  pngs = sorted((REPO / workdir).parent.glob('run/checkpoints/*_reconstruction_*.png'))
  assert pngs and pngs[0].read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
  params = checkpoints.load_params(workdir)[0]
  assert {'decoder', 'embedding', 'encoder'} <= set(params)


def test_a_pretraining_run_is_a_probe_backbone_with_nothing_else_to_set(pretrained, tmp_path):
  workdir, data, _ = pretrained
  c = _config(data)
  c.num_train_steps, c.checkpoint.every_steps, c.schedule.warmup_steps = 2, 2, 0
  c.task.name, c.task.probe.backbone = 'probe', workdir
  res = trainer.train_and_evaluate(run_spec.resolve(c), str(tmp_path / 'probe'), log=lambda *a: None)
  assert 0.0 <= res['video_top1'] <= 1.0 and res['best_probe'] == 'probe_0'
  probe = checkpoints.load_params(str(tmp_path / 'probe'))[0]
  mae = checkpoints.load_params(workdir)[0]
  np.testing.assert_array_equal(probe['embedding']['conv']['kernel'], mae['embedding']['conv']['kernel'])


@pytest.mark.parametrize('path,stride,epochs', [('configs/kinetics400/videomae_b.py', 4, 1600),
                                                ('configs/ssv2/videomae_b.py', 2, 2400)])
def test_the_videomae_recipes_pretrain_without_classes_and_shrink_with_runlocal(path, stride, epochs):
  from vvt.config import loader
  c = loader.load(str(REPO / path), files=(), init=False)
  assert (c.task.name, c.num_classes, c.task.mae.mask_ratio, c.task.mae.decoder_depth) == ('mae', 0, 0.9, 4)
  assert (c.task.mae.decoder_width, c.batch_size, c.num_epochs, c.dataset.stride) == (384, 2048, epochs, stride)
  assert (c.optimizer.b2, c.schedule.base_lr, c.schedule.warmup_epochs) == (0.95, 1.2e-3, 40.0)
  assert validation.problems(c, purpose='train') == []
  small = loader.load(str(REPO / path), [('runlocal', 'True')], files=(), init=False)
  assert (small.num_frames, small.model.hidden_size, small.task.name) == (8, 64, 'mae')
