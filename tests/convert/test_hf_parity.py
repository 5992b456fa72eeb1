"""Hugging Face converters against transformers itself (random-initialised small models built locally from a
config, no hub), and the official TimeSformer / X-ViT converters through real PyTorch checkpoint files."""
import json

import jax
import numpy as np
import pytest

from tests.conftest import FIXTURES
from vvt.convert import conversion
from vvt.convert import hf_vivit
from vvt.convert import timesformer
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

# Converter parity within 1e-5 on logits of modest magnitude (|logits| < ~2: tiny models, weights at the shared
# fixtures' scales N(0,1)/sqrt(fan_in), unit-normal video), float32 references, matmuls at 'highest' precision
# (conftest): measured more than 10x below 1e-5, so the order XLA sums in cannot reach it.
ATOL = 1e-5
VIDEO = np.random.default_rng(0).standard_normal((2, 4, 16, 16, 3)).astype(np.float32)


def _randomise(model, seed=1):
  """Every tensor random (the zero-initialised ones too), at scales that keep attention peaked."""
  g = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if 'layernorm' in name and name.endswith('weight') or name.startswith('fc_norm.weight'):
        p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
      elif p.ndim >= 2 and 'embed' not in name and 'token' not in name:
        p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(np.prod(p.shape[1:])))
      elif p.ndim == 1:
        p.copy_(0.1 * torch.randn(p.shape, generator=g))
      else:
        p.copy_(0.5 * torch.randn(p.shape, generator=g))
  return model


def _state(model):
  return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def _hf_logits(model, video_):
  with torch.no_grad():
    return model(torch.from_numpy(video_).permute(0, 1, 4, 2, 3)).logits.numpy()


def _vvt_logits(conv, video_):
  return np.asarray(jax.jit(vvt.models.build(conv.model_config()).apply)({'params': conv.params}, video_))


def _timesformer(attention_type, **kw):
  cfg = transformers.TimesformerConfig(image_size=16, num_frames=4, patch_size=8, hidden_size=32,
                                       num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                       num_labels=5, attention_type=attention_type, **kw)
  return _randomise(transformers.TimesformerForVideoClassification(cfg).eval()), cfg


@pytest.mark.parametrize('attention_type', ['divided_space_time', 'joint_space_time', 'space_only'])
def test_hf_timesformer_matches_transformers(attention_type):
  model, cfg = _timesformer(attention_type)
  ref = _hf_logits(model, VIDEO)
  conv = timesformer.convert_hf(_state(model), cfg.to_dict())
  if attention_type == 'space_only':  # HF returns one row per frame; vvt their mean (linear classifier).
    ref = ref.reshape(2, 4, -1).mean(axis=1)
  assert conv.report.unused == []
  assert np.abs(_vvt_logits(conv, VIDEO) - ref).max() < ATOL


def test_hf_timesformer_config_numerics_are_taken():
  model, cfg = _timesformer('divided_space_time', layer_norm_eps=1e-5, hidden_act='gelu_new', qkv_bias=False)
  conv = timesformer.convert_hf(_state(model), cfg.to_dict())
  m = vvt.models.resolve(conv.model_config())
  assert (m.layer_norm_eps, m.gelu_approximate, m.qkv_bias) == (1e-5, True, False)
  assert np.abs(_vvt_logits(conv, VIDEO) - _hf_logits(model, VIDEO)).max() < ATOL


def _vivit(**kw):
  cfg = transformers.VivitConfig(image_size=16, num_frames=4, tubelet_size=[2, 8, 8], hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=5,
                                 **kw)
  return _randomise(transformers.VivitForVideoClassification(cfg).eval()), cfg


NEW_TO_OLD = (('vivit.layers.', 'vivit.encoder.layer.'), ('attention.q_proj', 'attention.attention.query'),
              ('attention.k_proj', 'attention.attention.key'), ('attention.v_proj', 'attention.attention.value'),
              ('attention.o_proj', 'attention.output.dense'), ('mlp.fc1', 'intermediate.dense'),
              ('mlp.fc2', 'output.dense'))


@pytest.mark.parametrize('names,hidden_act', [('new', 'gelu_fast'), ('old', 'gelu')])
def test_hf_vivit_matches_transformers(names, hidden_act):
  model, cfg = _vivit(hidden_act=hidden_act)
  state = _state(model)
  assert any('q_proj' in k for k in state)  # transformers 5 names
  if names == 'old':
    renamed = {}
    for k, v in state.items():
      for new, old in NEW_TO_OLD:
        k = k.replace(new, old)
      renamed[k] = v
    state = renamed
    assert any('attention.attention.query' in k for k in state)
  conv = hf_vivit.convert(state, cfg.to_dict())
  assert conv.report.unused == []
  assert vvt.models.resolve(conv.model_config()).gelu_approximate is (hidden_act != 'gelu')
  assert np.abs(_vvt_logits(conv, VIDEO) - _hf_logits(model, VIDEO)).max() < ATOL


def test_hf_folder_with_config_json(tmp_path):
  """A saved HF model folder (config.json + model.safetensors, written locally) converts without hints."""
  model, _ = _vivit()
  model.save_pretrained(tmp_path)
  conv = video.convert('hf_vivit', str(tmp_path))
  assert np.abs(_vvt_logits(conv, VIDEO) - _hf_logits(model, VIDEO)).max() < ATOL


