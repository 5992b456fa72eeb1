"""Scenic ViViT Models 1, 3 and 4 (Model 2 is the shared fixture) against an independent float64 NumPy
re-implementation written from scenic's semantics (projects/vivit/model.py, model_utils.py): 3D-conv tubelets
flattened (t, h, w); optional cls + learned 1D table; Model 3 blocks `LayerNorm_{space,time}` /
`MultiHeadDotProductAttention_{space,time}` in `attention_order`, then `LayerNorm_mlp` + `MlpBlock`; Model 4 one
attention whose FIRST half of heads attends over time and SECOND half over space; tanh GELU; LN eps 1e-6."""
import json

from flax import serialization
import jax
import numpy as np
import pytest

from vvt.convert import scenic
from vvt.convert import video
from vvt.convert import weight_files
import vvt.models

B, T, S, C = 2, 4, 16, 3
TUBELET, D, HEADS, MLP, LAYERS, CLASSES = (2, 8, 8), 32, 4, 48, 2, 5
NT, GRID = T // TUBELET[0], S // TUBELET[1]


def _ln(x, scale, bias):
  mu = x.mean(-1, keepdims=True)
  var = ((x - mu) ** 2).mean(-1, keepdims=True)
  return (x - mu) / np.sqrt(var + 1e-6) * scale + bias


def _gelu_tanh(x):
  return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _attend(q, k, v):  # (..., L, H, hd)
  logits = np.einsum('...qhd,...khd->...hqk', q / np.sqrt(q.shape[-1]), k)
  return np.einsum('...hqk,...khd->...qhd', _softmax(logits), v)


def _proj(x, p, name):
  return np.einsum('...d,dhk->...hk', x, p[f'{name}/kernel']) + p[f'{name}/bias']


def _mha(x, p, prefix):
  q, k, v = (_proj(x, p, f'{prefix}/{n}') for n in ('query', 'key', 'value'))
  return np.einsum('...hk,hkd->...d', _attend(q, k, v), p[f'{prefix}/out/kernel']) + p[f'{prefix}/out/bias']


def _mlp(x, p, prefix):
  h = _gelu_tanh(x @ p[f'{prefix}/Dense_0/kernel'] + p[f'{prefix}/Dense_0/bias'])
  return h @ p[f'{prefix}/Dense_1/kernel'] + p[f'{prefix}/Dense_1/bias']


