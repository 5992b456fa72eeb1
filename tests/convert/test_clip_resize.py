"""Weights run at another clip length / frame size (`vvt.convert.retarget`): the interpolation kernels against
torch's in float64, and converted models against transformers models built for the new size with the tables the
reference's interpolation gives (not transformers fed a longer clip than its config: its TimeSformer layers then
still read config.num_frames and attend within groups of the old length)."""
import jax
import numpy as np
import pytest

from vvt.convert import hf_videomae
from vvt.convert import retarget
from vvt.convert import video
import vvt.models
from vvt.models import embedding

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')
F = torch.nn.functional

from tests.convert.test_hf_parity import _hf_logits  # noqa: E402  (after torch)
from tests.convert.test_hf_parity import _randomise  # noqa: E402  (after torch)
from tests.convert.test_hf_parity import _state  # noqa: E402  (after torch)
from tests.convert.test_hf_parity import _vvt_logits  # noqa: E402  (after torch)

ATOL = 1e-5


@pytest.mark.parametrize('size_in,size_out', [(4, 7), (14, 16), (16, 14), (8, 3), (5, 5), (2, 9)])
def test_cubic_weights_are_torch_bicubic(size_in, size_out):
  rng = np.random.default_rng(size_in * 31 + size_out)
  grid = rng.standard_normal((size_in, size_in + 1, 3))
  want = F.interpolate(torch.from_numpy(grid).permute(2, 0, 1)[None], size=(size_out, size_out + 2),
                       mode='bicubic', align_corners=False)[0].permute(1, 2, 0).numpy()
  got = embedding.resize_table(grid, (size_out, size_out + 2), 'bicubic')
  assert got.shape == want.shape
  np.testing.assert_allclose(got, want, atol=1e-6)  # float32 result of a float64 resize
  w = embedding.cubic_weights(size_in, size_out)
  np.testing.assert_allclose(w @ grid[:, 0, 0], F.interpolate(torch.from_numpy(grid[:, 0, 0])[None, None, :, None],
                                                           size=(size_out, 1), mode='bicubic',
                                                           align_corners=False)[0, 0, :, 0].numpy(), atol=1e-12)


@pytest.mark.parametrize('size_in,size_out', [(8, 16), (8, 12), (8, 6), (7, 10), (3, 5), (16, 8), (4, 4), (5, 13)])
def test_nearest_weights_are_torch_nearest(size_in, size_out):
  rows = torch.arange(size_in, dtype=torch.float32)[None, None]
  want = F.interpolate(rows, size=size_out, mode='nearest')[0, 0].numpy().astype(int)
  got = embedding.nearest_weights(size_in, size_out).argmax(axis=1)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(got, np.floor(np.arange(size_out) * size_in / size_out).astype(int))


def _video(frames, size):
  return np.random.default_rng(frames * 100 + size).standard_normal((2, frames, size, size, 3)).astype(np.float32)


def _timesformer(attention_type, frames, size):
  cfg = transformers.TimesformerConfig(image_size=size, num_frames=frames, patch_size=8, hidden_size=32,
                                       num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                       num_labels=5, attention_type=attention_type)
  return transformers.TimesformerForVideoClassification(cfg).eval(), cfg


@pytest.mark.parametrize('attention_type,frames,size', [('divided_space_time', 8, 16), ('divided_space_time', 6, 24),
                                                        ('joint_space_time', 8, 32)])
