"""Perception Encoder video (transformers' PeVideoModel) <-> vvt's PeVideoText: the frame model (timm's PE core
ViT), the frame-level video encoder, the ModernBERT text tower, both heads and the logits against transformers, and
the weights both ways bit for bit.

The reference is a random-init tiny PeVideoModel whose frame model is timm's `vit_pe_core_tiny_patch16_384` with tiny
overrides (built with pretrained=False: nothing downloads), layer scale on; its 4 x 4 patch grid is rescaled onto
the architecture's 24 x 24 RoPE grid, as a released checkpoint's is at another resolution.
"""
from __future__ import annotations

import functools
import json

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file
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
  vit = transformers.TimmWrapperConfig(architecture='vit_pe_core_tiny_patch16_384', num_labels=24, model_args=dict(
      img_size=SIZE, patch_size=8, embed_dim=32, depth=2, num_heads=2, init_values=0.1))
  text = dict(model_type='modernbert', vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
              num_attention_heads=2, global_attn_every_n_layers=2, local_attention=4, max_position_embeddings=64,
              pad_token_id=0)
  video = dict(vision_config=vit, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, head_dim=16, rope_parameters={'rope_type': 'default', 'rope_theta': 100.0})
  torch.manual_seed(0)
  return randomise(transformers.PeVideoModel(transformers.PeVideoConfig(text_config=text, video_config=video)), 3)


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
  """(config.json dict, state dict, frame features (B, T, F), input_ids, attention_mask, transformers' output,
  folder, pixels (B, T, 3, H, W))."""
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
  state = load_file(str(folder / 'model.safetensors'))
  return config, state, features, ids.numpy(), mask.numpy(), out, folder, pixels.numpy()


@pytest.fixture(scope='module')
def converted(reference):
  """(module, params) of the converted folder, and vvt's (video, text, logits, frame features) of the reference
  inputs (the logits in one call)."""
  folder, pixels, (ids, mask) = reference[6], reference[7], reference[3:5]
  frame, temporal, text, params = hf_pe_video.read_folder(str(folder))
  module = PeVideoText(temporal, text, frame)
  video = pixels.transpose(0, 1, 3, 4, 2)  # (B, T, H, W, 3)

  def run(p):
    v = module.apply({'params': p}, video, method='encode_video')
    t = module.apply({'params': p}, ids, mask, method='encode_text')
    f = module.apply({'params': p}, video.reshape(-1, *video.shape[2:]), method=lambda m, x: m.frame(x))
    return v, t, module.apply({'params': p}, video, ids, mask), f
  return module, params, jax.jit(run)(params)


def test_the_frame_model_matches_timm_s_pe_core_vit(reference, converted):
  features = reference[2]
  assert max_diff(converted[2][3], features.reshape(-1, features.shape[-1])) < ATOL
  assert np.ptp(features) > 0.1


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


def test_the_export_is_a_folder_transformers_loads_with_every_tensor_bit_for_bit(reference, converted, tmp_path):
  config, state = reference[:2]
  specs = hf_pe_video.read_config(config)
  hf, back = hf_pe_video.hf_of_specs(converted[1], *specs, hf_pe_video.token_ids(config))
  assert hf_pe_video.read_config(hf) == specs
  (tmp_path / 'config.json').write_text(json.dumps(hf))
  save_file(back, str(tmp_path / 'model.safetensors'))
  model, info = transformers.PeVideoModel.from_pretrained(str(tmp_path), output_loading_info=True)
  assert not info['missing_keys'] and not info['unexpected_keys'], info
  loaded = {k: v.numpy() for k, v in model.state_dict().items()}
  assert sorted(back) == sorted(state) and set(state) <= set(loaded)
  for key, value in state.items():
    assert back[key].dtype == value.dtype and back[key].shape == value.shape, key
    assert np.array_equal(back[key], value) and np.array_equal(loaded[key], value), key


VISION = ('video_config', 'vision_config')


@pytest.mark.parametrize('path, value, field', [
    (('video_config', 'rope_parameters'), {'rope_type': 'linear', 'factor': 2.0}, 'video_config.rope_parameters'),
    (('text_config', 'model_type'), 'bert', 'text_config.model_type'),
    (('video_config', 'num_key_value_heads'), 3, 'video_config.num_key_value_heads'),
    (VISION + ('architecture',), 'vit_base_patch16_224', 'video_config.vision_config.architecture'),
    (VISION + ('model_args', 'qk_norm'), True, 'video_config.vision_config.model_args.qk_norm'),
    (VISION + ('model_args', 'num_heads'), 3, 'video_config.vision_config.model_args.num_heads'),
    (VISION + ('model_args', 'mlp_ratio'), '4', 'video_config.vision_config.model_args.mlp_ratio'),
])
def test_a_config_it_cannot_express_is_refused_in_one_line_naming_the_field(reference, path, value, field):
  config = json.loads(json.dumps(reference[0]))
  functools.reduce(lambda d, k: d[k], path[:-1], config)[path[-1]] = value
  with pytest.raises(ValueError) as info:
    hf_pe_video.read_config(config)
  message = str(info.value)
  assert '\n' not in message and f'hf_config.{field}' in message, message


def test_a_missing_weight_is_named(reference):
  config, state = reference[:2]
  partial = {k: v for k, v in state.items() if k != 'video_encoder.output.weight'}
  with pytest.raises(ValueError, match='no video_encoder.output.weight'):
    hf_pe_video.params_of(partial, config)


def test_a_tensor_it_does_not_read_is_refused(reference):
  config, state = reference[:2]
  with pytest.raises(ValueError, match="1 tensor.s. vvt's PE video model does not read: extra.weight"):
    hf_pe_video.params_of({**state, 'extra.weight': np.zeros(1, np.float32)}, config)


def test_a_folder_of_another_model_is_refused_before_its_weights_are_read(reference, tmp_path):
  (tmp_path / 'config.json').write_text(json.dumps({**reference[0], 'model_type': 'videoprism'}))
  (tmp_path / 'model.safetensors').write_bytes(b'not read')
  with pytest.raises(ValueError) as info:
    hf_pe_video.read_folder(str(tmp_path))
  assert str(info.value) == "hf_config.model_type is 'videoprism', not 'pe_video'"


@pytest.mark.parametrize('architecture', sorted(hf_pe_video.PE_CORE))
def test_the_pe_core_table_is_timm_s(architecture):
  """Each vit_pe_core_* as timm builds it (with one block: the table's depths are eva.py's, not built here)."""
  import timm
  s = hf_pe_video.frame_spec({'video_config': {'vision_config': {
      'architecture': architecture, 'num_classes': 8, 'model_args': {'depth': 1}}}})
  m = timm.create_model(architecture, pretrained=False, num_classes=8, depth=1)
  block, rope, pool = m.blocks[0], m.rope, m.attn_pool
  assert (tuple(m.patch_embed.img_size), m.patch_embed.patch_size[0], m.embed_dim) == (
      s.image_size, s.patch_size, s.embed_dim)
  assert (block.attn.num_heads, block.mlp.fc1.out_features, block.gamma_1 is not None) == (
      s.num_heads, s.mlp_dim, s.layer_scale)
  assert (m.cls_token is not None, tuple(rope.ref_feat_shape), rope.grid_offset, rope.grid_indexing == 'xy',
          rope.temperature) == (s.class_token, s.ref_grid, s.rope_offset, s.rope_xy, s.rope_temperature)
  assert (pool.num_heads, pool.mlp.fc1.out_features, m.head.out_features) == (s.pool_heads, s.pool_mlp_dim, 8)
