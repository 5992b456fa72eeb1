"""Initialising video models from image ViT checkpoints (ViViT sec. 3.4, TimeSformer sec. 4, X-ViT sec. 4).

Small image checkpoints are written in each format from one random image ViT (a vvt `space` model with one
frame and a global class token is exactly a ViT); the Hugging Face reader is anchored on transformers' own
ViTForImageClassification. Then the papers' claims about the model at initialisation are checked."""
import functools

from flax import serialization
import jax
import numpy as np
import pytest
from safetensors.numpy import save_file

from vvt.convert import image
from vvt.convert import image_init
from vvt.convert import init_options
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models
from vvt.models import spec as model_spec

B, P, S, D, HEADS, MLP, LAYERS, CLASSES = 2, 8, 32, 32, 4, 64, 2, 7
RNG = np.random.default_rng(0)


def initialise(params, init_from, cfg):
  """`image_init.initialise` of an `init_from` section (a dict or ConfigDict) and a model config, both resolved as
  a run resolves them (their InitSpec and ModelSpec)."""
  return image_init.initialise(params, init_options.validate(init_from), model_spec.spec_of(vvt.models.resolve(cfg)))


def model_cfg(**kw):
  base = dict(family='timesformer', attention='space', variant='Ti/8', hidden_size=D, num_heads=HEADS, mlp_dim=MLP,
              num_layers=LAYERS, image_size=S, num_frames=1, num_classes=CLASSES, class_token='global',
              positional_embedding='spatial')
  base.update(kw)
  return vvt.models.get_config(**base)


def fresh(cfg, seed=1):
  """Stand-in for the model's fresh init: the model's exact param tree and shapes (jax.eval_shape, no
  compilation), filled with small random numbers."""
  rng = np.random.default_rng(seed)
  return jax.tree_util.tree_map(lambda s: (0.02 * rng.standard_normal(s.shape)).astype(np.float32),
                                video.abstract_params(cfg))


def apply(cfg, params, video, **kw):
  return jax.jit(functools.partial(vvt.models.build(cfg).apply, **kw))({'params': params}, video)


@pytest.fixture(scope='module')
def vit():
  """Random image ViT params (every tensor random, zero-inits included) in vvt layout."""
  flat = weight_files.flatten(fresh(model_cfg()))
  rng = np.random.default_rng(3)
  out = {}
  for k, v in flat.items():
    if k.endswith('scale'):
      out[k] = 1 + 0.1 * rng.standard_normal(v.shape)
    elif k.endswith('bias'):
      out[k] = 0.1 * rng.standard_normal(v.shape)
    elif 'kernel' in k:
      fan_in = np.prod(v.shape[:-1]) if 'out/kernel' not in k and 'conv' not in k else (
          np.prod(v.shape[:2]) if 'out' in k else np.prod(v.shape[:4]))
      out[k] = rng.standard_normal(v.shape) / np.sqrt(fan_in)
    else:
      out[k] = 0.5 * rng.standard_normal(v.shape)
  return weight_files.unflatten({k: np.asarray(v, np.float32) for k, v in out.items()})


def flax_names(params, augreg=True):
  """vvt image model -> big_vision/AugReg (LayerNorm_0, MultiHeadDotProductAttention_1, LayerNorm_2, MlpBlock_3)
  or scenic (LayerNorm_0, MultiHeadDotProductAttention_0, LayerNorm_1, MlpBlock_0) names."""
  f = weight_files.flatten(params)
  out = {'embedding/kernel': f['embedding/conv/kernel'][0], 'embedding/bias': f['embedding/conv/bias'],
         'cls': f['encoder/cls'], 'Transformer/posembed_input/pos_embedding': f['encoder/posembed/pos_embedding'],
         'head/kernel': f['head/output_projection/kernel'], 'head/bias': f['head/output_projection/bias']}
  names = ('LayerNorm_0', 'MultiHeadDotProductAttention_1', 'LayerNorm_2', 'MlpBlock_3') if augreg else (
      'LayerNorm_0', 'MultiHeadDotProductAttention_0', 'LayerNorm_1', 'MlpBlock_0')
  for k, v in f.items():
    if k.startswith('encoder/layers/block_'):
      i, rest = k[len('encoder/layers/block_'):].split('/', 1)
      rest = (rest.replace('space_norm', names[0]).replace('space_attention', names[1])
              .replace('mlp_norm', names[2]).replace('mlp/', names[3] + '/'))
      out[f'Transformer/encoderblock_{i}/{rest}'] = v
    elif k.startswith('encoder/encoder_norm'):
      out[k.replace('encoder/encoder_norm', 'Transformer/encoder_norm')] = v
  return out


