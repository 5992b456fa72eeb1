"""`hf_videoprism`: Hugging Face VideoPrism folders -> vvt (space_then_time, logit cap, offset LayerNorm, attention
pooler), and back.

Every reference is transformers itself: tiny VideoPrismForVideoClassification / VideoPrismVisionModel /
VideoPrismClipModel built here from a config with random weights at scales where attention is far from uniform
(tests/convert/hf_encoders.py), saved with `save_pretrained` and read back through `vvt.convert.video.convert`.
Other clip lengths and frame sizes run against transformers' interpolate_pos_encoding=True."""
import copy
import json

import numpy as np
import pytest
from safetensors.numpy import save_file
import torch
import transformers

from tests.convert import hf_encoders as H
from vvt.convert import hf_export
from vvt.convert import hf_videoprism
from vvt.convert import video
import vvt.models
from vvt.models import embedding
from vvt.models import norms
from vvt.models import summary

# Two tiny models: a cap of 5 (so the tanh bends the scores, not only the tail) on 8-pixel patches, and
# VideoPrism's own cap 50 with a pooler head size (intermediate / heads = 24) other than the encoder's (12).
# Shapes: the tables' clip, longer and shorter clips, larger and smaller frames (tables resized both ways).
FIXTURES = {
    'a': (dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_spatial_layers=2,
               num_temporal_layers=2, image_size=32, tubelet_size=[1, 8, 8], num_frames=4, num_labels=5,
               attn_logit_softcapping=5.0), 31, [(4, 32), (6, 48), (3, 24)]),
    'b': (dict(hidden_size=48, intermediate_size=96, num_attention_heads=4, num_spatial_layers=1,
               num_temporal_layers=2, image_size=48, tubelet_size=[1, 16, 16], num_frames=3, num_labels=7), 32,
          [(3, 48), (5, 64)]),
}


def hf_config(name, **changes):
  return transformers.VideoPrismVisionConfig(**{**FIXTURES[name][0], **changes})


built = H.session_builder('videoprism', lambda name: H.randomise(
    transformers.VideoPrismForVideoClassification(hf_config(name)), FIXTURES[name][1], norm_offset=0.0))
classifier, classifier_a = H.classifier_fixtures(FIXTURES, built)


def reference(model, x):
  """transformers' float32 logits (B, C) and its vision model's features (last_hidden_state) in float64, with
  interpolate_pos_encoding where the clip is not the tables'."""
  cfg = model.config
  resize = (x.shape[1], x.shape[2]) != (cfg.num_frames, cfg.image_size)
  with torch.no_grad():
    logits = model(H.torch_video(x), interpolate_pos_encoding=resize).logits.numpy()[:, 0]  # (B, 1, C) there
    vision = copy.deepcopy(model.vision_model).double()
    features = vision(H.torch_video(x).double(), interpolate_pos_encoding=resize).last_hidden_state.numpy()
  return logits, features


def test_logits_and_features_within_1e5_at_every_shape(classifier):
  name, model, folder = classifier
  H.assert_parity_at_shapes('hf_videoprism', folder, FIXTURES[name][2], lambda x: reference(model, x))
  cfg = model.config
  x = H.clip(2, cfg.num_frames, cfg.image_size)  # uniform spatial attention would give every weight 1 / N
  peak = H.attention_peak(model.vision_model, pixel_values_videos=H.torch_video(x))
  assert peak > 0.3, peak