def scenic_forward(p, video_, model, token, order='space_time'):
  """float64 NumPy forward of scenic's ViViT (Models 1, 3, 4)."""
  p = {k: v.astype(np.float64) for k, v in p.items()}
  t, h, w = TUBELET
  x = video_.astype(np.float64).reshape(B, NT, t, GRID, h, GRID, w, C)
  x = np.einsum('bTtHhWwc,thwcd->bTHWd', x, p['embedding/kernel']) + p['embedding/bias']
  x = x.reshape(B, NT * GRID * GRID, D)
  if token:
    x = np.concatenate([np.broadcast_to(p['cls'], (B, 1, D)), x], axis=1)
  x = x + p['Transformer/posembed_input/pos_embedding']
  for i in range(LAYERS):
    e = f'Transformer/encoderblock_{i}'
    if model == 1:
      y = _ln(x, p[f'{e}/LayerNorm_0/scale'], p[f'{e}/LayerNorm_0/bias'])
      x = x + _mha(y, p, f'{e}/MultiHeadDotProductAttention_0')
      x = x + _mlp(_ln(x, p[f'{e}/LayerNorm_1/scale'], p[f'{e}/LayerNorm_1/bias']), p, f'{e}/MlpBlock_0')
    elif model == 3:
      x4 = x.reshape(B, NT, GRID * GRID, D)
      for axis in (('space', 'time') if order == 'space_time' else ('time', 'space')):
        xa = x4 if axis == 'space' else x4.transpose(0, 2, 1, 3)  # attend over the second-to-last axis
        y = _ln(xa, p[f'{e}/LayerNorm_{axis}/scale'], p[f'{e}/LayerNorm_{axis}/bias'])
        xa = xa + _mha(y, p, f'{e}/MultiHeadDotProductAttention_{axis}')
        x4 = xa if axis == 'space' else xa.transpose(0, 2, 1, 3)
      x = x4.reshape(B, -1, D)
      x = x + _mlp(_ln(x, p[f'{e}/LayerNorm_mlp/scale'], p[f'{e}/LayerNorm_mlp/bias']), p, f'{e}/MlpBlock')
    else:  # Model 4: heads [0, H/2) over time, [H/2, H) over space.
      x4 = x.reshape(B, NT, GRID * GRID, D)
      y = _ln(x4, p[f'{e}/LayerNorm_0/scale'], p[f'{e}/LayerNorm_0/bias'])
      a = f'{e}/MultiHeadDotProductAttention_0'
      q, k, v = (_proj(y, p, f'{a}/{n}') for n in ('query', 'key', 'value'))  # (B, T, N, H, hd)
      half = HEADS // 2
      tq, tk, tv = (z[..., :half, :].transpose(0, 2, 1, 3, 4) for z in (q, k, v))
      time_out = _attend(tq, tk, tv).transpose(0, 2, 1, 3, 4)
      space_out = _attend(q[..., half:, :], k[..., half:, :], v[..., half:, :])
      o = np.concatenate([time_out, space_out], axis=-2)
      x4 = x4 + np.einsum('...hk,hkd->...d', o, p[f'{a}/out/kernel']) + p[f'{a}/out/bias']
      x = x4.reshape(B, -1, D)
      x = x + _mlp(_ln(x, p[f'{e}/LayerNorm_1/scale'], p[f'{e}/LayerNorm_1/bias']), p, f'{e}/MlpBlock_0')
  x = _ln(x, p['Transformer/encoder_norm/scale'], p['Transformer/encoder_norm/bias'])
  rep = x[:, 0] if token else x.mean(axis=1)
  return rep @ p['output_projection/kernel'] + p['output_projection/bias']