def timm_names(params):
  f = weight_files.flatten(params)
  out = {'patch_embed.proj.weight': f['embedding/conv/kernel'][0].transpose(3, 2, 0, 1),
         'patch_embed.proj.bias': f['embedding/conv/bias'], 'cls_token': f['encoder/cls'],
         'pos_embed': f['encoder/posembed/pos_embedding'], 'norm.weight': f['encoder/encoder_norm/scale'],
         'norm.bias': f['encoder/encoder_norm/bias'], 'head.weight': f['head/output_projection/kernel'].T,
         'head.bias': f['head/output_projection/bias']}
  for i in range(LAYERS):
    b, t = f'encoder/layers/block_{i}', f'blocks.{i}'
    a = f'{b}/space_attention'
    out[f'{t}.attn.qkv.weight'] = np.concatenate([f[f'{a}/{n}/kernel'].reshape(D, D).T
                                                  for n in ('query', 'key', 'value')])
    out[f'{t}.attn.qkv.bias'] = np.concatenate([f[f'{a}/{n}/bias'].reshape(D) for n in ('query', 'key', 'value')])
    out[f'{t}.attn.proj.weight'] = f[f'{a}/out/kernel'].reshape(D, D).T
    out[f'{t}.attn.proj.bias'] = f[f'{a}/out/bias']
    for ln, name in (('space_norm', 'norm1'), ('mlp_norm', 'norm2')):
      out[f'{t}.{name}.weight'], out[f'{t}.{name}.bias'] = f[f'{b}/{ln}/scale'], f[f'{b}/{ln}/bias']
    for dense, name in (('Dense_0', 'fc1'), ('Dense_1', 'fc2')):
      out[f'{t}.mlp.{name}.weight'] = f[f'{b}/mlp/{dense}/kernel'].T
      out[f'{t}.mlp.{name}.bias'] = f[f'{b}/mlp/{dense}/bias']
  return {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}


@pytest.fixture(scope='module')
def checkpoints(vit, tmp_path_factory):
  d = tmp_path_factory.mktemp('image_ckpts')
  paths = {}
  np.savez(d / 'augreg.npz', **flax_names(vit, augreg=True))
  paths['big_vision'] = str(d / 'augreg.npz')
  scan = flax_names(vit, augreg=False)
  stacked = {}
  for k in list(scan):
    if k.startswith('Transformer/encoderblock_'):
      rest = k.split('/', 2)[2]
      stacked.setdefault(rest, []).append(scan.pop(k))
  scan.update({f'Transformer/encoderblock/{k}': np.stack(v) for k, v in stacked.items()})
  scan['pos_embedding'] = scan.pop('Transformer/posembed_input/pos_embedding')
  np.savez(d / 'big_vision_scan.npz', **{f'params/{k}': v for k, v in scan.items()})
  paths['big_vision_scan'] = str(d / 'big_vision_scan.npz')
  (d / 'scenic.msgpack').write_bytes(serialization.msgpack_serialize(
      {'params': weight_files.unflatten(flax_names(vit, augreg=False))}))
  paths['scenic'] = str(d / 'scenic.msgpack')
  save_file(timm_names(vit), str(d / 'timm.safetensors'))
  paths['timm'] = str(d / 'timm.safetensors')
  return paths


@pytest.mark.parametrize('fmt', ['big_vision', 'big_vision_scan', 'scenic', 'timm'])
def test_every_format_reads_back_the_same_vit(vit, checkpoints, fmt):
  """Initialising the image model itself from each file gives back exactly the original params."""
  cfg = model_cfg()
  params, report = initialise(fresh(cfg), dict(checkpoint=checkpoints[fmt], reinit_head=False), cfg)
  got, want = weight_files.flatten(params), weight_files.flatten(vit)
  assert set(got) == set(want)
  for k in want:
    np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-7, err_msg=k)
  assert report.initialised == [] and report.unused == []
  assert image.read(checkpoints[fmt]).format == ('timm' if fmt == 'timm' else 'flax')


