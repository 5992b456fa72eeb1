"""`hf_videomae`: Hugging Face VideoMAE folders -> vvt joint space-time models without a class token.

Parity runs against fixtures made by transformers itself (tests/convert/fixtures/make_hf_videomae_fixture.py:
random weights, two sizes, mean pooling with fc_norm and the first-token variant), so no third-party code is
needed; where transformers is installed, the same is checked against models built here from its own code."""
import json
import pathlib
import shutil

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from vvt.convert import hf_videomae
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models
from vvt.models import embedding
from vvt.models import summary

# Converter parity within 1e-5 on logits of modest magnitude (|logits| < ~2: tiny models, weights at the shared
# fixtures' scales N(0,1)/sqrt(fan_in), unit-normal video), float32 references, matmuls at 'highest' precision
# (conftest): measured more than 10x below 1e-5, so the order XLA sums in cannot reach it.
ATOL = 1e-5
HERE = pathlib.Path(__file__).resolve().parent / 'fixtures'
NAMES = ('hf_videomae_mean', 'hf_videomae_first_token')


def _fixture(name):
  z = np.load(HERE / f'{name}.npz', allow_pickle=False)
  return HERE / name, {k: z[k] for k in z.files}, json.loads((HERE / f'{name}.json').read_text())


def _apply(conv, video_, **overrides):
  module = vvt.models.build(conv.model_config(**overrides))
  return module.apply({'params': conv.params}, video_, mutable=['intermediates'])


def _logits(conv, video_, **overrides):
  return np.asarray(jax.jit(lambda v: _apply(conv, v, **overrides))(video_)[0])


@pytest.fixture(scope='module', params=NAMES)
def converted(request):
  folder, z, meta = _fixture(request.param)
  return request.param, video.convert('hf_videomae', str(folder)), z, meta


def test_logits_within_1e5_and_transformers_parameter_count(converted):
  name, conv, z, meta = converted
  out = _logits(conv, z['input'])
  diff = float(np.abs(out - z['logits']).max())
  print(f'{name}: max |logit difference| = {diff:.3g}')
  assert out.shape == tuple(meta['logits_shape']) and diff < ATOL
  assert conv.report.unused == [] and conv.report.initialised == []
  written = len(conv.report.loaded) + len({n for n, _ in conv.report.transformed})
  assert written == len(weight_files.flatten(conv.params))
  assert summary.count_params(conv.params) == meta['num_parameters']


def test_model_fields_from_the_config(converted):
  name, conv, _, meta = converted
  hf = meta['config']['hf_config']
  m = vvt.models.resolve(conv.model_config())
  assert (m.attention, m.classifier, m.positional_embedding) == ('spatiotemporal', 'gap', 'sinusoidal')
  assert m.tubelet == (hf['tubelet_size'], hf['patch_size'], hf['patch_size'])
  assert (m.num_frames, m.image_size, m.hidden_size, m.num_layers, m.num_heads, m.mlp_dim) == (
      hf['num_frames'], hf['image_size'], hf['hidden_size'], hf['num_hidden_layers'], hf['num_attention_heads'],
      hf['intermediate_size'])
  assert (m.qkv_bias, m.key_bias, m.gelu_approximate) == (True, False, False) and hf['hidden_act'] == 'gelu'
  assert m.layer_norm_eps == hf['layer_norm_eps']
  if hf['use_mean_pooling']:  # fc_norm is nn.LayerNorm(hidden_size): torch's eps, not the config's
    assert (m.pooling, m.encoder_norm_eps) == ('mean_then_norm', 1e-5) and hf['layer_norm_eps'] == 1e-12
  else:
    assert (m.pooling, m.encoder_norm_eps) == ('first_token', hf['layer_norm_eps'])


