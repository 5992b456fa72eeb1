"""`hf_vjepa2`: Hugging Face V-JEPA 2 folders -> vvt (joint attention with 3D RoPE, the attentive pooler), and back.

Every reference is transformers itself: tiny VJEPA2ForVideoClassification / VJEPA2Model built here from a config
with random weights at scales where attention is far from uniform (tests/convert/hf_encoders.py), saved with
`save_pretrained` and read back through `vvt.convert.video.convert`, as a downloaded folder would be."""
import copy
import json

import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file
import torch
import transformers
from transformers.models.vjepa2 import modeling_vjepa2

from tests.convert import hf_encoders as H
from vvt.convert import hf_export
from vvt.convert import hf_vjepa2
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models
from vvt.models import rope
from vvt.models import summary

# Two tiny models: head size 12 (three rotated parts of 4 channels, nothing left) and 16 (three parts of 4, the last
# 4 channels not rotated), 16- and 8-pixel patches, one and two pooler self-attention layers, with and without q/k/v
# biases. Shapes: the config's clip, a longer clip, a larger frame (RoPE: no table to interpolate), both at once.
FIXTURES = {
    'a': (dict(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, patch_size=16, crop_size=32,
               frames_per_clip=4, tubelet_size=2, num_pooler_layers=1, num_labels=5), 11,
          [(4, 32), (8, 32), (2, 48)]),
    'b': (dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, patch_size=8, crop_size=32,
               frames_per_clip=4, tubelet_size=2, num_pooler_layers=2, num_labels=7, qkv_bias=False), 12,
          [(4, 32), (6, 24)]),
}
PREDICTOR = dict(pred_hidden_size=16, pred_num_hidden_layers=1, pred_num_attention_heads=2)


def hf_config(name, **changes):
  fields, _, _ = FIXTURES[name]
  return transformers.VJEPA2Config(**{**fields, **PREDICTOR, **changes})


# (name, transformers model, its save_pretrained folder), made once per test session
built = H.session_builder('vjepa2', lambda name: H.randomise(
    transformers.VJEPA2ForVideoClassification(hf_config(name)), FIXTURES[name][1]))
classifier, classifier_a = H.classifier_fixtures(FIXTURES, built)


def reference(model, name, x):
  """transformers' float32 logits and its encoder features (last_hidden_state) in float64 for clip x (float32
  torch is itself ~4e-6 from float64 on the features, vvt ~1.5e-6); the model rebuilt with crop_size = the frame
  size (the same weights: transformers derives RoPE's rows and columns from crop_size)."""
  size = x.shape[2]
  if size != model.config.crop_size:
    resized = transformers.VJEPA2ForVideoClassification(hf_config(name, crop_size=size)).eval()
    resized.load_state_dict(model.state_dict())
    model = resized
  with torch.no_grad():
    logits = model(H.torch_video(x)).logits.numpy()
    features = copy.deepcopy(model.vjepa2).double()(H.torch_video(x).double(), skip_predictor=True)
  return logits, features.last_hidden_state.numpy()


def test_logits_and_features_within_1e5_at_every_shape(classifier):
  name, model, folder = classifier
  H.assert_parity_at_shapes('hf_vjepa2', folder, FIXTURES[name][2], lambda x: reference(model, name, x))
  x = H.clip(2, 4, 32)  # attention far from uniform (1 / L = 1 / 32 or less for every weight if it were)
  assert H.attention_peak(model.vjepa2, pixel_values_videos=H.torch_video(x), skip_predictor=True) > 0.3


def test_report_model_fields_and_parameter_count(classifier):
  name, model, folder = classifier
  conv = video.convert('hf_vjepa2', str(folder))
  r = conv.report
  assert r.initialised == [] and r.unused and all(u.startswith('vjepa2.predictor.') for u in r.unused)
  n_predictor = sum(p.numel() for k, p in model.named_parameters() if k.startswith('vjepa2.predictor.'))
  assert summary.count_params(conv.params) == model.num_parameters() - n_predictor
  m = vvt.models.resolve(conv.model_config())
  hf = FIXTURES[name][0]
  assert (m.attention, m.positional_embedding, m.classifier) == ('spatiotemporal', 'rope', 'attentive')
  assert m.tubelet == (2, hf['patch_size'], hf['patch_size']) and (m.num_frames, m.image_size) == (4, 32)
  assert (m.qkv_bias, m.gelu_approximate, m.layer_norm_eps, m.encoder_norm_eps) == (
      hf.get('qkv_bias', True), False, 1e-6, 1e-6)
  p = m.attentive_pooler
  assert (p.cross_attention, p.depth, p.num_heads, p.mlp_dim, p.num_queries, p.per_dim_scale) == (
      'block', hf['num_pooler_layers'], hf['num_attention_heads'], 4 * hf['hidden_size'], 1, False)