def test_hf_vit_against_transformers(tmp_path):
  torch = pytest.importorskip('torch')
  transformers = pytest.importorskip('transformers')
  cfg = transformers.ViTConfig(image_size=S, patch_size=P, hidden_size=D, num_hidden_layers=LAYERS,
                               num_attention_heads=HEADS, intermediate_size=MLP, num_labels=CLASSES,
                               layer_norm_eps=1e-6, hidden_act='gelu')
  model = transformers.ViTForImageClassification(cfg).eval()
  g = torch.Generator().manual_seed(0)
  with torch.no_grad():
    for _, p in model.named_parameters():
      p.copy_(torch.randn(p.shape, generator=g) * (0.1 if p.ndim == 1 else 1 / np.sqrt(p.shape[-1])))
  model.save_pretrained(tmp_path)  # model.safetensors, written locally
  x = RNG.standard_normal((B, S, S, 3)).astype(np.float32)
  with torch.no_grad():
    ref = model(torch.from_numpy(x).permute(0, 3, 1, 2)).logits.numpy()
  vcfg = model_cfg()
  params, report = initialise(fresh(vcfg), dict(checkpoint=str(tmp_path / 'model.safetensors'),
                                                           reinit_head=False), vcfg)
  assert report.initialised == []
  out = np.asarray(apply(vcfg, params, x[:, None]))
  assert np.abs(out - ref).max() < 1e-5  # float32 torch vs XLA, logits |.| < ~2: measured > 10x below


def _static(frames):
  x = RNG.standard_normal((B, 1, S, S, 3)).astype(np.float32)
  return x, np.repeat(x, frames, axis=1)


def test_a_model_with_scanned_layers_gets_the_same_weights_stacked(checkpoints):
  """model.scan_layers: fresh params stacked ({'blocks': {'block': (L, ...)}}) in, the same mapping stacked out."""
  from vvt.models import layout
  ckpt = dict(checkpoint=checkpoints['big_vision'], reinit_head=False)
  cfg = model_cfg(family='vivit', attention='spatiotemporal', num_frames=4, tubelet=(2, P, P))
  scanned_cfg = model_cfg(family='vivit', attention='spatiotemporal', num_frames=4, tubelet=(2, P, P),
                          scan_layers=True)
  start = fresh(cfg)
  stacked_start = layout.to_stacked(start)
  assert jax.tree.structure(stacked_start) == jax.tree.structure(video.abstract_params(scanned_cfg))
  per_layer, _ = initialise(start, ckpt, cfg)
  scanned, report = initialise(stacked_start, ckpt, scanned_cfg)
  assert layout.layout_of(scanned) == 'stacked'
  assert 'encoder/layers/block_1/mlp/Dense_0/kernel' in dict(report.loaded)  # the report names layers
  got, want = weight_files.flatten(layout.to_per_layer(scanned)), weight_files.flatten(per_layer)
  assert set(got) == set(want)
  for k in want:
    np.testing.assert_array_equal(got[k], want[k], err_msg=k)


