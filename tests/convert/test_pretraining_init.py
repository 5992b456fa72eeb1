"""Released pretraining weights in and out: `vvt train --init` of a random-init `VideoMAEForPreTraining` folder
continues an mae run with its decoder, and `vvt export --format hf` of the run writes a `VideoMAEForPreTraining`
(with the run's norm_pix_loss) transformers loads whole; a task's own part is loaded only whole, else left fresh
with one line saying why; the converted folder written back bit for bit, with the original's loss and
reconstructions; a `VJEPA2Model` keeps its predictor for a jepa config (or none), not for a classifier's, is written
back bit for bit, and `--init` of a jepa config loads it, or with another count of mask sets says what to set; a
jepa run's target encoder starts as the loaded encoder."""
import json
import sys

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file
import torch
import transformers

from tests.cli.test_sweep import vvt_in_process
from tests.conftest import REPO
from tests.convert import hf_encoders as H
from vvt.cli import finetune
from vvt.convert import carried_params
from vvt.convert import export
from vvt.convert import hf_export
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models
from vvt.tasks import jepa
from vvt.tasks import masks
from vvt.train import checkpoints

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import tiny_config  # noqa: E402

MAE = dict(image_size=32, patch_size=8, num_channels=3, num_frames=4, tubelet_size=2, hidden_size=32,
           num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, decoder_hidden_size=16,
           decoder_num_hidden_layers=1, decoder_num_attention_heads=2, decoder_intermediate_size=64,
           norm_pix_loss=True, use_mean_pooling=False)
VJEPA2 = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=8, crop_size=32,
              frames_per_clip=4, tubelet_size=2, pred_hidden_size=24, pred_num_hidden_layers=1,
              pred_num_attention_heads=2, pred_num_mask_tokens=1)


@pytest.fixture(scope='module')
def made(tmp_path_factory):
  """A synthetic data folder (4 frames of 32 px) and the two Hugging Face pretraining folders."""
  from vvt.data.writing import synthetic
  root = tmp_path_factory.mktemp('pretraining_init')
  synthetic.write_synthetic(str(root / 'data'), num_classes=2, train_clips=8, test_clips=2, num_frames=4,
                            frame_size=32, seed=3, train_shards=1, test_shards=1)
  torch.manual_seed(0)
  mae = H.save(H.randomise(transformers.VideoMAEForPreTraining(transformers.VideoMAEConfig(**MAE)), seed=4),
               root / 'videomae')
  vjepa = H.save(H.randomise(transformers.VJEPA2Model(transformers.VJEPA2Config(**VJEPA2)), seed=5), root / 'vjepa2')
  return root, mae, vjepa


def _train(capsys, root, source, workdir, *overrides):
  """`vvt train --init SOURCE` of one step at learning rate 1e-9 (the params stay those it started from, to far
  below float32's resolution of them)."""
  res = vvt_in_process(
      capsys, 'train', '--config', f'tests/train/tiny_config.py:{root / "data"},spatiotemporal', '--init',
      str(source), '--workdir', str(workdir), '--config.num_train_steps=1', '--config.batch_size=2',
      '--config.eval.batch_size=2', '--config.checkpoint.every_steps=1', '--config.schedule.warmup_steps=0',
      '--config.schedule.base_lr=1e-9', '--config.optimizer.name=sgd', '--config.log_every_steps=1',
      '--config.num_frames=4', '--config.image_size=32', '--config.dataset.stride=1',
      '--config.dataset.num_test_clips=1', *overrides)
  assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
  return res.stdout, checkpoints.load_params(str(workdir))[0]