def test_rope_is_transformers_rotation():
  """vvt's rotation of queries (B, T, N, H, d_h) = transformers' VJEPA2RopeAttention.apply_rotary_embeddings for
  head sizes with and without unrotated channels, on a grid of 3 x 2 x 4 tokens."""
  for head_dim in (12, 16, 64, 22):
    cfg = transformers.VJEPA2Config(hidden_size=2 * head_dim, num_attention_heads=2, crop_size=2 * 16,
                                    patch_size=16)
    attn = modeling_vjepa2.VJEPA2RopeAttention(cfg, cfg.hidden_size, 2)
    grid = (3, 2, 2)
    x = np.random.default_rng(head_dim).standard_normal((2, 3, 4, 2, head_dim)).astype(np.float32)
    xt = torch.from_numpy(x.reshape(2, 12, 2, head_dim)).transpose(1, 2)  # (B, H, T*N, d_h)
    with torch.no_grad():
      ref = attn.apply_rotary_embeddings(xt, attn.get_position_ids(xt.transpose(1, 2).reshape(2, 12, -1)))
    ref = ref.transpose(1, 2).numpy().reshape(x.shape)
    got = np.asarray(rope.rotate(x, grid))
    assert H.max_diff(got, ref) < 1e-6, head_dim
    assert np.abs(got - x).max() > 0.1  # positions other than 0 are rotated
    s = rope.split(head_dim)
    np.testing.assert_array_equal(got[..., 3 * s:], x[..., 3 * s:])  # the channels left over are not


