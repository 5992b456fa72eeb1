"""The paper recipes where they follow their sources: TimeSformer's space-only model without a time embedding,
padding of short videos per loader, ViViT's test views per table, ViViT's SSv2 flip and its variants."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import train_helpers as common

from configs import common as configs_common
from vvt.config.errors import ConfigError
from vvt.convert import timesformer as timesformer_convert
from vvt.data.transforms import sampling
import vvt.models
from vvt.models.summary import summarise

CONFIGS = common.REPO / 'configs'


def load(name, arg=None, overrides=()):
  from vvt.config import loader
  return loader.load(str(CONFIGS / name) + (f':{arg}' if arg else ''), overrides, files=(), init=False)


def param_names(config):
  module = vvt.models.build(config.model)
  shape = (1, config.num_frames, config.image_size, config.image_size, 3)
  variables = jax.eval_shape(lambda r: module.init({'params': r}, jnp.zeros(shape), train=False), jax.random.key(0))
  return {'/'.join(str(k.key) for k in path) for path, _ in jax.tree_util.tree_leaves_with_path(variables['params'])}


def test_space_only_timesformer_has_no_time_embedding():
  space, divided = load('ssv2/timesformer_b.py', 'space'), load('ssv2/timesformer_b.py')
  assert space.model.positional_embedding == 'spatial'
  names = param_names(space)
  assert 'encoder/posembed/pos_embedding' in names and not any('time_embedding' in n for n in names)
  assert 'encoder/posembed/time_embedding' in param_names(divided)  # the other schemes keep theirs
  # Table 1's 85.9M: the time table was 8 x 768 = 6144 parameters of it.
  s = summarise(space.model)
  with_time = summarise(vvt.models.get_config('timesformer', attention='space', num_classes=174))
  assert with_time['params'] - s['params'] == 8 * 768 and abs(s['params_m'] - 85.9) / 85.9 < 0.005
  # The converter of the authors' space_only checkpoints builds the same model fields.
  fields = dict(configs_common.timesformer_scheme('space'))
  state = _space_only_state()
  converted = timesformer_convert.convert_official(state, num_frames=8, num_heads=2)
  assert {k: converted.model_fields[k] for k in fields} == fields
  assert 'time_embedding' not in converted.params['encoder']['posembed']


def _space_only_state(d=16, layers=1, patch=4, grid=2, classes=3):
  """A tiny state dict of the official TimeSformer space_only model (random values)."""
  rng = np.random.default_rng(0)
  r = lambda *shape: rng.normal(size=shape).astype(np.float32)
  state = {'patch_embed.proj.weight': r(d, 3, patch, patch), 'patch_embed.proj.bias': r(d),
           'pos_embed': r(1, 1 + grid * grid, d), 'cls_token': r(1, 1, d), 'norm.weight': r(d), 'norm.bias': r(d),
           'head.weight': r(classes, d), 'head.bias': r(classes)}
  for i in range(layers):
    b = f'blocks.{i}'
    state.update({f'{b}.norm1.weight': r(d), f'{b}.norm1.bias': r(d), f'{b}.attn.qkv.weight': r(3 * d, d),
                  f'{b}.attn.qkv.bias': r(3 * d), f'{b}.attn.proj.weight': r(d, d), f'{b}.attn.proj.bias': r(d),
                  f'{b}.norm2.weight': r(d), f'{b}.norm2.bias': r(d), f'{b}.mlp.fc1.weight': r(4 * d, d),
                  f'{b}.mlp.fc1.bias': r(4 * d), f'{b}.mlp.fc2.weight': r(d, 4 * d), f'{b}.mlp.fc2.bias': r(d)})
  return state


def test_timesformer_schemes_study_builds_space_only_without_time_embedding():
  from experiments import timesformer_schemes
  for setting in ('k400', 'ssv2'):
    trials = {t['model.attention']: t for t in timesformer_schemes.get_sweep(setting)}
    assert trials['space']['model.positional_embedding'] == 'spatial'
    assert all('model.positional_embedding' not in t for s, t in trials.items() if s != 'space')


def test_timesformer_l_pads_a_short_video_with_its_last_frame():
  """TimeSformer-L: 96 frames at rate 4 span 381 frames; a 250-frame video repeats its last frame."""
  d = load('kinetics400/timesformer_b.py', 'l').dataset
  assert (d.num_frames, d.stride, d.short_video_policy) == (96, 4, 'pad')
  idx = np.asarray(sampling.eval_indices(250, d.num_frames, d.stride, d.num_test_clips, d.short_video_policy,
                                         d.sampling))[0]
  assert idx[:63].tolist() == list(range(0, 249, 4)) and (idx[63:] == 249).all()
  train = np.asarray(sampling.train_indices(250, d.num_frames, d.stride, np.array([0, 1]), d.short_video_policy,
                                            d.sampling))
  assert (np.diff(train) >= 0).all() and train[-1] == 249  # never wraps to the start
  vivit = load('kinetics400/vivit_b_fe.py').dataset  # ViViT (DMVR) loops
  idx = np.asarray(sampling.eval_indices(50, vivit.num_frames, vivit.stride, 1, vivit.short_video_policy))[0]
  assert vivit.short_video_policy == 'loop' and idx[25] == 0


@pytest.mark.parametrize('name,arg,views', [
    ('kinetics400/vivit_b_fe.py', None, (4, 1)),             # ablations (Tables 1-4): "a total of 4 views"
    ('kinetics400/vivit_b_fe.py', 'views=sota', (4, 3)),
    ('kinetics400/vivit_l_fe.py', None, (4, 1)),             # Fig. 7: the 32-frame model, temporal views
    ('kinetics400/vivit_l_fe.py', 'views=sota', (4, 3)),
    ('kinetics400/vivit_l_fe.py', '128', (1, 3)),            # Table 5a: 1 x 3
    ('kinetics400/vivit_l_fe.py', '128,views=ablation', (1, 1)),
    ('ssv2/vivit_l_fe.py', None, (4, 3)),                    # Tables 5d, 5e (Scenic: 3 crops)
    ('ssv2/vivit_l_fe.py', 'views=ablation', (4, 1)),
    ('epic_kitchens/vivit_l_fe.py', 'views=ablation', (4, 1)),
    ('kinetics400/vivit_h.py', None, (4, 3)),                # Table 5a: "4x3"
    ('kinetics600/vivit_l_fe.py', None, (4, 3)),             # Table 5b: none given; Scenic's K600 config
    ('kinetics600/vivit_l_fe.py', '128', (1, 3)),
    ('moments_in_time/vivit_l_fe.py', None, (4, 3)),
])
def test_vivit_views_per_table(name, arg, views):
  d = load(name, arg).dataset
  assert (d.num_test_clips, d.num_spatial_crops) == views


def test_vivit_ablation_models_evaluate_four_views():
  from experiments import vivit_models
  for setting in ('k400', 'epic'):
    d = vivit_models.get_config(setting).dataset
    assert d.num_test_clips * d.num_spatial_crops == 4


def test_vivit_ssv2_flips_as_the_paper_with_variants():
  paper, off, aware = (load('ssv2/vivit_l_fe.py', a).dataset for a in (None, 'off', 'label_aware'))
  assert (paper.horizontal_flip, paper.label_aware_flip) == (True, False)
  assert (off.horizontal_flip, off.label_aware_flip) == (False, False)
  assert (aware.horizontal_flip, aware.label_aware_flip) == (True, True)


@pytest.mark.parametrize('name,arg,overrides,message', [
    ('kinetics400/vivit_b_fe.py', 'views=all', (), "config argument views='all' is not one of ablation, sota"),
    ('ssv2/vivit_l_fe.py', 'flip=sometimes', (), "config argument flip='sometimes' is not one of paper, off, "
                                                  'label_aware'),
    ('ssv2/vivit_l_fe.py', 'off', [('dataset.label_aware_flip', 'True')],
     'dataset.label_aware_flip needs dataset.horizontal_flip=True'),
    ('kinetics600/vivit_l_fe.py', 'init=imagenet', (),
     "config argument init='imagenet' is not one of imagenet21k, jft"),
    ('kinetics600/vivit_l_fe.py', '64', (), 'frames must be 32 or 128'),
    ('howto100m/timesformer_b.py', '16', (), 'frames must be one of 8, 32, 64, 96'),
    ('howto100m/timesformer_b.py', 'init=jft', (), "config argument init='jft' is not one of kinetics400, "
                                                    'imagenet21k'),
    ('epic_kitchens/xvit_b.py', '32', (), 'frames must be 8 or 16'),
])
def test_bad_recipe_arguments_are_one_line(name, arg, overrides, message):
  with pytest.raises(ConfigError) as e:
    load(name, arg, overrides)
  assert message in str(e.value) and '\n' not in str(e.value)


@pytest.mark.parametrize('frames,coverage,clips', [(8, 8.5, 48), (32, 34.1, 12), (64, 68.3, 6), (96, 102.4, 4)])
def test_howto100m_reads_every_32nd_frame_of_30_fps_video(frames, coverage, clips):
  """TimeSformer Table 8: "a frame rate of 1/32" of the official code's 30-fps video, stride 1 over video stored
  at 30/32 fps: the same moments as stride 32 at 30 fps, and Table 8's single-clip coverage; at test time as many
  non-overlapping clips as cover the video: a video of Table 8's average length (clips x coverage, about 409 s)
  gets Table 8's "# Test Clips"."""
  d = load('howto100m/timesformer_b.py', str(frames)).dataset
  assert (d.num_frames, d.stride, d.num_test_clips, d.num_spatial_crops) == (frames, 1, 'all', 3)
  assert round(d.num_frames * d.stride / d.fps, 1) == coverage
  length = 409 * 30  # a video of 6 min 49 s at 30 fps; at 30/32 fps (`--fps 0.9375`) its frames 0, 32, 64, ...
  at_30 = np.asarray(sampling.tile_indices(length, frames, 32, d.short_video_policy))
  stored = np.asarray(sampling.tile_indices(-(-length // 32), frames, d.stride, d.short_video_policy))
  assert len(stored) == len(at_30) == clips
  # the same moments: each clip's start falls on its own grid (a stored frame, 32/30 s; a frame at 30 fps)
  assert np.abs(stored / d.fps - at_30 / 30).max() <= (32 + 1) / 30 + 1e-9
  assert (np.diff(stored[:-1], axis=1) == 1).all() and (np.diff(at_30[:-1], axis=1) == 32).all()
  assert (np.diff(stored[:, 0]) == frames).all()  # non-overlapping, one span apart


def test_new_recipes_follow_their_sources():
  """The starts and the per-dataset training details that differ from the recipes they are built on."""
  jft = load('kinetics400/vivit_l_fe.py', '128,init=jft').init_from
  assert (jft.path, jft.format, jft.tubelet_init) == ('jft/ViT-L_16.npz', 'big_vision', 'central_frame')
  h = load('kinetics400/vivit_h.py')
  assert (h.model.attention, h.model.variant, h.init_from.path) == ('spatiotemporal', 'H/16x2', 'jft/ViT-H_16.npz')
  assert load('kinetics600/vivit_h.py').num_classes == 600
  assert load('diving48/timesformer_b.py').init_from.path == configs_common.IMAGENET1K.format(size='B')
  assert load('howto100m/timesformer_b.py').init_from.path == 'kinetics400/timesformer_b.safetensors'
  assert load('howto100m/timesformer_b.py', '32,init=imagenet21k').init_from.format == 'big_vision'
  mit = load('moments_in_time/vivit_l_fe.py')  # only the first row of Table 3, from ImageNet-21k
  assert (mit.num_classes, mit.loss.label_smoothing, mit.loss.mixup_alpha, mit.dataset.randaugment) == (339, 0, 0, None)
  epic = load('epic_kitchens/xvit_b.py')  # X-ViT sec. 4.1: flip, erasing and smoothing on Epic-100, 50 epochs
  assert (epic.dataset.horizontal_flip, epic.dataset.random_erasing, epic.loss.label_smoothing) == (True, 0.5, 0.3)
  assert (epic.num_epochs, epic.loss.mixup_alpha, epic.schedule.base_lr, epic.batch_size) == (50, 0, 0.05, 128)
  assert dict(epic.dataset.label_keys) == {'verb': 'verb_label', 'noun': 'noun_label'}
  k600 = load('kinetics600/xvit_b.py', '16')  # the Kinetics recipe: mixup, lr 0.03
  assert (k600.num_classes, k600.loss.mixup_alpha, k600.schedule.base_lr, k600.num_epochs) == (600, 0.4, 0.03, 30)