def test_an_mae_run_continues_with_the_released_decoder_and_exports_it(made, capsys, tmp_path):
  root, folder, _ = made
  out, params = _train(capsys, root, folder, tmp_path / 'mae', '--config.task.name=mae',
                       '--config.task.mae.decoder_depth=1', '--config.task.mae.decoder_width=16',
                       '--config.task.mae.decoder_heads=2', '--config.task.mae.norm_pix_loss=False')
  assert '[train] init_from decoder: loaded from the checkpoint' in out, out
  converted = video.convert('hf_videomae', str(folder))
  got, ref = weight_files.flatten(params['decoder']), weight_files.flatten(converted.params['decoder'])
  assert sorted(got) == sorted(ref)
  for key in ref:
    np.testing.assert_allclose(np.asarray(got[key]), ref[key], rtol=0, atol=1e-6, err_msg=key)

  # out: a VideoMAEForPreTraining, every tensor the folder's, loaded whole; its loss is vvt's
  res = vvt_in_process(capsys, 'export', '--workdir', str(tmp_path / 'mae'), '--format', 'hf', '--output',
                       str(tmp_path / 'hf'))
  assert res.returncode == 0, res.stdout + res.stderr
  original, written = load_file(str(folder / 'model.safetensors')), load_file(str(tmp_path / 'hf/model.safetensors'))
  assert sorted(written) == sorted(original)
  for key, value in original.items():
    np.testing.assert_allclose(written[key], value, rtol=0, atol=1e-6, err_msg=key)
  model, info = transformers.VideoMAEForPreTraining.from_pretrained(str(tmp_path / 'hf'), output_loading_info=True)
  assert not any(info.values()), info
  written_config = json.loads((tmp_path / 'hf/config.json').read_text())
  assert written_config['architectures'] == ['VideoMAEForPreTraining']
  assert written_config['norm_pix_loss'] is False and model.config.norm_pix_loss is False  # the run's, not the default


def test_a_part_is_loaded_whole_or_left_fresh_with_one_line_saying_why(tmp_path):
  layers = {'block_0': {'w': np.ones((2, 3), np.float32)}, 'block_1': {'w': np.ones((2, 3), np.float32)}}
  path = str(tmp_path / 'w.safetensors')
  export.to_safetensors({'encoder': {'k': np.ones(2)}, 'decoder': {'layers': layers, 'head': np.full(4, 2.0)}}, path,
                        {'model': {}})
  fresh = {'decoder': {'layers': {'blocks': {'block': {'w': np.zeros((2, 2, 3))}}}, 'head': np.zeros(4)},
           'predictor': {'p': np.zeros(1)}}
  loaded, lines = carried_params.load(fresh, ('decoder', 'predictor'), path, 'vvt')
  assert lines == ['decoder: loaded from the checkpoint (3 tensors)',
                   'predictor: freshly initialised (the checkpoint has none)']
  np.testing.assert_array_equal(loaded['decoder']['layers']['blocks']['block']['w'], np.ones((2, 2, 3)))  # stacked
  assert set(loaded) == {'decoder'}
  fresh['decoder']['head'] = np.zeros(5)
  loaded, lines = carried_params.load(fresh, ('decoder',), path, 'vvt')
  assert loaded == {} and lines == ["decoder: freshly initialised (the checkpoint's differs from the task's: "
                                    'decoder/head: checkpoint (4,), model (5,))']
  del fresh['decoder']['head']
  assert carried_params.load(fresh, ('decoder',), path, 'vvt')[1] == [
      "decoder: freshly initialised (the checkpoint's differs from the task's: decoder/head: not in the model)"]
  assert carried_params.load(fresh, ('decoder',), str(tmp_path / 'vit.npz'), 'big_vision')[1] == [
      'decoder: freshly initialised (an image checkpoint has none)']