@pytest.mark.parametrize('tubelet', ['central_frame', 'inflate'])
def test_model1_on_a_static_video_equals_the_image_model(checkpoints, tubelet):
  """ViViT Model 1, tubelet 2, positional embeddings repeated over time: on a static video every temporal index
  sees the image tokens, and joint attention over T identical copies of N tokens equals attention over the N
  (global average pooling; a single class token would break the symmetry of the copies)."""
  ckpt = dict(checkpoint=checkpoints['big_vision'], tubelet=tubelet, reinit_head=False)
  gap = dict(classifier='gap', class_token=None, gelu_approximate=False)
  image_cfg = model_cfg(**gap)
  image_params, _ = initialise(fresh(image_cfg), ckpt, image_cfg)
  frame, clip = _static(4)
  ref = np.asarray(apply(image_cfg, image_params, frame))
  cfg = model_cfg(family='vivit', attention='spatiotemporal', num_frames=4, tubelet=(2, P, P),
                  positional_embedding='joint', **gap)
  params, report = initialise(fresh(cfg), ckpt, cfg)
  how = dict(report.transformed)
  assert ('central' if tubelet == 'central_frame' else 'inflated') in how['embedding/conv/kernel']
  assert 'repeated over 2' in how['encoder/posembed/pos_embedding']
  assert 'class-token row dropped' in how['encoder/posembed/pos_embedding']
  out = np.asarray(apply(cfg, params, clip))
  # one program over T/2 copies of the image's tokens, one over the tokens: sums in another order, outputs |.| < ~2
  # (measured > 10x below 2e-5, as in the other static-video tests below)
  np.testing.assert_allclose(out, ref, atol=2e-5)
  moving = RNG.standard_normal(clip.shape).astype(np.float32)  # and it is not trivially so:
  assert np.abs(np.asarray(apply(cfg, params, moving)) - ref).max() > 1e-2
  # Uniform frame sampling (tubelet t=1) on half the frames gives the same result on the static video.
  uniform = model_cfg(family='vivit', attention='spatiotemporal', num_frames=2, positional_embedding='joint',
                      **gap)
  params1, _ = initialise(fresh(uniform), ckpt, uniform)
  np.testing.assert_allclose(np.asarray(apply(uniform, params1, clip[:, :2])), out, atol=2e-5)


def test_central_frame_factorised_encoder_sees_the_central_frames(vit, checkpoints):
  """Model 2 with a central-frame tubelet: the spatial encoder's features at temporal index i are the image
  model's features of frame i*t + t//2, for any video."""
  cfg = model_cfg(family='vivit', attention='factorised_encoder', num_frames=6, tubelet=(3, P, P),
                  positional_embedding='joint', temporal_layers=1, gelu_approximate=False)
  params, report = initialise(fresh(cfg), dict(checkpoint=checkpoints['scenic']), cfg)
  assert any(k.startswith('temporal_encoder/') for k, _ in report.initialised)
  assert 'head/output_projection/kernel' in dict(report.initialised)
  clip = RNG.standard_normal((B, 6, S, S, 3)).astype(np.float32)
  _, inter = apply(cfg, params, clip, mutable=['intermediates'])
  feats = np.asarray(inter['intermediates']['spatial_encoder']['tokens'][0]).reshape(B, 2, -1, D)
  _, ref = apply(model_cfg(), vit, clip[:, 1::3].reshape(B * 2, 1, S, S, 3), mutable=['intermediates'])
  ref = np.asarray(ref['intermediates']['encoder']['tokens'][0]).reshape(B, 2, -1, D)
  np.testing.assert_allclose(feats, ref, atol=2e-5)


def test_zero_temporal_attention_model3_equals_spatial_only(checkpoints):
  """ViViT Model 3 with its temporal attention at zero (sec. 3.4) is the spatial-only model at init."""
  kw = dict(family='vivit', num_frames=4, classifier='gap', positional_embedding='joint', class_token=None)
  m3 = model_cfg(attention='factorised_self_attention', **kw)
  space = model_cfg(attention='space', **kw)
  ckpt = dict(checkpoint=checkpoints['timm'], reinit_head=False)
  p3, report = initialise(fresh(m3), {**ckpt, 'temporal_attention': 'zero'}, m3)
  assert 'zeros' in dict(report.transformed)['encoder/layers/block_0/time_attention/query/kernel']
  ps, _ = initialise(fresh(space), ckpt, space)
  clip = RNG.standard_normal((B, 4, S, S, 3)).astype(np.float32)
  ref = np.asarray(apply(space, ps, clip))
  np.testing.assert_allclose(np.asarray(apply(m3, p3, clip)), ref, atol=2e-5)
  p3c, _ = initialise(fresh(m3), {**ckpt, 'temporal_attention': 'copy_spatial'}, m3)
  assert np.abs(np.asarray(apply(m3, p3c, clip)) - ref).max() > 1e-2