def test_the_fixed_position_table_is_transformers_and_no_parameter(converted):
  _, conv, z, _ = converted
  m = vvt.models.resolve(conv.model_config())
  nt, nh, nw = vvt.models.config.token_grid(m)
  table = embedding.sinusoidal_table(nt * nh * nw, m.hidden_size)
  assert table.shape == z['position_table'].shape
  assert np.abs(table - z['position_table']).max() < 1e-6
  assert 'posembed' not in conv.params['encoder']  # a constant: no optimiser step can move it


def test_the_pooling_and_the_gelu_matter(converted):
  """Negative controls: the other pooling, the tanh GELU, the first token vs the mean each miss the logits."""
  name, conv, z, _ = converted
  other = 'mean' if name == 'hf_videomae_mean' else 'mean_then_norm'
  assert np.abs(_logits(conv, z['input'], pooling=other) - z['logits']).max() > 0.01
  assert np.abs(_logits(conv, z['input'], gelu_approximate=True) - z['logits']).max() > 5 * ATOL


def test_both_names_of_the_biases():
  """Files (save_pretrained of transformers 5, the hub's, VideoMAE's own code) hold `q_bias` / `v_bias` beside
  bias-free Linears; transformers 5's in-memory state dict names them `query.bias` / `value.bias`."""
  folder, z, meta = _fixture('hf_videomae_first_token')
  state = load_file(str(folder / 'model.safetensors'))
  assert any(k.endswith('attention.q_bias') for k in state) and not any(k.endswith('query.bias') for k in state)
  new = {k.replace('attention.q_bias', 'attention.query.bias').replace('attention.v_bias', 'attention.value.bias'): v
         for k, v in state.items()}
  hf = dict(meta['config']['hf_config'])
  hf['qkv_bias'] = hf.pop('qv_bias')  # the older config spelling
  conv = hf_videomae.convert(new, hf)
  assert conv.report.unused == []
  assert np.abs(_logits(conv, z['input']) - z['logits']).max() < ATOL


def _backbone_state(name, pretraining=False):
  """The fixture's encoder as a bare VideoMAEModel (no prefix, no head) or a VideoMAEForPreTraining file."""
  folder, z, meta = _fixture(name)
  state = load_file(str(folder / 'model.safetensors'))
  if pretraining:
    body = {k: v for k, v in state.items() if k.startswith('videomae.')}
    body.update({'encoder_to_decoder.weight': np.zeros((16, 32), np.float32),
                 'mask_token': np.zeros((1, 1, 16), np.float32)})
    return body, z, meta
  return {k[len('videomae.'):]: v for k, v in state.items() if k.startswith('videomae.')}, z, meta


@pytest.mark.parametrize('pretraining', [False, True])
def test_backbone_gets_a_fresh_head_of_the_configs_classes(tmp_path, pretraining):
  """A backbone folder (bare VideoMAEModel, or VideoMAEForPreTraining's encoder + decoder parts) converts with a
  new head of the given config's num_classes."""
  state, z, meta = _backbone_state('hf_videomae_mean', pretraining)
  (tmp_path / 'm').mkdir()
  save_file(state, str(tmp_path / 'm' / 'model.safetensors'))
  (tmp_path / 'm' / 'config.json').write_text(json.dumps(meta['config']['hf_config']))
  conv = video.convert('hf_videomae', str(tmp_path / 'm'), vvt.models.get_config('vivit', num_classes=3))
  assert sorted(n for n, _ in conv.report.initialised) == [
      'encoder/encoder_norm/bias', 'encoder/encoder_norm/scale', 'head/output_projection/bias',
      'head/output_projection/kernel']
  assert conv.report.unused == (['encoder_to_decoder.weight', 'mask_token'] if pretraining else [])
  logits, inter = jax.jit(lambda v: _apply(conv, v))(z['input'])
  assert logits.shape == (2, 3) and np.all(np.asarray(logits) == 0)  # a fresh vvt head starts at zero
  tokens = np.asarray(inter['intermediates']['encoder']['tokens'][0])  # (B, T, N, D), before the final norm
  # Hidden states, not logits: up to |5.3| here, after 2 blocks of sums of up to 64 terms, so two float32 programs
  # (transformers on the fixture's machine, XLA here) differ by a few ulps of the largest value (measured 7.5);
  # allowed: 64 ulps of it (4e-5). A conversion mistake moves them by O(1).
  hidden = z['last_hidden_state']
  assert np.abs(tokens.reshape(hidden.shape) - hidden).max() < 64 * np.finfo(np.float32).eps * np.abs(hidden).max()