def scenic_params(model, token, seed=0, tubelet=TUBELET, pos=None):
  """A scenic Model 1/3/4 param tree; `tubelet` (t, h, w), or (h, w) for a 2D kernel (uniform frame sampling);
  `pos` the (T*N, D) position table without the class row (default: random, NT x GRID^2 rows)."""
  rng = np.random.default_rng(seed)
  p = {}
  def dense(name, shape, fan_in):
    p[f'{name}/kernel'] = rng.standard_normal(shape) / np.sqrt(fan_in)
    p[f'{name}/bias'] = 0.1 * rng.standard_normal(shape[-1:] if not name.endswith(('query', 'key', 'value'))
                                                  else shape[1:])
  def ln(name):
    p[f'{name}/scale'] = 1 + 0.1 * rng.standard_normal(D)
    p[f'{name}/bias'] = 0.1 * rng.standard_normal(D)
  def attention(name):
    for n in ('query', 'key', 'value'):
      dense(f'{name}/{n}', (D, HEADS, D // HEADS), D)
    p[f'{name}/out/kernel'] = rng.standard_normal((HEADS, D // HEADS, D)) / np.sqrt(D)
    p[f'{name}/out/bias'] = 0.1 * rng.standard_normal(D)
  dense('embedding', (*tubelet, C, D), np.prod(tubelet) * C)
  if token:
    p['cls'] = 0.5 * rng.standard_normal((1, 1, D))
  table = 0.5 * rng.standard_normal((NT * GRID ** 2, D)) if pos is None else pos
  cls_row = 0.5 * rng.standard_normal((int(token), D))
  p['Transformer/posembed_input/pos_embedding'] = np.concatenate([cls_row, table])[None]
  for i in range(LAYERS):
    e = f'Transformer/encoderblock_{i}'
    if model == 3:
      for axis in ('space', 'time'):
        ln(f'{e}/LayerNorm_{axis}')
        attention(f'{e}/MultiHeadDotProductAttention_{axis}')
      ln(f'{e}/LayerNorm_mlp')
      mlp = f'{e}/MlpBlock'
    else:
      ln(f'{e}/LayerNorm_0')
      attention(f'{e}/MultiHeadDotProductAttention_0')
      ln(f'{e}/LayerNorm_1')
      mlp = f'{e}/MlpBlock_0'
    dense(f'{mlp}/Dense_0', (D, MLP), D)
    dense(f'{mlp}/Dense_1', (MLP, D), MLP)
  ln('Transformer/encoder_norm')
  dense('output_projection', (D, CLASSES), D)
  return {k: np.asarray(v, np.float32) for k, v in p.items()}


VIDEO = np.random.default_rng(5).standard_normal((B, T, S, S, C)).astype(np.float32)
CASES = [(1, True, 'spatiotemporal', None), (1, False, 'spatiotemporal', None),
         (3, False, 'factorised_self_attention', 'space_time'), (3, False, 'factorised_self_attention', 'time_space'),
         (4, False, 'factorised_dot_product', None)]


@pytest.mark.parametrize('model,token,attention,order', CASES)
def test_scenic_model_matches_numpy_reference(model, token, attention, order):
  p = scenic_params(model, token)
  ref = scenic_forward(p, VIDEO, model, token, order or 'space_time')
  conv = scenic.convert(p, attention=attention if model == 4 else None, num_frames=T,
                        attention_order=order or 'space_time')
  cfg = conv.model_config()
  m = vvt.models.resolve(cfg)
  assert (m.attention, m.classifier, m.gelu_approximate, m.layer_norm_eps) == (
      attention, 'token' if token else 'gap', True, 1e-6)
  video.check_params(conv.params, cfg)
  out = np.asarray(jax.jit(vvt.models.build(cfg).apply)({'params': conv.params}, VIDEO))
  # against a float64 reference, logits |.| < ~2: only vvt's float32 rounding is left (measured > 10x below 1e-5)
  assert np.abs(out - ref).max() < 1e-5
  assert conv.report.unused == []


def test_model4_head_halves_are_swapped():
  """Without the swap (vvt's first half = space) the converted Model 4 is a different function."""
  p = scenic_params(4, False)
  ref = scenic_forward(p, VIDEO, 4, False)
  conv = scenic.convert(p, attention='factorised_dot_product', num_frames=T)
  assert any('heads swapped' in how for _, how in conv.report.transformed)
  unswapped = scenic.convert(p, attention='spatiotemporal', num_frames=T).params
  params = {'embedding': conv.params['embedding'], 'head': conv.params['head'], 'encoder': {
      **conv.params['encoder'], 'layers': {
          b: {k.replace('joint', 'factorised_dot_product'): v for k, v in blk.items()}
          for b, blk in unswapped['encoder']['layers'].items()}}}
  out = np.asarray(jax.jit(vvt.models.build(conv.model_config()).apply)({'params': params}, VIDEO))
  assert np.abs(out - ref).max() > 1e-2


def test_scenic_msgpack_file(tmp_path):
  """A flax msgpack of the params tree (what scenic/flax serialise) loads without pickle and converts."""
  p = scenic_params(3, False)
  path = tmp_path / 'checkpoint.msgpack'
  path.write_bytes(serialization.msgpack_serialize({'params': weight_files.unflatten(p)}))
  cfg = vvt.models.get_config('vivit', attention='factorised_self_attention', num_frames=T,
                              attention_order='time_space', classifier='gap')
  conv = video.convert('scenic_vivit', str(path), cfg)
  out = np.asarray(jax.jit(vvt.models.build(conv.model_config()).apply)({'params': conv.params}, VIDEO))
  assert np.abs(out - scenic_forward(p, VIDEO, 3, False, 'time_space')).max() < 1e-5


def test_scenic_wrong_model_is_a_clear_error():
  p = scenic_params(3, False)
  with pytest.raises(ValueError, match='factorised_self_attention'):
    scenic.convert(p, attention='spatiotemporal', num_frames=T)
  with pytest.raises(ValueError, match='do not tell which: pass num_frames'):
    scenic.convert(scenic_params(1, True))


def test_flax_checkpoint_without_extension(tmp_path):
  """flax.training.checkpoints writes `checkpoint_<step>` msgpack files without an extension (scenic TrainState:
  the params under optimizer/target in older scenic); the format is recognised from the bytes."""
  p = scenic_params(1, True)
  path = tmp_path / 'checkpoint_1000'
  path.write_bytes(serialization.msgpack_serialize(
      {'global_step': 1000, 'optimizer': {'target': weight_files.unflatten(p), 'state': {'step': 1000}}}))
  assert weight_files.sniff_format(str(path)) == 'msgpack'
  conv = video.convert('scenic_vivit', str(path), vvt.models.get_config('vivit', num_frames=T))
  out = np.asarray(jax.jit(vvt.models.build(conv.model_config()).apply)({'params': conv.params}, VIDEO))
  assert np.abs(out - scenic_forward(p, VIDEO, 1, True)).max() < 1e-5
  np.savez(tmp_path / 'weights', **p)
  (tmp_path / 'weights.npz').rename(tmp_path / 'weights_noext')
  assert weight_files.sniff_format(str(tmp_path / 'weights_noext')) == 'npz'


# Frames and frame size of Models 1, 3, 4 from their position table (scenic.read_token_grid): 8 time steps of
# 14x14 patches of 16px = 1568 rows, which also fit 2x784, 32x49, 98x16, 392x4 and 1568x1.
BIG_T, BIG_N, BIG_PATCH = 8, 196, (16, 16)


def time_smooth_table(nt, n, init='trained', seed=0):
  """(nt*n, D) rows in (t, h, w) order: one random spatial table repeated over time ('image': an image ViT's
  table inflated, as scenic initialises) or drifting slowly along time ('trained')."""
  rng = np.random.default_rng(seed)
  space = 0.5 * rng.standard_normal((1, n, D))
  if init == 'image':
    return np.repeat(space, nt, axis=0).reshape(nt * n, D)
  walk = np.cumsum(0.05 * rng.standard_normal((nt, 1, D)), axis=0)
  return (space + walk + 0.02 * rng.standard_normal((nt, n, D))).reshape(nt * n, D)


def _attention(model):
  return 'factorised_dot_product' if model == 4 else None


@pytest.mark.parametrize('init', ['trained', 'image'])
@pytest.mark.parametrize('model,token', [(1, True), (1, False), (3, True), (3, False), (4, True), (4, False)])
def test_frames_and_size_come_from_the_position_table(model, token, init):
  """No num_frames / image_size given: the split whose rows are alike over time (8x196), not the others."""
  assert len(scenic.token_grids(BIG_T * BIG_N, BIG_PATCH, 2)) == 6
  p = scenic_params(model, token, tubelet=(2, *BIG_PATCH), pos=time_smooth_table(BIG_T, BIG_N, init))
  conv = scenic.convert(p, attention=_attention(model))
  assert (conv.model_fields['num_frames'], conv.model_fields['image_size']) == (16, 224)
  assert conv.model_fields['classifier'] == ('token' if token else 'gap')
  how = dict(conv.report.loaded)['encoder/posembed/pos_embedding']
  assert 'rows read as 8x196 tokens' in how


@pytest.mark.parametrize('model', [1, 3, 4])
def test_uniform_frame_sampling_and_the_table_wins_over_the_config(model):
  """A 2D kernel (one frame per time step): 8 frames of 224px. The config's 32 frames fit the rows too (32 x 7x7
  patches of 112px), which the old converter took; the table's rows outrank the config's values."""
  p = scenic_params(model, False, tubelet=BIG_PATCH, pos=time_smooth_table(BIG_T, BIG_N))
  conv = scenic.convert(p, attention=_attention(model), frames_hint=32, size_hint=112)
  assert (conv.model_fields['num_frames'], conv.model_fields['image_size'], conv.model_fields['tubelet']) == (
      8, 224, (1, 16, 16))


def test_ambiguous_table_is_a_clear_error_and_explicit_values_decide():
  """Unrelated rows (an untrained table) do not say the split: one line listing the (frames, px) that fit;
  num_frames or image_size asked for decides, also against the table's own evidence."""
  rng = np.random.default_rng(1)
  p = scenic_params(3, False, tubelet=(2, *BIG_PATCH), pos=rng.standard_normal((BIG_T * BIG_N, D)))
  with pytest.raises(ValueError) as info:
    scenic.convert(p)
  text = str(info.value)
  assert '\n' not in text and '1568 token rows' in text and '(16, 224), (64, 112)' in text
  assert 'num_frames' in text
  for kw in (dict(num_frames=16), dict(image_size=224), dict(frames_hint=16, size_hint=None)):
    conv = scenic.convert(p, **kw)
    assert (conv.model_fields['num_frames'], conv.model_fields['image_size']) == (16, 224), kw
  smooth = scenic_params(3, False, tubelet=(2, *BIG_PATCH), pos=time_smooth_table(BIG_T, BIG_N))
  conv = scenic.convert(smooth, num_frames=4)  # explicit: 2 steps of 28x28 patches, although the rows say 8x196
  assert (conv.model_fields['num_frames'], conv.model_fields['image_size']) == (4, 448)
  with pytest.raises(ValueError, match='do not fit num_frames=6'):
    scenic.convert(smooth, num_frames=6)


def test_vvt_convert_records_the_derived_frames_and_size(tmp_path, capsys):
  """`vvt convert` of a Model 3 file with a 32-frame config: the checkpoint meta and config.json hold the
  table's 8 frames of 224px (model, dataset and run fields); an ambiguous file fails with one line naming it."""
  from tests.conftest import REPO
  from vvt.cli import convert as convert_cli
  from vvt.cli import main
  from vvt.train import checkpoints
  good, bad = tmp_path / 'model3.npz', tmp_path / 'model3_untrained.npz'
  np.savez(good, **scenic_params(3, False, tubelet=BIG_PATCH, pos=time_smooth_table(BIG_T, BIG_N)))
  rng = np.random.default_rng(2)
  np.savez(bad, **scenic_params(3, False, tubelet=BIG_PATCH, pos=rng.standard_normal((BIG_T * BIG_N, D))))
  base = ['convert', '--source', 'scenic_vivit', '--config', str(REPO / 'configs/kinetics400/vivit_b_fe.py')]
  assert main([*base, '--checkpoint', str(good), '--output', str(tmp_path / 'out')]) == 0
  assert '[convert] 8 frames of 224px, 5 classes' in capsys.readouterr().out
  for config in (checkpoints.read_meta(str(tmp_path / 'out'), 0)['config'],
                 json.loads((tmp_path / 'out' / 'config.json').read_text())):
    assert (config['model']['num_frames'], config['model']['image_size']) == (8, 224)
    assert (config['dataset']['num_frames'], config['dataset']['image_size'], config['num_frames']) == (8, 224, 8)
    assert config['model']['attention'] == 'factorised_self_attention'
  assert 'rows read as 8x196 tokens' in (tmp_path / 'out' / 'convert_report.txt').read_text()
  assert main([*base, '--checkpoint', str(bad), '--output', str(tmp_path / 'out_bad')]) == 1
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and str(bad) in err and '(8, 224)' in err and '--num-frames' in err
  result = convert_cli.convert_to_checkpoint('scenic_vivit', str(bad), None, str(tmp_path / 'out_asked'),
                                             num_frames=8, log=lambda *_: None)
  assert (result.model_fields['num_frames'], result.model_fields['image_size']) == (8, 224)


def test_model2_frames_and_size_come_from_its_two_tables():
  """Model 2 (shared fixture: 8 frames of 32px): spatial table 1+16 rows, temporal 1+4, whatever the config says."""
  from tests.conftest import FIXTURES
  npz = FIXTURES / 'scenic_vivit_model2_fe.npz'
  if not npz.exists():
    pytest.skip(f'fixture {npz} is missing')
  video_ = np.load(npz)['input']
  conv = scenic.convert(weight_files.load_state(str(npz)), frames_hint=32, size_hint=224)
  assert (conv.model_fields['num_frames'], conv.model_fields['image_size']) == video_.shape[1:3]
  with pytest.raises(ValueError, match='num_frames=16'):
    scenic.convert(weight_files.load_state(str(npz)), num_frames=16)