def test_timesformer_divided_copy_with_zero_projection_equals_space_attention(checkpoints):
  """TimeSformer divided: temporal attention copied from the spatial one, temporal_fc at zero, time embedding at
  zero -> the model is the space-only one (global class token) at init."""
  divided = model_cfg(attention='divided', num_frames=4, positional_embedding='separable')
  space = model_cfg(attention='space', num_frames=4, positional_embedding='separable')
  ckpt = dict(checkpoint=checkpoints['big_vision_scan'], reinit_head=False)
  pd, report = initialise(fresh(divided), ckpt, divided)
  how = dict(report.transformed)
  assert 'copied from the image attention' in how['encoder/layers/block_1/time_attention/key/kernel']
  assert how['encoder/layers/block_1/time_projection/kernel'].startswith('zeros')
  assert how['encoder/posembed/time_embedding'].startswith('zeros')
  np.testing.assert_array_equal(pd['encoder']['layers']['block_0']['time_attention']['value']['kernel'],
                                pd['encoder']['layers']['block_0']['space_attention']['value']['kernel'])
  ps, _ = initialise(fresh(space), ckpt, space)
  clip = RNG.standard_normal((B, 4, S, S, 3)).astype(np.float32)
  ref = np.asarray(apply(space, ps, clip))
  np.testing.assert_allclose(np.asarray(apply(divided, pd, clip)), ref, atol=2e-5)
  # The zero projection is what keeps it so (a random one; a constant one would vanish in the LayerNorms).
  pd['encoder']['layers']['block_0']['time_projection']['kernel'] = RNG.standard_normal((D, D)).astype(
      np.float32) / np.sqrt(D)
  assert np.abs(np.asarray(apply(divided, pd, clip)) - ref).max() > 1e-3


def test_xvit_from_image(checkpoints):
  cfg = model_cfg(family='xvit', attention='space_time_mixing', num_frames=4, class_token=None,
                  positional_embedding='separable',
                  temporal_head=dict(num_heads=HEADS, mlp_dim=16))
  params, report = initialise(fresh(cfg), dict(checkpoint=checkpoints['big_vision']), cfg)
  assert np.all(params['encoder']['posembed']['time_embedding'] == 0)
  initialised = dict(report.initialised)
  assert 'temporal_head/cls' in initialised and 'head/head_hidden/kernel' in initialised
  assert report.unused == ['head/bias', 'head/kernel']  # the image classifier (reinit_head)
  text = str(report)
  assert 'loaded:' in text and 'freshly initialised:' in text and 'unused: 2' in text


def test_positional_grid_is_resized(vit, tmp_path):
  """A 4x4 image grid into a 6x6 model: 2D interpolation; a linear ramp over the grid stays a linear ramp."""
  flat = flax_names(vit)
  pos = flat['Transformer/posembed_input/pos_embedding'].copy()
  ramp = np.arange(4, dtype=np.float32)
  pos[0, 1:] = (ramp[:, None, None] * 1.0 + ramp[None, :, None] * 0.5 + np.zeros((1, 1, D), np.float32)
                ).reshape(16, D)
  flat['Transformer/posembed_input/pos_embedding'] = pos
  np.savez(tmp_path / 'v.npz', **flat)
  cfg = model_cfg(image_size=48)
  params, report = initialise(fresh(cfg), dict(checkpoint=str(tmp_path / 'v.npz')), cfg)
  assert 'bilinear resize of the 4x4 grid to 6x6' in dict(report.transformed)['encoder/posembed/pos_embedding']
  table = params['encoder']['posembed']['pos_embedding']
  np.testing.assert_array_equal(table[0, 0], pos[0, 0])
  grid = table[0, 1:, 0].reshape(6, 6)
  src = np.clip((np.arange(6) + 0.5) * 4 / 6 - 0.5, 0, 3)  # half-pixel centres, edge-clamped
  np.testing.assert_allclose(grid, src[:, None] * 1.0 + src[None, :] * 0.5, atol=1e-5)