def test_backbone_without_classes_is_one_line():
  state, _, meta = _backbone_state('hf_videomae_mean')
  with pytest.raises(ValueError, match='no classifier: give the number of classes'):
    hf_videomae.convert(state, meta['config']['hf_config'])


@pytest.mark.parametrize('change,message', [
    (dict(hidden_act='relu'), "hf_config.hidden_act='relu' is not a GELU"),
    (dict(model_type='timesformer'), "hf_config.model_type is 'timesformer'"),
    (dict(attention_type='divided_space_time'), "hf_config.attention_type='divided_space_time'"),
    (dict(num_frames=9), 'hf_config.num_frames=9 is not a multiple of hf_config.tubelet_size=2'),
    (dict(tubelet_size=4), 'hf_config.tubelet_size=4 but the patch embedding kernel has shape'),
    (dict(patch_size=8), 'hf_config.patch_size=8 but the patch embedding kernel'),
    (dict(patch_size=[16, 8]), 'hf_config.patch_size=[16, 8]: vvt takes square patches'),
    (dict(image_size=[32, 40]), 'hf_config.image_size=(32, 40) is not a multiple of hf_config.patch_size=16'),
    (dict(num_channels=1), 'hf_config.num_channels=1: vvt models take RGB video'),
    (dict(num_hidden_layers=1), 'hf_config.num_hidden_layers=1 but the checkpoint also has layers [1]'),
])
def test_what_vvt_cannot_express_is_one_line_naming_the_field(tmp_path, change, message):
  folder, _, _ = _fixture('hf_videomae_mean')
  shutil.copytree(folder, tmp_path / 'm')
  cfg = json.loads((tmp_path / 'm' / 'config.json').read_text())
  (tmp_path / 'm' / 'config.json').write_text(json.dumps({**cfg, **change}))
  with pytest.raises(ValueError) as info:
    video.convert('hf_videomae', str(tmp_path / 'm'))
  text = str(info.value)
  assert message in text and '\n' not in text, text


def test_missing_tensor_is_one_line_naming_it_and_the_file(tmp_path):
  folder, _, _ = _fixture('hf_videomae_first_token')
  shutil.copytree(folder, tmp_path / 'm')
  path = tmp_path / 'm' / 'model.safetensors'
  state = load_file(str(path))
  del state['videomae.encoder.layer.2.attention.attention.v_bias']
  save_file(state, str(path))
  with pytest.raises(weight_files.WeightFileError) as info:
    video.convert('hf_videomae', str(tmp_path / 'm'))
  text = str(info.value)
  assert "'videomae.encoder.layer.2.attention.attention.v_bias' is missing" in text and str(path) in text
  assert '\n' not in text, text


# A key bias adds q_i . b_k / sqrt(d_h) to every logit of query i's row, which softmax ignores; the two programs
# then differ by rounding only. Each logit is a dot product of d_h = 8 terms rounded once per term: off by at most
# ~8 ulps of the largest logit L, so every softmax weight moves by <= ~8 eps L relative, and after the 2 layers
# (and the head) the output by <= KEY_BIAS_FACTOR = 8 x 2 of those, relative to its magnitude. Measured
# (6 seeds): <= 0.41 eps L max|output|.
KEY_BIAS_FACTOR = 16


def _with_biases(flat, which, rng, scale=2.0):
  """`flat` with every block's `which` (query/key/value) bias random: N(0, scale^2), shape (H, d_h)."""
  return {k: (scale * rng.standard_normal(v.shape)).astype(np.float32) if k.endswith(f'/{which}/bias') else v
          for k, v in flat.items()}