def test_negative_controls_each_miss_the_logits(classifier_a, monkeypatch):
  """Without RoPE, or with the frequencies per pair (the fix the V-JEPA 2 code mentions but its weights do not
  use), the logits are off: the parity above is not an accident of near-uniform attention."""
  name, model, folder = classifier_a
  x = H.clip(2, 4, 32, seed=3)
  ref, _ = reference(model, name, x)
  conv = video.convert('hf_vjepa2', str(folder))
  assert H.max_diff(H.run_vvt(conv, x, positional_embedding='none')[0], ref) > 0.05
  tables = rope.tables.__wrapped__

  def per_pair(grid, head_dim):
    cos, sin = tables(grid, head_dim)
    s = rope.split(head_dim)
    for part in range(3):
      block = slice(part * s, (part + 1) * s)
      half = cos[:, block][:, :s // 2], sin[:, block][:, :s // 2]
      cos[:, block], sin[:, block] = np.repeat(half[0], 2, axis=1), np.repeat(half[1], 2, axis=1)
    return cos, sin

  monkeypatch.setattr(rope, 'tables', per_pair)
  assert H.max_diff(H.run_vvt(conv, x)[0], ref) > 1e-3


def test_bare_model_gets_a_fresh_pooler_and_head(tmp_path):
  """A VJEPA2Model folder (encoder + predictor): the features match, the predictor is unused, a new pooler (vvt's
  initialisation) and a zero classifier of the config's classes are reported as freshly initialised."""
  model = H.randomise(transformers.VJEPA2Model(hf_config('a')), 21)
  folder = H.save(model, tmp_path / 'bare')
  conv = video.convert('hf_vjepa2', str(folder), vvt.models.get_config('vivit', num_classes=3))
  initialised = sorted(n for n, _ in conv.report.initialised)
  assert 'head/output_projection/kernel' in initialised and 'pooler/query_tokens' in initialised
  assert all(n.startswith(('pooler/', 'head/')) for n in initialised)
  assert conv.report.unused and all(u.startswith('predictor.') for u in conv.report.unused)
  x = H.clip(2, 4, 32, seed=5)
  logits, features = H.run_vvt(conv, x)
  with torch.no_grad():
    ref = model(H.torch_video(x), skip_predictor=True).last_hidden_state.numpy()
  assert H.max_diff(features, ref) < H.ATOL
  assert logits.shape == (2, 3) and np.all(logits == 0)  # a fresh vvt head starts at zero
  pretraining = video.convert('hf_vjepa2', str(folder))  # no config: the pretraining model, its predictor kept
  assert 'predictor' in pretraining.params and pretraining.model_fields['num_classes'] == 1
  with pytest.raises(ValueError, match='no classifier .* give the number of classes'):
    hf_vjepa2.convert(load_file(str(folder / 'model.safetensors')), json.loads((folder / 'config.json').read_text()))


@pytest.mark.parametrize('change,message', [
    (dict(model_type='videomae'), "hf_config.model_type is 'videomae', not 'vjepa2'"),
    (dict(hidden_act='relu'), "hf_config.hidden_act='relu' is not a GELU"),
    (dict(in_chans=1), 'hf_config.in_chans=1: vvt models take RGB video'),
    (dict(patch_size=[16, 8]), 'hf_config.patch_size=[16, 8]: vvt takes square patches'),
    (dict(tubelet_size=4), 'hf_config.tubelet_size=4 but the patch embedding kernel has shape'),
    (dict(num_hidden_layers=1), 'hf_config.num_hidden_layers=1 but the checkpoint also has layers [1]'),
    (dict(num_pooler_layers=3), "hf_config.num_pooler_layers=3 but the checkpoint's pooler has 1"),
    (dict(frames_per_clip=5), 'num_frames=5 is not a multiple of hf_config.tubelet_size=2'),
])
def test_what_vvt_cannot_express_is_one_line_naming_the_field(classifier_a, tmp_path, change, message):
  _, _, folder = classifier_a
  said = H.refusal('hf_vjepa2', H.folder_with_config(folder, tmp_path, change))
  assert message in said, said


def test_missing_tensor_and_pickle_are_one_line(classifier_a, tmp_path):
  _, model, folder = classifier_a
  state = {k: v.numpy() for k, v in model.state_dict().items() if k != 'pooler.cross_attention_layer.mlp.fc2.bias'}
  (tmp_path / 'm').mkdir()
  save_file(state, str(tmp_path / 'm' / 'model.safetensors'))
  (tmp_path / 'm' / 'config.json').write_text((folder / 'config.json').read_text())
  with pytest.raises(weight_files.WeightFileError) as info:
    video.convert('hf_vjepa2', str(tmp_path / 'm'))
  assert "'pooler.cross_attention_layer.mlp.fc2.bias' is missing" in str(info.value)
  assert '\n' not in str(info.value)
  (tmp_path / 'p').mkdir()
  (tmp_path / 'p' / 'config.json').write_text((folder / 'config.json').read_text())
  (tmp_path / 'p' / 'pytorch_model.bin').write_bytes(b'PK\x03\x04' + b'\0' * 64)  # never opened
  with pytest.raises(weight_files.WeightFileError, match='pytorch_model.bin: hf_vjepa2 reads safetensors only'):
    video.convert('hf_vjepa2', str(tmp_path / 'p'))


def test_round_trip_is_bit_identical_and_loads_in_transformers(classifier, tmp_path):
  """HF -> vvt -> HF: every tensor of the classifier (all but the predictor) comes back bit for bit; the folder
  written from it loads with `from_pretrained`, and its logits are vvt's within 1e-5."""
  name, model, folder = classifier
  conv = video.convert('hf_vjepa2', str(folder))
  names = [f'c{i}' for i in range(conv.model_fields['num_classes'])]
  _, hf, state = hf_export.to_hf(conv.params, conv.model_config(), class_names=names)
  original = {k: v.numpy() for k, v in model.state_dict().items() if not k.startswith('vjepa2.predictor.')}
  assert sorted(k for k in state if not k.startswith('vjepa2.predictor.')) == sorted(original)
  for k, v in original.items():
    assert state[k].dtype == v.dtype and state[k].shape == v.shape and np.array_equal(state[k], v), k
  out = tmp_path / 'exported'
  out.mkdir()
  save_file(state, str(out / 'model.safetensors'), metadata={'format': 'pt'})
  (out / 'config.json').write_text(json.dumps(hf))
  loaded = transformers.VJEPA2ForVideoClassification.from_pretrained(str(out)).eval()
  assert loaded.config.id2label[1] == 'c1'
  x = H.clip(2, 4, 32, seed=9)
  with torch.no_grad():
    ref = loaded(H.torch_video(x)).logits.numpy()
  assert H.max_diff(H.run_vvt(conv, x)[0], ref) < H.ATOL


def test_to_hf_refuses_what_transformers_cannot_express_in_one_line(classifier_a):
  _, _, folder = classifier_a
  conv = video.convert('hf_vjepa2', str(folder))
  for change, field in ((dict(attention='divided'), 'model.attention'),
                        (dict(layer_norm_scale_offset=1.0), 'model.layer_norm_scale_offset'),
                        (dict(attentive_pooler=dict(conv.model_fields['attentive_pooler'], num_queries=2)),
                         'model.attentive_pooler')):
    with pytest.raises(ValueError) as info:
      hf_vjepa2.to_hf(conv.params, vvt.models.resolve(conv.model_config(**change)))
    assert str(info.value).startswith(field) and '\n' not in str(info.value), str(info.value)