def test_shape_mismatches_are_listed_together(checkpoints):
  cfg = model_cfg(hidden_size=48, num_heads=4, mlp_dim=MLP)
  with pytest.raises(ValueError) as info:
    initialise(fresh(cfg), dict(checkpoint=checkpoints['big_vision']), cfg)
  msg, every = str(info.value), info.value.items
  assert 'embedding/conv/kernel: model (1, 8, 8, 3, 48), checkpoint (1, 8, 8, 3, 32)' in msg
  assert 'encoder/layers/block_1/mlp/Dense_1/kernel: model (64, 48), checkpoint (64, 32)' in ' '.join(every)
  assert len(every) > 20 and f'({len(every)} mismatch(es))' in msg  # every mismatching name, not just the first
  assert msg.endswith(f'; and {len(every) - weight_files.LISTED} more')  # the message lists the first LISTED


def test_bad_init_from_fields_name_the_field(checkpoints):
  cfg = model_cfg()
  with pytest.raises(ValueError, match='init_from.tubelets'):
    initialise(fresh(cfg), dict(checkpoint=checkpoints['timm'], tubelets='inflate'), cfg)
  with pytest.raises(ValueError, match='init_from.tubelet must be one of'):
    initialise(fresh(cfg), dict(checkpoint=checkpoints['timm'], tubelet='average'), cfg)
  with pytest.raises(FileNotFoundError, match='nope.npz'):
    initialise(fresh(cfg), dict(checkpoint='/nonexistent/nope.npz'), cfg)


def test_trainer_style_call(checkpoints):
  """As the trainer calls it: init_from a ConfigDict section, params jax arrays, model config unresolved."""
  cfg = model_cfg(attention='divided', num_frames=2, positional_embedding='separable')
  params = jax.tree_util.tree_map(jax.numpy.asarray, fresh(cfg))
  init_from = init_options.get_config(checkpoint=checkpoints['scenic'])
  new, report = initialise(params, init_from, cfg)
  assert jax.tree_util.tree_structure(new) == jax.tree_util.tree_structure(jax.device_get(params))
  assert len(report.loaded) > 20 and report.unused == ['head/bias', 'head/kernel']


def test_npz_with_pickled_objects_is_refused(tmp_path):
  np.savez(tmp_path / 'evil.npz', obj=np.array([{'a': 1}], dtype=object))
  with pytest.raises(ValueError, match='allow_pickle'):
    weight_files.load_state(str(tmp_path / 'evil.npz'))


SCHEMES = ('spatiotemporal', 'factorised_encoder', 'factorised_self_attention', 'factorised_dot_product', 'space',
           'joint', 'divided', 'local_global', 'axial', 'space_time_mixing')


@pytest.mark.parametrize('attention', SCHEMES)
def test_every_scheme_initialises(checkpoints, attention):
  """Each scheme takes every image tensor except the classifier; what stays fresh is only what the image model
  does not have (heads, Model 2's temporal encoder, the TA head, ViViT's extra temporal stages are zeroed)."""
  family = {'space_time_mixing': 'xvit', 'space': 'timesformer', 'joint': 'timesformer', 'divided': 'timesformer',
            'local_global': 'timesformer', 'axial': 'timesformer'}.get(attention, 'vivit')
  gap = attention in ('factorised_self_attention', 'factorised_dot_product')
  cfg = model_cfg(family=family, attention=attention, num_frames=4, tubelet=(2 if family == 'vivit' else 1, P, P),
                  positional_embedding='joint' if family == 'vivit' else 'separable',
                  classifier='gap' if gap else 'token', class_token=None, temporal_layers=1,
                  temporal_head=dict(num_heads=HEADS))
  params, report = initialise(fresh(cfg), dict(checkpoint=checkpoints['big_vision']), cfg)
  video.check_params(params, cfg)
  fresh_names = [k for k, _ in report.initialised]
  allowed = ('head/', 'temporal_encoder/', 'temporal_head/')
  assert all(k.startswith(allowed) for k in fresh_names), fresh_names
  assert report.unused == ['head/bias', 'head/kernel']