def _max_attention_logit(module, params, x):
  """max |q . k| / sqrt(d_h) over the blocks, heads and token pairs of joint attention (float64, from the
  captured query and key projections (B, T, N, H, d_h))."""
  _, inter = jax.jit(lambda p, v: module.apply({'params': p}, v, mutable=['intermediates'],
                                               capture_intermediates=lambda m, _: m.name in ('query', 'key')))(
      params, x)
  largest = 0.0
  for block in inter['intermediates']['encoder']['layers'].values():
    q, k = (np.asarray(block['joint_attention'][n]['__call__'][0], np.float64) for n in ('query', 'key'))
    q, k = (t.reshape(t.shape[0], -1, *t.shape[-2:]) for t in (q, k))  # (B, L, H, d_h)
    largest = max(largest, float(np.abs(np.einsum('bqhd,bkhd->bhqk', q, k)).max() / np.sqrt(q.shape[-1])))
  return largest


def test_key_bias_false_only_drops_the_key_bias():
  """Existing models keep every parameter; key_bias=False removes exactly the key biases, and random key biases
  never change the output (within KEY_BIAS_FACTOR x eps x max |attention logit| x max |output|), while the same
  random query biases do."""
  cfg = vvt.models.get_config('vivit', attention='spatiotemporal', variant='Ti/16', num_frames=4, image_size=32,
                              hidden_size=32, num_layers=2, num_heads=4, mlp_dim=64, num_classes=3,
                              classifier='gap', tubelet=(2, 16, 16))
  cut_cfg = vvt.models.get_config(**{**cfg.to_dict(), 'key_bias': False})
  full = weight_files.flatten(video.abstract_params(cfg))
  cut = weight_files.flatten(video.abstract_params(cut_cfg))
  assert sorted(set(full) - set(cut)) == [f'encoder/layers/block_{i}/joint_attention/key/bias' for i in range(2)]
  x = np.random.default_rng(0).standard_normal((2, 4, 32, 32, 3)).astype(np.float32)
  module, without_key = vvt.models.build(cfg), vvt.models.build(cut_cfg)
  flat = {k: np.asarray(v) for k, v in weight_files.flatten(module.init(jax.random.key(0), x)['params']).items()}
  head = 'head/output_projection/kernel'  # zero at init: the output would be 0 whatever the attention does
  flat[head] = np.random.default_rng(1).standard_normal(flat[head].shape).astype(np.float32)
  params = weight_files.unflatten(_with_biases(flat, 'key', np.random.default_rng(2)))
  a = np.asarray(jax.jit(lambda p, v: module.apply({'params': p}, v))(params, x))
  b = np.asarray(jax.jit(lambda p, v: without_key.apply({'params': p}, v))(
      weight_files.unflatten({k: v for k, v in flat.items() if k in cut}), x))
  bound = KEY_BIAS_FACTOR * np.finfo(np.float32).eps * _max_attention_logit(module, params, x) * np.abs(a).max()
  assert np.abs(a).max() > 1 and np.abs(a - b).max() <= bound, (np.abs(a - b).max(), bound)
  moved = np.asarray(jax.jit(lambda p, v: module.apply({'params': p}, v))(
      weight_files.unflatten(_with_biases(flat, 'query', np.random.default_rng(2))), x))
  assert np.abs(moved - b).max() > 1000 * bound, (np.abs(moved - b).max(), bound)  # a query bias does matter


def test_pooling_needs_a_class_token_less_model():
  cfg = vvt.models.get_config('vivit', attention='spatiotemporal', pooling='first_token', classifier='token')
  with pytest.raises(ValueError, match="model.pooling='first_token' pools a class-token-less model"):
    vvt.models.resolve(cfg)
  with pytest.raises(ValueError, match='model.pooling must be one of'):
    vvt.models.resolve(vvt.models.get_config('vivit', pooling='max', classifier='gap'))


