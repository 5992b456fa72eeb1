"""Perception Encoder video (transformers' PeVideoModel) <-> vvt's PeVideoText: the frame-level video encoder, the
ModernBERT text tower, both heads and the logits against transformers, and the weights both ways bit for bit.

The reference is a random-init tiny PeVideoModel whose frame model is a transformers ViT classifier (a released
checkpoint's is timm's PE core ViT): vvt's towers take the frame model's per-frame outputs, read here from
transformers' own forward, so every step after the frame model is transformers' code on the same values.
"""
from __future__ import annotations

import json

import flax.traverse_util
import jax
import numpy as np
import pytest
from safetensors.numpy import load_file
import torch
import transformers

from tests.convert.hf_encoders import ATOL
from tests.convert.hf_encoders import max_diff
from tests.convert.hf_encoders import randomise
from tests.convert.hf_encoders import save
from vvt.convert import hf_pe_video
from vvt.models.pe_video_text import PeVideoText

FRAMES, SIZE, TEXTS, LENGTH = 4, 32, 3, 9


def _model() -> transformers.PeVideoModel:
  vit = transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                               image_size=SIZE, patch_size=16, num_labels=24)
  text = dict(model_type='modernbert', vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
              num_attention_heads=2, global_attn_every_n_layers=2, local_attention=4, max_position_embeddings=64,
              pad_token_id=0)
  video = dict(vision_config=vit, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, rope_parameters={'rope_type': 'default', 'rope_theta': 100.0})
  torch.manual_seed(0)
  return randomise(transformers.PeVideoModel(transformers.PeVideoConfig(text_config=text, video_config=video)), 3)


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """(config.json dict, state dict, frame features (B, T, F), input_ids, attention_mask, transformers' output)."""
  model = _model()
  folder = save(model, tmp_path_factory.mktemp('pe_video'))
  rng = np.random.default_rng(0)
  pixels = torch.from_numpy(rng.standard_normal((2, FRAMES, 3, SIZE, SIZE)).astype(np.float32))
  ids = torch.from_numpy(rng.integers(1, 100, (TEXTS, LENGTH)))
  mask = torch.ones(TEXTS, LENGTH, dtype=torch.long)
  mask[1, 5:] = 0
  frames = []
  hook = model.video_encoder.embedder.vision_model.register_forward_hook(
      lambda module, args, out: frames.append(out.logits.detach().numpy()))
  with torch.no_grad():
    out = model(input_ids=ids, pixel_values_videos=pixels, attention_mask=mask)
  hook.remove()
  features = frames[0].reshape(2, FRAMES, -1)
  config = json.loads((folder / 'config.json').read_text())
  return config, load_file(str(folder / 'model.safetensors')), features, ids.numpy(), mask.numpy(), out, folder


@pytest.fixture(scope='module')
def converted(reference):
  """(module, params) of the converted folder, and vvt's (video, text, logits) of the reference inputs."""
  config, state, features, ids, mask = reference[:5]
  module = PeVideoText(*hf_pe_video.read_config(config))
  params = hf_pe_video.params_of(state, config)

  def run(p):
    v = module.apply({'params': p}, features, method='encode_frames')
    t = module.apply({'params': p}, ids, mask, method='encode_text')
    return v, t, module.apply({'params': p}, v, t, method='similarity')
  return module, params, jax.jit(run)(params)


def test_the_video_embeddings_match_transformers(reference, converted):
  out = reference[5]
  assert max_diff(converted[2][0], out.video_embeds.numpy()) < ATOL


def test_the_text_embeddings_match_transformers_padding_and_sliding_window_included(reference, converted):
  out, (_, _, mask) = reference[5], reference[2:5]
  text = out.text_video_embeds.numpy()
  assert max_diff(converted[2][1], text) < ATOL
  assert mask[1].sum() < LENGTH and np.abs(text[1] - text[0]).max() > 0.1  # the padded text is a text of its own


def test_the_similarity_logits_match_transformers(reference, converted):
  logits = reference[5].logits_video_text.numpy()
  assert logits.shape == (2, TEXTS)
  assert max_diff(converted[2][2], logits) < ATOL * max(1.0, float(np.abs(logits).max()))
  assert np.ptp(logits) > 0.1


def test_the_export_gives_back_every_tensor_bit_for_bit(reference, converted):
  config, state = reference[:2]
  back = hf_pe_video.state_of(converted[1], *hf_pe_video.read_config(config))
  expected = {k: v for k, v in state.items() if not k.startswith(hf_pe_video.FRAME_MODEL)}
  assert sorted(back) == sorted(expected)
  for key, value in expected.items():
    assert back[key].dtype == value.dtype and back[key].shape == value.shape, key
    assert np.array_equal(back[key], value), key


@pytest.mark.parametrize('change, field', [
    (('video_config', 'rope_parameters', {'rope_type': 'linear', 'factor': 2.0}), 'video_config.rope_parameters'),
    (('text_config', 'model_type', 'bert'), 'text_config.model_type'),
    (('video_config', 'num_key_value_heads', 3), 'video_config.num_key_value_heads'),
])
def test_a_config_it_cannot_express_is_refused_in_one_line_naming_the_field(reference, change, field):
  config = json.loads(json.dumps(reference[0]))
  tower, name, value = change
  config[tower][name] = value
  with pytest.raises(ValueError) as info:
    hf_pe_video.read_config(config)
  message = str(info.value)
  assert '\n' not in message and f'hf_config.{field}' in message, message


def test_a_missing_weight_is_named(reference):
  config, state = reference[:2]
  partial = {k: v for k, v in state.items() if k != 'video_encoder.output.weight'}
  with pytest.raises(ValueError, match='no video_encoder.output.weight'):
    hf_pe_video.params_of(partial, config)


def test_a_folder_is_read_with_vvt_s_own_reader_its_frame_model_left_out(reference, converted):
  temporal, text, params, frame_model = hf_pe_video.read_folder(str(reference[6]))
  assert (temporal, text) == hf_pe_video.read_config(reference[0])
  assert frame_model and all(k.startswith(hf_pe_video.FRAME_MODEL) for k in frame_model)
  assert all(k.startswith(hf_pe_video.FRAME_MODEL) == (k in frame_model) for k in reference[1])
  flat, expected = (flax.traverse_util.flatten_dict(p) for p in (params, converted[1]))
  assert sorted(flat) == sorted(expected)
  assert all(np.array_equal(flat[k], expected[k]) for k in flat)


def test_a_folder_of_another_model_is_refused_before_its_weights_are_read(reference, tmp_path):
  (tmp_path / 'config.json').write_text(json.dumps({**reference[0], 'model_type': 'videoprism'}))
  (tmp_path / 'model.safetensors').write_bytes(b'not read')
  with pytest.raises(ValueError) as info:
    hf_pe_video.read_folder(str(tmp_path))
  assert str(info.value) == "hf_config.model_type is 'videoprism', not 'pe_video'"