def test_shipped_configs_init_from_sections_are_valid():
  """Every paper config's init_from section parses (fields, choices, aliases) — before any training starts."""
  import importlib.util

  from tests.conftest import REPO
  found = 0
  for path in sorted((REPO / 'configs').rglob('*.py')):
    spec = importlib.util.spec_from_file_location(f'cfg_{path.stem}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, 'get_config'):  # configs/__init__.py, configs/common.py
      continue
    config = module.get_config()
    if config.get('init_from') is not None:
      opts = init_options.validate(config.init_from)
      # An image ViT (.npz), or a Kinetics-400 vvt model exported by `vvt export` (format 'vvt').
      assert opts.checkpoint.endswith('.npz') or (opts.checkpoint.endswith('.safetensors')
                                                     and opts.format == 'vvt'), opts
      found += 1
  assert found >= 5


def test_init_from_aliases(checkpoints):
  opts = init_options.validate(dict(path='a.npz', tubelet_init='inflate'))
  assert (opts.checkpoint, opts.tubelet) == ('a.npz', 'inflate')
  with pytest.raises(ValueError, match='disagree'):
    init_options.validate(dict(path='a.npz', checkpoint='b.npz'))


# ----------------------------------------------------------------------------- vvt video checkpoints (format 'vvt')


def _video_cfg(**kw):
  """A small ViViT Model 2 (the ViViT SSv2 / Epic-Kitchens configs start from a Kinetics-400 one of these)."""
  base = dict(family='vivit', attention='factorised_encoder', num_frames=4, tubelet=(2, P, P),
              positional_embedding='joint', temporal_layers=1, classifier='token', class_token=None)
  base.update(kw)
  return model_cfg(**base)


def _export(tmp_path, cfg, name='k400.safetensors', seed=5, config=None):
  from vvt.convert import export
  params = fresh(cfg, seed=seed)
  path = str(tmp_path / name)
  export.to_safetensors(params, path, config if config is not None else {'model': cfg.to_dict()})
  return params, path


def test_video_checkpoint_loads_everything_but_the_classifier(tmp_path):
  """K400 model -> a model with other heads (Epic's verb/noun): all but the classifier loaded as is; the file is
  recognised by its metadata with format 'auto'."""
  source_cfg = _video_cfg()
  source, path = _export(tmp_path, source_cfg)
  assert image_init.video_format(path) and not image_init.video_format(path, 'big_vision')
  cfg = _video_cfg(num_classes={'verb': 3, 'noun': 4})
  start = fresh(cfg, seed=9)
  params, report = initialise(start, init_options.get_config(checkpoint=path), cfg)
  got, want, init = weight_files.flatten(params), weight_files.flatten(source), weight_files.flatten(start)
  for k in got:
    if k.startswith('head/output_projection'):
      np.testing.assert_array_equal(got[k], init[k])
    else:
      np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  assert sorted(k for k, _ in report.initialised) == sorted(k for k in got if k.startswith('head/'))
  assert report.unused == ['head/output_projection/bias', 'head/output_projection/kernel']
  assert len(report.loaded) == len(got) - 4 and report.transformed == []
  # The model then runs (same tree and shapes as its own init).
  video.check_params(params, cfg)


def test_video_checkpoint_keeps_the_head_when_asked(tmp_path):
  cfg = _video_cfg()
  source, path = _export(tmp_path, cfg)
  params, report = initialise(fresh(cfg, seed=9), dict(checkpoint=path, format='vvt',
                                                                 reinit_head=False), cfg)
  for k, v in weight_files.flatten(source).items():
    np.testing.assert_array_equal(weight_files.flatten(params)[k], v, err_msg=k)
  assert report.initialised == [] and report.unused == []
  clip = RNG.standard_normal((B, 4, S, S, 3)).astype(np.float32)
  # the same params (equal above) through the same program: equal up to nothing; 1e-6 only spares a re-trace
  np.testing.assert_allclose(np.asarray(apply(cfg, params, clip)), np.asarray(apply(cfg, source, clip)), atol=1e-6)


@pytest.mark.parametrize('attention', ['factorised_encoder', 'spatiotemporal'])
def test_video_checkpoint_at_another_resolution_resizes_the_grid(tmp_path, attention):
  """A 4x4-grid model (32 px) into a 6x6-grid one (48 px; ViViT's SSv2 crop is larger than Kinetics'): the
  positional table is interpolated per frame, class-token row kept; a linear ramp over the grid stays one."""
  kw = dict(attention=attention, classifier='token' if attention == 'factorised_encoder' else 'gap')
  source_cfg = _video_cfg(**kw)
  source = fresh(source_cfg, seed=5)
  table_name = ('spatial_encoder' if attention == 'factorised_encoder' else 'encoder') + '/posembed/pos_embedding'
  flat = weight_files.flatten(source)
  table = flat[table_name]
  frames = 1 if attention == 'factorised_encoder' else 2
  extra = table.shape[1] - frames * 16
  ramp = np.arange(4, dtype=np.float32)
  grid = ramp[:, None] * 1.0 + ramp[None, :] * 0.5
  table[0, extra:] = np.repeat((grid.reshape(1, 16) + np.arange(frames)[:, None] * 10).reshape(-1, 1), D, axis=1)
  from vvt.convert import export
  path = str(tmp_path / 'small.safetensors')
  export.to_safetensors(weight_files.unflatten(flat), path, {'model': source_cfg.to_dict()})
  cfg = _video_cfg(image_size=48, **kw)
  params, report = initialise(fresh(cfg), dict(checkpoint=path), cfg)
  how = dict(report.transformed)
  assert list(how) == [table_name] and 'bilinear resize of the 4x4 grid to 6x6' in how[table_name]
  out = weight_files.flatten(params)[table_name]
  np.testing.assert_array_equal(out[0, :extra], table[0, :extra])
  src = np.clip((np.arange(6) + 0.5) * 4 / 6 - 0.5, 0, 3)
  want = src[:, None] * 1.0 + src[None, :] * 0.5
  for f in range(frames):
    np.testing.assert_allclose(out[0, extra + 36 * f:extra + 36 * (f + 1), 0].reshape(6, 6), want + 10 * f,
                               atol=1e-5)
  video.check_params(params, cfg)


def test_video_checkpoint_mismatches_are_listed_and_architectures_checked(tmp_path):
  _, path = _export(tmp_path, _video_cfg())
  other = _video_cfg(num_layers=LAYERS + 1, num_frames=8, tubelet=(4, P, P))
  with pytest.raises(ValueError) as info:
    initialise(fresh(other), dict(checkpoint=path), other)
  msg = str(info.value)
  assert 'embedding/conv/kernel: model (4, 8, 8, 3, 32), checkpoint (2, 8, 8, 3, 32)' in msg
  assert 'spatial_encoder/layers/block_2/mlp/Dense_0/kernel: in the model, not in the checkpoint' in msg
  assert 'does not fit the model' in msg
  shallow = _video_cfg(num_layers=LAYERS - 1)
  with pytest.raises(ValueError, match='spatial_encoder/layers/block_1/.*: in the checkpoint, not in the model'):
    initialise(fresh(shallow), dict(checkpoint=path), shallow)
  model3 = _video_cfg(attention='factorised_self_attention', classifier='gap')
  with pytest.raises(ValueError, match='vivit/factorised_encoder model; .* same architecture'):
    initialise(fresh(model3), dict(checkpoint=path), model3)
  with pytest.raises(FileNotFoundError, match='missing.safetensors'):
    initialise(fresh(model3), dict(checkpoint=str(tmp_path / 'missing.safetensors'), format='vvt'),
                          model3)
  assert init_options.validate(dict(checkpoint='k400.safetensors', format='vvt')).format == 'vvt'


def test_a_pretraining_runs_own_parts_are_left_unused(tmp_path):
  """A pretraining run's file holds its encoder beside parts no classifier has (V-JEPA's predictor and EMA target
  encoder): the encoder loads, those parts are reported unused; a part the model has stays checked."""
  from vvt.convert import export
  cfg = _video_cfg()
  params = fresh(cfg, seed=3)
  extra = {'predictor': {'embed': {'kernel': np.ones((32, 8), np.float32)}},
           'target_encoder': {'encoder_norm': {'scale': np.ones(32, np.float32)}}}
  path = str(tmp_path / 'jepa.safetensors')
  export.to_safetensors({**params, **extra}, path, {'model': cfg.to_dict()})
  loaded, report = initialise(fresh(cfg, seed=4), dict(checkpoint=path, reinit_head=False), cfg)
  for name, value in weight_files.flatten(params).items():
    np.testing.assert_array_equal(weight_files.flatten(loaded)[name], value, err_msg=name)
  assert report.unused == ['predictor/embed/kernel', 'target_encoder/encoder_norm/scale']