@pytest.mark.parametrize('mean,hidden,layers,patch', [(True, 32, 2, 16), (False, 64, 3, 8)])
def test_against_transformers_built_here(mean, hidden, layers, patch):
  """Where transformers is installed: VideoMAEForVideoClassification built from its own code at two sizes."""
  torch = pytest.importorskip('torch')
  transformers = pytest.importorskip('transformers')
  from tests.convert.fixtures.make_hf_videomae_fixture import randomise
  cfg = transformers.VideoMAEConfig(image_size=32, patch_size=patch, num_frames=8, tubelet_size=2,
                                    hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                                    intermediate_size=2 * hidden, num_labels=6, use_mean_pooling=mean)
  model = randomise(transformers.VideoMAEForVideoClassification(cfg).eval(), seed=7)
  x = np.random.default_rng(1).standard_normal((2, 8, 32, 32, 3)).astype(np.float32)
  with torch.no_grad():
    ref = model(torch.from_numpy(x).permute(0, 1, 4, 2, 3)).logits.numpy()
  conv = hf_videomae.convert({k: v.numpy() for k, v in model.state_dict().items()}, cfg.to_dict())
  assert np.abs(_logits(conv, x) - ref).max() < ATOL
  assert summary.count_params(conv.params) == model.num_parameters()


def test_videomae_b_parameters_and_flops():
  """VideoMAE ViT-B (16 x 224^2, Kinetics-400) as the converter writes it: transformers'
  VideoMAEForVideoClassification(VideoMAEConfig(num_labels=400)) has 86,534,800 parameters (the paper: 87M), and
  180 GFLOPs per view (VideoMAE Table, multiply-add = 1 FLOP)."""
  cfg = vvt.models.get_config('vivit', attention='spatiotemporal', variant='B/16x2', num_frames=16, image_size=224,
                              num_classes=400, classifier='gap', pooling='mean_then_norm', encoder_norm_eps=1e-5,
                              positional_embedding='sinusoidal', key_bias=False, layer_norm_eps=1e-12,
                              gelu_approximate=False)
  s = summary.summarise(cfg)
  assert s['params'] == 86_534_800
  assert abs(s['gflops'] - 180) / 180 < 0.05, s['gflops']


def test_attention_map_of_first_token_pooling_is_the_first_tokens_rollout():
  """With pooling='first_token' the representation is token 0's output: the map is its row of the rollout."""
  from vvt.inspection import attention_maps
  from vvt.models import spec
  folder, z, _ = _fixture('hf_videomae_first_token')
  conv = video.convert('hf_videomae', str(folder))
  cfg = conv.model_config()
  maps = attention_maps.attention_maps(conv.params, z['input'][:1], spec.spec_of(vvt.models.resolve(cfg)))
  row = attention_maps.rollout(maps.stages)[:, 0]
  np.testing.assert_allclose(maps.final.reshape(1, -1), row / row.sum(-1, keepdims=True), atol=1e-6)
  mean = attention_maps.rollout(maps.stages).mean(axis=1)
  assert np.abs(maps.final.reshape(1, -1) - mean / mean.sum(-1, keepdims=True)).max() > 1e-3  # not GAP's readout


def test_a_pickle_is_refused_in_one_line(tmp_path):
  folder, _, _ = _fixture('hf_videomae_mean')
  (tmp_path / 'm').mkdir()
  shutil.copy(folder / 'config.json', tmp_path / 'm' / 'config.json')
  (tmp_path / 'm' / 'pytorch_model.bin').write_bytes(b'PK\x03\x04' + b'\0' * 64)  # never opened
  with pytest.raises(weight_files.WeightFileError) as info:
    video.convert('hf_videomae', str(tmp_path / 'm'))
  assert 'pytorch_model.bin: hf_videomae reads safetensors only' in str(info.value)