def test_report_model_fields_and_parameter_count(classifier):
  name, model, folder = classifier
  conv = video.convert('hf_videoprism', str(folder))
  assert conv.report.initialised == [] and conv.report.unused == []
  assert summary.count_params(conv.params) == model.num_parameters()
  m = vvt.models.resolve(conv.model_config())
  hf = FIXTURES[name][0]
  assert (m.attention, m.positional_embedding, m.classifier, m.layer_norm_scale_offset) == (
      'space_then_time', 'joint', 'attentive', 1.0)
  assert m.attention_logit_cap == hf.get('attn_logit_softcapping', 50.0) and m.gelu_approximate is False
  p = hf['tubelet_size'][1]
  assert m.tubelet == (1, p, p) and m.pos_table_grid == (hf['num_frames'], hf['image_size'] // p,
                                                        hf['image_size'] // p)
  assert (m.num_layers, m.temporal_layers, m.mlp_dim, m.temporal_mlp_dim) == (
      hf['num_spatial_layers'], hf['num_temporal_layers'], hf['intermediate_size'], hf['intermediate_size'])
  pooler = m.attentive_pooler
  assert (pooler.cross_attention, pooler.per_dim_scale, pooler.depth, pooler.head_dim) == (
      'plain', True, 0, hf['intermediate_size'] // hf['num_attention_heads'])


def test_negative_controls_each_miss_the_logits(classifier_a):
  """Without the logit cap or with flax's LayerNorm (scale without the + 1) the logits are off: the parity is not
  an accident of weights that make these no-ops."""
  _, model, folder = classifier_a
  x = H.clip(2, 4, 32, seed=3)
  ref, _ = reference(model, x)
  conv = video.convert('hf_videoprism', str(folder))
  assert H.max_diff(H.run_vvt(conv, x, attention_logit_cap=None)[0], ref) > 1e-3
  assert H.max_diff(H.run_vvt(conv, x, layer_norm_scale_offset=0.0)[0], ref) > 1e-2


def test_resize_weights_are_torch_antialiased_bilinear():
  """The table resize = torch's interpolate(bilinear, antialias=True) on the same grid, up and down."""
  rng = np.random.default_rng(0)
  for (h0, w0), (h, w) in (((4, 4), (6, 6)), ((6, 6), (4, 4)), ((16, 16), (7, 7)), ((3, 5), (8, 2)), ((5, 5), (5, 5))):
    table = rng.standard_normal((1, h0, w0, 8)).astype(np.float32)
    got = np.asarray(embedding.resize_table(table, (1, h, w)))
    with torch.no_grad():
      ref = torch.nn.functional.interpolate(torch.from_numpy(table).permute(0, 3, 1, 2), size=(h, w),
                                            mode='bilinear', antialias=True).permute(0, 2, 3, 1).numpy()
    assert H.max_diff(got, ref) < 1e-6, ((h0, w0), (h, w))


def test_offset_layer_norm_is_videoprisms():
  from transformers.models.videoprism import modeling_videoprism
  ln = modeling_videoprism.VideoPrismLayerNorm(16, eps=1e-6)
  with torch.no_grad():
    ln.weight.copy_(torch.randn(16))
    ln.bias.copy_(torch.randn(16))
  x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32) * 3 + 1
  module = norms.OffsetLayerNorm(epsilon=1e-6, offset=1.0)
  params = {'scale': ln.weight.detach().numpy(), 'bias': ln.bias.detach().numpy()}
  with torch.no_grad():
    ref = ln(torch.from_numpy(x)).numpy()
  assert H.max_diff(module.apply({'params': params}, x), ref) < 1e-5


def test_bare_vision_model_and_clip_model_get_a_fresh_head(tmp_path):
  """A VideoPrismVisionModel folder, and the video-text VideoPrismClipModel converted with a video model's config
  (its text tower, auxiliary layers and contrastive pooler unused; with a video-text config or none it keeps both
  towers: tests/convert/test_hf_videoprism_clip.py): the features match, a new pooler and a zero classifier of the
  config's classes."""
  vision = H.randomise(transformers.VideoPrismVisionModel(hf_config('a')), 41, norm_offset=0.0)
  clip_cfg = transformers.VideoPrismConfig(
      vision_config=hf_config('a').to_dict(),
      text_config=dict(hidden_size=32, intermediate_size=64, num_attention_heads=2, num_hidden_layers=1,
                       vocab_size=50))
  clip_model = H.randomise(transformers.VideoPrismClipModel(clip_cfg), 42, norm_offset=0.0)
  x = H.clip(2, 4, 32, seed=6)
  for name, model, tower in (('vision', vision, vision), ('clip', clip_model, clip_model.video_model.vision_model)):
    folder = H.save(model, tmp_path / name)
    conv = video.convert('hf_videoprism', str(folder), vvt.models.get_config('vivit', num_classes=3))
    initialised = sorted(n for n, _ in conv.report.initialised)
    assert 'pooler/query_tokens' in initialised and 'head/output_projection/kernel' in initialised
    assert all(n.startswith(('pooler/', 'head/')) for n in initialised)
    if name == 'clip':
      assert conv.report.unused and all(u.startswith(('text_model.', 'video_model.auxiliary_layers.',
                                                      'video_model.head')) for u in conv.report.unused)
      assert any(u.startswith('text_model.') for u in conv.report.unused)
    else:
      assert conv.report.unused == []
    logits, features = H.run_vvt(conv, x)
    with torch.no_grad():
      ref = tower(H.torch_video(x)).last_hidden_state.numpy()
    assert H.max_diff(features, ref) < H.ATOL, name
    assert logits.shape == (2, 3) and np.all(logits == 0)


@pytest.mark.parametrize('change,message', [
    (dict(model_type='vjepa2'), "hf_config.model_type is 'vjepa2', not one of"),
    (dict(hidden_act='relu'), "hf_config.hidden_act='relu' is not a GELU"),
    (dict(num_channels=1), 'hf_config.num_channels=1: vvt models take RGB video'),
    (dict(tubelet_size=[2, 8, 8]), "hf_config.tubelet_size=[2, 8, 8]: transformers' VideoPrism runs one-frame"),
    (dict(tubelet_size=[1, 8, 4]), 'hf_config.tubelet_size=[1, 8, 4]: vvt takes (t, p, p) tubelets'),
    (dict(image_size=[32, 48]), 'hf_config.image_size=[32, 48]: vvt takes square frames'),
    (dict(num_spatial_layers=1), 'hf_config.num_spatial_layers=1 but the checkpoint also has layers [1]'),
    (dict(tubelet_size=[1, 16, 16]), 'hf_config.tubelet_size=(1, 16, 16) but the patch embedding kernel'),
])
def test_what_vvt_cannot_express_is_one_line_naming_the_field(classifier_a, tmp_path, change, message):
  _, _, folder = classifier_a
  said = H.refusal('hf_videoprism', H.folder_with_config(folder, tmp_path, change))
  assert message in said, said


def test_round_trip_is_bit_identical_and_loads_in_transformers(classifier, tmp_path):
  """HF -> vvt -> HF: every tensor bit for bit; the folder written from it loads with `from_pretrained`, and its
  logits are vvt's within 1e-5, at the tables' clip and (interpolate_pos_encoding) at another one."""
  name, model, folder = classifier
  frames, size = FIXTURES[name][2][-1]
  conv = video.convert('hf_videoprism', str(folder), num_frames=frames, image_size=size)
  _, hf, state = hf_export.to_hf(conv.params, conv.model_config())
  original = {k: v.numpy() for k, v in model.state_dict().items()}
  assert sorted(state) == sorted(original)
  for k, v in original.items():
    assert state[k].dtype == v.dtype and state[k].shape == v.shape and np.array_equal(state[k], v), k
  assert (hf['num_frames'], hf['image_size']) == (model.config.num_frames, model.config.image_size)
  out = tmp_path / 'exported'
  out.mkdir()
  save_file(state, str(out / 'model.safetensors'), metadata={'format': 'pt'})
  (out / 'config.json').write_text(json.dumps(hf))
  loaded = transformers.VideoPrismForVideoClassification.from_pretrained(str(out)).eval()
  x = H.clip(2, frames, size, seed=9)
  with torch.no_grad():
    ref = loaded(H.torch_video(x), interpolate_pos_encoding=True).logits.numpy()[:, 0]
  assert H.max_diff(H.run_vvt(conv, x)[0], ref) < H.ATOL


def test_to_hf_refuses_what_transformers_cannot_express_in_one_line(classifier_a):
  _, _, folder = classifier_a
  conv = video.convert('hf_videoprism', str(folder))
  for change, field in ((dict(attention_logit_cap=None), 'model.attention_logit_cap'),
                        (dict(layer_norm_scale_offset=0.0), 'model.layer_norm_scale_offset'),
                        (dict(temporal_mlp_dim=32), 'model.temporal_mlp_dim')):
    with pytest.raises(ValueError) as info:
      hf_videoprism.to_hf(conv.params, vvt.models.resolve(conv.model_config(**change)))
    assert str(info.value).startswith(field) and '\n' not in str(info.value), str(info.value)