def test_timesformer_at_another_clip_is_hf_built_for_it(attention_type, frames, size):
  """4-frame 16px weights on `frames` x `size`: HF built with num_frames=frames, image_size=size and the tables
  resized by torch's nearest (as its forward does for a table of another size)."""
  small, cfg = _timesformer(attention_type, 4, 16)
  _randomise(small)
  conv = video.convert_state('hf_timesformer', _state(small), hf_config=cfg.to_dict(), num_frames=frames,
                             image_size=size)
  big, _ = _timesformer(attention_type, frames, size)
  state = _state(small)
  time = torch.from_numpy(state['timesformer.embeddings.time_embeddings'])  # (1, 4, D)
  state['timesformer.embeddings.time_embeddings'] = F.interpolate(
      time.transpose(1, 2), size=frames, mode='nearest').transpose(1, 2).numpy()
  pos = torch.from_numpy(state['timesformer.embeddings.position_embeddings'])  # (1, 1 + 2*2, D)
  grid = pos[:, 1:].transpose(1, 2).reshape(1, -1, 2, 2)
  grid = F.interpolate(grid, size=(size // 8, size // 8), mode='nearest').flatten(2).transpose(1, 2)
  state['timesformer.embeddings.position_embeddings'] = torch.cat([pos[:, :1], grid], 1).numpy()
  big.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
  x = _video(frames, size)
  m = vvt.models.resolve(conv.model_config())
  assert (m.num_frames, m.image_size, m.time_embedding_rows) == (frames, size, frames)
  assert np.abs(_vvt_logits(conv, x) - _hf_logits(big, x)).max() < ATOL
  assert any('time table 4 -> ' in how and 'nearest' in how for _, how in conv.report.transformed)
  assert 'encoder/posembed/time_embedding' not in dict(conv.report.loaded)
  assert conv.report.notes == [f'clip 4 frames of 16px -> {frames} frames of {size}px: 2 position table(s) resized'
                               if size != 16 else
                               f'clip 4 frames of 16px -> {frames} frames of {size}px: 1 position table(s) resized']


def _torch_bicubic_3d(table, old, new):
  """(1, nt*nh*nw, D) -> resized: torch bicubic over (h, w) of each frame, then over (t, h*w)."""
  d = table.shape[-1]
  x = torch.from_numpy(table[0]).reshape(*old, d).permute(0, 3, 1, 2)  # (nt, D, nh, nw)
  x = F.interpolate(x, size=new[1:], mode='bicubic', align_corners=False)  # (nt, D, nh', nw')
  x = x.permute(1, 0, 2, 3).reshape(1, d, old[0], -1)  # (1, D, nt, nh'*nw')
  x = F.interpolate(x, size=(new[0], new[1] * new[2]), mode='bicubic', align_corners=False)
  return x[0].permute(1, 2, 0).reshape(1, -1, d).numpy()


def _vivit(frames, size):
  cfg = transformers.VivitConfig(image_size=size, num_frames=frames, tubelet_size=[2, 8, 8], hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=5)
  return transformers.VivitForVideoClassification(cfg).eval(), cfg


@pytest.mark.parametrize('frames,size', [(8, 16), (4, 32), (6, 24), (2, 8)])
def test_vivit_at_another_clip_is_hf_built_for_it(frames, size):
  """4-frame 16px ViViT weights (tubelet 2x8x8): HF built for the new clip with the joint table resized by torch
  bicubic (align_corners=False) over each frame's patch grid and over time; the class-token row kept."""
  small, cfg = _vivit(4, 16)
  _randomise(small)
  conv = video.convert_state('hf_vivit', _state(small), hf_config=cfg.to_dict(), num_frames=frames, image_size=size)
  big, _ = _vivit(frames, size)
  state = _state(small)
  pos = state['vivit.embeddings.position_embeddings']  # (1, 1 + 2*2*2, D)
  state['vivit.embeddings.position_embeddings'] = np.concatenate(
      [pos[:, :1], _torch_bicubic_3d(pos[:, 1:].astype(np.float64), (2, 2, 2), (frames // 2, size // 8, size // 8))],
      axis=1).astype(np.float32)
  big.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
  x = _video(frames, size)
  assert np.abs(_vvt_logits(conv, x) - _hf_logits(big, x)).max() < ATOL
  assert any('bicubic' in how for _, how in conv.report.transformed)


def test_videomae_sinusoidal_table_is_recomputed():
  """VideoMAE's sine-cosine table has no parameters: 8-frame weights at 16 frames and 48px are HF built for that."""
  def build(frames, size):
    cfg = transformers.VideoMAEConfig(image_size=size, patch_size=16, num_frames=frames, tubelet_size=2,
                                      hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, num_labels=3, use_mean_pooling=True)
    return transformers.VideoMAEForVideoClassification(cfg).eval(), cfg
  small, cfg = build(8, 32)
  _randomise(small)
  conv = video.convert_state('hf_videomae', _state(small), hf_config=cfg.to_dict(), num_frames=16, image_size=48)
  big, _ = build(16, 48)
  big.load_state_dict(small.state_dict())
  x = _video(16, 48)
  assert np.abs(_vvt_logits(conv, x) - _hf_logits(big, x)).max() < ATOL
  assert conv.report.notes == ['clip 8 frames of 32px -> 16 frames of 48px: no position table to resize']
  assert hf_videomae  # the source module whose tables are recomputed


def test_tubelet_must_divide_the_new_clip():
  small, cfg = _vivit(4, 16)
  with pytest.raises(ValueError, match=r'num_frames=5 is not a multiple of the tubelet \(2, 8, 8\)'):
    video.convert_state('hf_vivit', _state(small), hf_config=cfg.to_dict(), num_frames=5)


def test_scenic_factorised_encoder_resizes_both_tables():
  """ViViT Model 2: the spatial encoder's patch grid and the temporal encoder's n_t rows, each torch bicubic."""
  cfg = vvt.models.resolve(vvt.models.get_config('vivit', attention='factorised_encoder', variant='Ti/8x2',
                                                 num_frames=4, image_size=16, num_classes=3, num_layers=1,
                                                 temporal_layers=1))
  params = jax.eval_shape(lambda: vvt.models.build(cfg).init(jax.random.key(0), np.zeros((1, 4, 16, 16, 3))))
  rng = np.random.default_rng(0)
  params = jax.tree.map(lambda s: rng.standard_normal(s.shape).astype(np.float32), params['params'])
  new, fields, notes = retarget.retarget(params, cfg, num_frames=8, image_size=24)
  space = params['spatial_encoder']['posembed']['pos_embedding']  # (1, 1 + 2*2, D)
  want = F.interpolate(torch.from_numpy(space[0, 1:].astype(np.float64)).T.reshape(1, -1, 2, 2), size=(3, 3),
                       mode='bicubic', align_corners=False)[0].reshape(space.shape[-1], -1).T.numpy()
  got = new['spatial_encoder']['posembed']['pos_embedding']
  np.testing.assert_allclose(got[0, 1:], want, atol=1e-6)
  np.testing.assert_array_equal(got[0, :1], space[0, :1])
  time = params['temporal_encoder']['posembed']['pos_embedding']  # (1, 1 + 2, D)
  assert new['temporal_encoder']['posembed']['pos_embedding'].shape == (1, 1 + 4, time.shape[-1])
  assert (fields['num_frames'], fields['image_size'], len(notes)) == (8, 24, 2)
  out = vvt.models.build(vvt.models.get_config(**{**cfg.to_dict(), **{'num_frames': 8, 'image_size': 24}})).apply(
      {'params': new}, np.zeros((1, 8, 24, 24, 3), np.float32))
  assert out.shape == (1, 3)


def _random_params(cfg, seed=0):
  shapes = jax.eval_shape(lambda: vvt.models.build(cfg).init(
      jax.random.key(0), np.zeros((1, cfg.num_frames, cfg.image_size, cfg.image_size, 3), np.float32)))['params']
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda s: rng.standard_normal(s.shape).astype(np.float32), shapes)


@pytest.mark.parametrize('family,attention', [('vivit', 'spatiotemporal'), ('timesformer', 'divided')])
def test_init_from_a_video_checkpoint_of_another_clip(tmp_path, family, attention):
  """init_from (format 'vvt') of a 4-frame 16px model into an 8-frame 32px one: the time axes resized as the
  reference does, the grid by init_from.resize (here the same kernel), as one `retarget` would."""
  from vvt.convert import export
  from vvt.convert import image_init
  from vvt.convert import init_options
  from vvt.convert import weight_files
  from vvt.models import spec as model_spec
  kw = dict(variant='Ti/8', num_layers=1, num_classes=3, image_size=16, num_frames=4)
  if family == 'vivit':
    kw.update(tubelet=(2, 8, 8), classifier='token')
  source_cfg = vvt.models.resolve(vvt.models.get_config(family, attention=attention, **kw))
  source = _random_params(source_cfg)
  path = str(tmp_path / 'k400.safetensors')
  export.to_safetensors(source, path, {'model': source_cfg.to_dict()})
  cfg = vvt.models.resolve(vvt.models.get_config(family, attention=attention, **{**kw, 'num_frames': 8,
                                                                                 'image_size': 32}))
  kernel = retarget.kernel_of(cfg)
  params, report = image_init.initialise(_random_params(cfg, 1), init_options.validate(dict(checkpoint=path,
                                                                                           resize=kernel)),
                                         model_spec.spec_of(cfg))
  want, _, _ = retarget.retarget(source, source_cfg, 8, 32)
  got, want = weight_files.flatten(params), weight_files.flatten(want)
  for name in ('encoder/posembed/pos_embedding', 'encoder/posembed/time_embedding'):
    if name in want:
      np.testing.assert_allclose(got[name], want[name], atol=1e-6, err_msg=name)
      assert name in dict(report.transformed)
  assert report.notes[0].startswith('clip 4 frames of 16px -> 8 frames of 16px')