@pytest.mark.parametrize('attention_type', ['divided_space_time', 'joint_space_time', 'space_only'])
def test_official_timesformer_checkpoint_file(tmp_path, attention_type):
  """Official checkpoints: {'model_state': {'model.<official name>': tensor}} in a .pyth, read with
  weights_only=True. HF names map 1:1 onto the official ones and give identical logits (fixture notes), so the
  official file is built from a transformers model."""
  model, _ = _timesformer(attention_type)
  official = timesformer.hf_to_official_names(_state(model))
  assert 'blocks.0.attn.qkv.weight' in official and 'head.weight' in official
  path = tmp_path / 'TimeSformer.pyth'
  torch.save({'model_state': {f'model.{k}': torch.from_numpy(v) for k, v in official.items()}, 'epoch': 15},
             path)
  cfg = vvt.models.get_config('timesformer', num_heads=4, num_frames=4)
  conv = video.convert('timesformer', str(path), cfg)
  ref = _hf_logits(model, VIDEO)
  if attention_type == 'space_only':
    ref = ref.reshape(2, 4, -1).mean(axis=1)
    # Official space_only averages frames BEFORE the final LayerNorm; HF's per-frame logits are after it.
    assert vvt.models.resolve(conv.model_config()).frame_aggregation == 'mean_before_norm'
    conv = conversion.Converted(conv.params, {**conv.model_fields, 'frame_aggregation': 'mean'}, conv.report)
  assert np.abs(_vvt_logits(conv, VIDEO) - ref).max() < ATOL


def test_xvit_checkpoint_file_with_module_prefix(tmp_path):
  """Real X-ViT checkpoints may carry DataParallel's `module.` prefix and the unused new_fc: both handled."""
  z = np.load(FIXTURES / 'xvit_mixing_ta.npz', allow_pickle=False)
  meta = json.loads((FIXTURES / 'xvit_mixing_ta.json').read_text())
  state = {f'module.{k[len("params/"):]}': torch.from_numpy(z[k]) for k in z.files if k.startswith('params/')}
  state['module.new_fc.weight'] = torch.zeros(10, 64)
  state['module.new_fc.bias'] = torch.zeros(10)
  path = tmp_path / 'xvit.pth'
  torch.save({'state_dict': state}, path)
  cfg = vvt.models.get_config('xvit', num_heads=4, image_size=32, num_frames=8,
                              mixing=dict(shift_div=meta['config']['shift_div']),  # 4 here; the default is 8
                              temporal_head=dict(num_heads=meta['config']['ta_head']['num_heads']))
  conv = video.convert('xvit', str(path), cfg)
  assert conv.report.unused == ['new_fc.bias', 'new_fc.weight']
  assert np.abs(_vvt_logits(conv, z['input']) - z['logits']).max() < ATOL


def test_torch_load_refuses_pickled_code(tmp_path):
  """weights_only=True: a file that would run code on unpickling is rejected, not executed."""
  class Evil:
    def __reduce__(self):
      return (print, ('executed!',))
  path = tmp_path / 'evil.pth'
  torch.save({'model_state': {'x': Evil()}}, path)
  with pytest.raises(Exception) as info:
    weight_files.load_state(str(path))
  assert 'weights_only' in str(info.value) or 'Unsupported' in str(info.value) or 'global' in str(info.value)


@pytest.mark.parametrize('image_size,patch', [(32, 8), (48, 8), (96, 16), (160, 16)])
def test_xvit_pos_resize_matches_torch_bicubic(image_size, patch):
  """X-ViT resizes its 224-px pos_embed grid at run time with F.interpolate(bicubic, scale_factor=
  (image_size/16)/(224/16)); the converter's float64 re-implementation matches torch, also off the grid nodes.

  Compared with torch's same kernel run in float64: what is tested is the formula (coordinates, weights, borders),
  not torch's float32 rounding (its float32 source coordinates are off by up to ~g ulps, which moves a value by up
  to ~1e-5 here). The converter returns float32: within one float32 ulp of the largest value."""
  from vvt.convert import xvit
  g = 224 // patch
  grid = np.random.default_rng(image_size).standard_normal((g, g, 6)).astype(np.float32)
  scale = (image_size / 16) / (224 / 16)
  ref = torch.nn.functional.interpolate(torch.from_numpy(grid.astype(np.float64)).permute(2, 0, 1)[None],
                                        scale_factor=scale, mode='bicubic')[0].permute(1, 2, 0).numpy()
  out = xvit.torch_bicubic_resize(grid, scale)
  assert out.shape == ref.shape == (image_size // patch, image_size // patch, 6) and out.dtype == np.float32
  assert np.abs(out - ref).max() <= np.finfo(np.float32).eps * np.abs(ref).max()


def test_hf_diff_only_config_json_uses_transformers_defaults(tmp_path):
  """A config.json without the default-valued fields: 12 heads (the default) must not be guessed from the width."""
  cfg = transformers.TimesformerConfig(image_size=16, num_frames=4, patch_size=8, hidden_size=48,
                                       num_hidden_layers=1, intermediate_size=64, num_labels=5)
  assert cfg.num_attention_heads == 12
  model = _randomise(transformers.TimesformerForVideoClassification(cfg).eval())
  model.save_pretrained(tmp_path)
  saved = json.loads((tmp_path / 'config.json').read_text())
  for default in ('num_attention_heads', 'layer_norm_eps', 'hidden_act', 'attention_type'):
    del saved[default]  # older transformers wrote configs as a diff against the defaults
  (tmp_path / 'config.json').write_text(json.dumps(saved))
  conv = video.convert('hf_timesformer', str(tmp_path))
  assert vvt.models.resolve(conv.model_config()).num_heads == 12
  assert np.abs(_vvt_logits(conv, VIDEO) - _hf_logits(model, VIDEO)).max() < ATOL