def test_the_exported_pretraining_model_gives_transformers_loss(tmp_path):
  """The converted folder's params written by `hf_export.write_pretraining` (the mean-pooling encoder: no final
  LayerNorm written) give transformers' loss and reconstructions, equal to the original model's."""
  cfg = transformers.VideoMAEConfig(**dict(MAE, use_mean_pooling=True))
  torch.manual_seed(1)
  folder = H.save(H.randomise(transformers.VideoMAEForPreTraining(cfg), seed=6), tmp_path / 'src')
  converted = video.convert('hf_videomae', str(folder))
  hf_class, _ = hf_export.write_pretraining(converted.params, converted.model_config(), str(tmp_path / 'out'))
  assert hf_class == 'VideoMAEForPreTraining'
  original, written = load_file(str(folder / 'model.safetensors')), load_file(str(tmp_path / 'out/model.safetensors'))
  assert sorted(written) == sorted(original)
  for key, value in original.items():
    np.testing.assert_array_equal(written[key], value, err_msg=key)
  x = H.clip(2, 4, 32, seed=2)
  _, masked = masks.tube_mask(jax.random.key(1), 2, (2, 4, 4), 0.75)
  flags = torch.from_numpy(np.array(masks.boolean(masked, 32)))
  with torch.no_grad():
    a = transformers.VideoMAEForPreTraining.from_pretrained(str(folder)).eval()(H.torch_video(x),
                                                                              bool_masked_pos=flags)
    b = transformers.VideoMAEForPreTraining.from_pretrained(str(tmp_path / 'out')).eval()(H.torch_video(x),
                                                                                        bool_masked_pos=flags)
  assert H.max_diff(a.logits.numpy(), b.logits.numpy()) < H.ATOL and abs(float(a.loss) - float(b.loss)) < H.ATOL


def test_a_vjepa2_predictor_is_kept_for_a_jepa_config_and_loaded_by_its_init(made, capsys, tmp_path):
  root, _, folder = made
  bare = video.convert('hf_vjepa2', str(folder), vvt.models.get_config('vivit', num_classes=3))
  assert 'predictor' not in bare.params and any(k.startswith('predictor.') for k in bare.report.unused)
  kept = video.convert('hf_vjepa2', str(folder))  # no config: kept
  assert 'predictor' in kept.params and not [k for k in kept.report.unused if k.startswith('predictor.')]
  written = hf_export.write_pretraining(kept.params, kept.model_config(), str(tmp_path / 'back'))
  assert written[0] == 'VJEPA2Model'
  original, back = load_file(str(folder / 'model.safetensors')), load_file(str(tmp_path / 'back/model.safetensors'))
  assert sorted(back) == sorted(original)
  for key, value in original.items():
    np.testing.assert_array_equal(back[key], value, err_msg=key)

  # `vvt train --init` of a jepa config: the weights it writes keep the predictor, which init_from loads
  base = tiny_config.get_config(f'{root / "data"},spatiotemporal')
  base.task.name = 'jepa'
  start = finetune.prepare(str(folder), base, str(tmp_path / 'run'), log=lambda *a: None)
  fresh = {'predictor': jax.tree.map(np.zeros_like, kept.params['predictor'])}
  loaded, lines = carried_params.load(fresh, ('predictor',), start.weights, 'vvt')
  assert lines == [f'predictor: loaded from the checkpoint ({len(weight_files.flatten(fresh))} tensors)']
  got, ref = weight_files.flatten(loaded['predictor']), weight_files.flatten(kept.params['predictor'])
  for key in ref:
    np.testing.assert_array_equal(got[key], ref[key], err_msg=key)

  # another count of mask sets than the predictor's mask tokens: left fresh, the line says what to set
  fresh['predictor']['mask_tokens'] = np.zeros((3, VJEPA2['pred_hidden_size']), np.float32)
  advice = jepa.Jepa.__new__(jepa.Jepa).carried_advice
  loaded, lines = carried_params.load(fresh, ('predictor',), start.weights, 'vvt', advice)
  assert loaded == {} and lines == [
      "predictor: freshly initialised (the checkpoint's differs from the task's: predictor/mask_tokens: checkpoint "
      "(1, 24), model (3, 24)); its predictor has 1 mask tokens, one per mask set, the task 3: set "
      "task.jepa.mask_sets to 1 (num_blocks, spatial scale) entries to load it"]


def test_from_init_makes_the_target_a_copy_of_the_loaded_encoder():
  params = {'encoder': {'w': np.ones(3)}, 'predictor': {'p': np.zeros(2)}, jepa.TARGET: {'encoder': {'w': np.zeros(3)}}}
  task = jepa.Jepa.__new__(jepa.Jepa)
  out = task.from_init(params)
  np.testing.assert_array_equal(out[jepa.TARGET]['encoder']['w'], np.ones(3))
  assert set(out[jepa.TARGET]) == {'encoder'} and out['predictor'] is params['predictor']
