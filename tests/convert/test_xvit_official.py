"""X-ViT as its authors ran it (issue 18): segments, the 8-row temporal embedding, and shift_div.

The fixtures in fixtures/ come from the official model itself (1adrianb/video-transformers at 82ca176, XVIT built
from the official defaults + yaml, tiny sizes, random weights at non-trivial scales; generator:
fixtures/make_xvit_segments_fixture.py): 16 frames with the backbone's 8-row temp_embed,

  xvit_segments_k400  Kinetics configs: NUM_SEGMENTS 8 (frames 0-7 and 8-15 mixed apart), SHIFT_DIV 8
  xvit_segments_ssv2  SSv2 config:      NUM_SEGMENTS 16 (all frames mixed), SHIFT_DIV 4

Both are converted with vvt's converter and run at 1e-5 on the logits; the controls show that mixing across
all 16 frames (or within 8), interpolating the temporal embedding instead of repeating it, or the wrong
shift_div each moves the logits far beyond that tolerance.
"""
import json
import pathlib

import jax
import numpy as np
import pytest

from tests.conftest import FIXTURES as SHARED_FIXTURES
from vvt.convert import video
from vvt.convert import weight_files
from vvt.convert import xvit
import vvt.models

HERE = pathlib.Path(__file__).resolve().parent / 'fixtures'
# Converter parity within 1e-5 on logits of modest magnitude (|logits| < ~2: tiny models, weights at the shared
# fixtures' scales N(0,1)/sqrt(fan_in), unit-normal video), float32 references, matmuls at 'highest' precision
# (conftest): measured more than 10x below 1e-5, so the order XLA sums in cannot reach it.
ATOL = 1e-5
NAMES = ('xvit_segments_k400', 'xvit_segments_ssv2')


def load(name):
  raw = np.load(HERE / f'{name}.npz', allow_pickle=False)
  meta = json.loads((HERE / f'{name}.json').read_text())
  return weight_files.load_state(str(HERE / f'{name}.npz')), raw['input'], raw['logits'], meta


def convert(state, meta, **kw):
  cfg = meta['config']
  args = dict(num_heads=cfg['num_heads'], head_num_heads=cfg['ta_head']['num_heads'], image_size=cfg['image_size'],
              shift_div=cfg['shift_div'], num_frames=cfg['num_frames'], num_segments=cfg['num_segments'])
  args.update(kw)
  return xvit.convert(state, **args)


def logits(converted, clip, params=None, **overrides):
  module = vvt.models.build(converted.model_config(**overrides))
  return np.asarray(jax.jit(module.apply)({'params': params or converted.params}, clip))


@pytest.fixture(scope='module', params=NAMES)
def fixture(request):
  state, clip, expected, meta = load(request.param)
  return request.param, state, clip, expected, meta


def test_fixture_is_from_the_official_code_and_small(fixture):
  name, _, clip, _, meta = fixture
  assert meta['reference_repo'] == '1adrianb/video-transformers'
  assert meta['reference_commit'].startswith('82ca176')
  assert meta['config']['temp_embed_rows'] == 8 and clip.shape == (2, 16, 32, 32, 3)
  assert (HERE / f'{name}.npz').stat().st_size < 1 << 20
  assert meta['determinism_check']['reload_from_npz_into_fresh_model_max_abs_diff'] == 0.0
  # The official model itself responds to the segments: the difference is the reference's, not only ours.
  controls = meta['reference_controls']['results']
  assert min(controls.values()) > 1e-2, controls


def test_logits_match_the_official_model_within_1e5(fixture):
  name, state, clip, expected, meta = fixture
  conv = convert(state, meta)
  out = logits(conv, clip)
  diff = float(np.abs(out - expected).max())
  print(f'{name}: max |logit difference| = {diff:.3g}')
  assert out.shape == tuple(meta['logits_shape'])
  assert diff < ATOL, f'{name}: max abs logit difference {diff} >= {ATOL}'
  # new_fc (MODEL.DROPOUT_RATE > 0) is in every official checkpoint and unused by the TA ('vit') consensus.
  assert conv.report.unused == ['new_fc.bias', 'new_fc.weight']


def test_recorded_config_says_what_was_done(fixture):
  _, state, _, _, meta = fixture
  conv = convert(state, meta)
  cfg = meta['config']
  model = vvt.models.resolve(conv.model_config())
  assert model.num_frames == 16 and model.time_embedding_rows == 8
  assert model.mixing.num_segments == cfg['num_segments'] and model.mixing.shift_div == cfg['shift_div']
  assert conv.model_fields['time_embedding_rows'] == 8
  how = dict(conv.report.transformed)['encoder/posembed/time_embedding']
  assert 'frame t gets row t mod 8' in how
  video.check_params(conv.params, conv.model_config())  # the 16-frame model takes the 8-row table


def test_through_the_python_api_with_num_frames(fixture, tmp_path):
  """video.convert(..., num_frames=16) (the `vvt convert --num-frames 16` of the CLI) on a checkpoint file with
  DataParallel's `module.` prefix; shift_div and num_segments come from the model config."""
  import torch
  name, state, clip, expected, meta = fixture
  path = tmp_path / f'{name}.pth'
  torch.save({'state_dict': {f'module.{k}': torch.from_numpy(np.asarray(v)) for k, v in state.items()}}, path)
  cfg = meta['config']
  model_cfg = vvt.models.get_config('xvit', num_heads=cfg['num_heads'], image_size=cfg['image_size'],
                                    mixing=dict(shift_div=cfg['shift_div'], num_segments=cfg['num_segments']),
                                    temporal_head=dict(num_heads=cfg['ta_head']['num_heads']))
  conv = video.convert('xvit', str(path), model_cfg, num_frames=16)
  assert np.abs(logits(conv, clip) - expected).max() < ATOL


def test_kinetics_defaults_of_the_converter_are_the_official_ones():
  """Without shift_div and num_segments the converter builds the official defaults (SHIFT_DIV 8, defaults.py:120;
  NUM_SEGMENTS 8, defaults.py:112 = the rows of temp_embed): the Kinetics model."""
  state, clip, expected, meta = load('xvit_segments_k400')
  cfg = meta['config']
  conv = xvit.convert(state, num_heads=cfg['num_heads'], head_num_heads=cfg['ta_head']['num_heads'],
                      image_size=cfg['image_size'], num_frames=16)
  assert conv.model_fields['mixing']['shift_div'] == 8 and conv.model_fields['mixing']['num_segments'] == 8
  assert np.abs(logits(conv, clip) - expected).max() < ATOL


def interpolated_time_table(table, length):
  """(1, R, D) -> (1, length, D) by linear interpolation (align_corners=False): the mapping X-ViT does NOT do."""
  rows = table.shape[1]
  src = np.clip((np.arange(length) + 0.5) * rows / length - 0.5, 0, rows - 1)
  lo = np.floor(src).astype(int)
  hi = np.minimum(lo + 1, rows - 1)
  w = (src - lo)[None, :, None]
  return table[:, lo] * (1 - w) + table[:, hi] * w


@pytest.mark.parametrize('name,mistake', [
    ('xvit_segments_k400', 'mix all 16 frames'),
    ('xvit_segments_ssv2', 'mix within 8-frame segments'),
    ('xvit_segments_k400', 'interpolate the temporal embedding'),
    ('xvit_segments_ssv2', 'interpolate the temporal embedding'),
    ('xvit_segments_k400', 'shift_div 4 (the old vvt default)'),
    ('xvit_segments_ssv2', 'shift_div 8'),
])
def test_mapping_controls_change_the_logits(name, mistake):
  state, clip, expected, meta = load(name)
  conv = convert(state, meta)
  params, overrides = None, {}
  mixing = dict(conv.model_fields['mixing'])  # one change at a time: the other mixing fields stay
  if mistake.startswith('mix all'):
    overrides = dict(mixing={**mixing, 'num_segments': 16})
  elif mistake.startswith('mix within'):
    overrides = dict(mixing={**mixing, 'num_segments': 8})
  elif mistake.startswith('interpolate'):
    params = jax.tree.map(lambda a: a, conv.params)
    table = params['encoder']['posembed']['time_embedding']
    params['encoder']['posembed']['time_embedding'] = interpolated_time_table(table, 16).astype(np.float32)
    overrides = dict(time_embedding_rows=16)
  else:
    overrides = dict(mixing={**mixing, 'shift_div': int(mistake.split()[1])})
  diff = float(np.abs(logits(conv, clip, params, **overrides) - expected).max())
  assert diff > 100 * ATOL, f'{name}: "{mistake}" moved the logits by only {diff}'
  reference = meta['reference_controls']['results']
  control = {'mix': 'XVIT.NUM_SEGMENTS', 'shift_div': 'XVIT.SHIFT_DIV'}.get(mistake.split()[0])
  if control:  # the official model with the same change moves exactly as much: the same model, mistaken
    (official_change,) = [v for k, v in reference.items() if k.startswith(control)]
    assert abs(diff - official_change) < ATOL, (diff, official_change)


def test_repeating_the_table_equals_a_tiled_16_row_table():
  """Row t mod 8 is exactly a 16-row table holding the 8 rows twice (what a converter could write instead)."""
  state, clip, expected, meta = load('xvit_segments_k400')
  conv = convert(state, meta)
  params = jax.tree.map(lambda a: a, conv.params)
  params['encoder']['posembed']['time_embedding'] = np.tile(params['encoder']['posembed']['time_embedding'], (1, 2, 1))
  assert np.abs(logits(conv, clip, params, time_embedding_rows=16) - expected).max() < ATOL


@pytest.mark.parametrize('fields,message', [
    (dict(num_frames=12, mixing=dict(num_segments=8)),
     'model.num_frames=12 is not a multiple of model.mixing.num_segments=8'),
    (dict(num_frames=16, time_embedding_rows=6), 'model.time_embedding_rows=6 does not divide the 16 temporal'),
    (dict(num_frames=12, time_embedding_rows=8, mixing=dict(num_segments=12)),
     'model.time_embedding_rows=8 does not divide the 12 temporal'),
    (dict(mixing=dict(num_segments=0)), 'model.mixing.num_segments must be a positive int'),
    (dict(positional_embedding='joint', time_embedding_rows=8), 'model.time_embedding_rows=8 applies to'),
])
def test_bad_segments_or_rows_are_one_line_before_compiling(fields, message):
  cfg = vvt.models.get_config('xvit', variant='Ti/8', image_size=32, num_layers=1, **fields)
  with pytest.raises(ValueError) as err:
    vvt.models.build(cfg)  # validates only: nothing is traced
  assert message in str(err.value) and '\n' not in str(err.value), str(err.value)


@pytest.mark.parametrize('kw,message', [
    (dict(num_frames=12), 'num_frames=12 is not a multiple of the 8 rows of base_model.temp_embed'),
    (dict(num_frames=16, num_segments=6), 'num_frames=16 is not a multiple of num_segments=6'),
])
def test_converter_refuses_a_clip_the_table_or_segments_do_not_divide(kw, message):
  state, _, _, meta = load('xvit_segments_k400')
  with pytest.raises(ValueError) as err:
    convert(state, meta, **kw)
  assert message in str(err.value) and '\n' not in str(err.value), str(err.value)


def test_num_frames_of_a_source_whose_tables_fix_the_clip_length():
  """Other sources are converted at the clip their tables say, then their tables resized (vvt.convert.retarget):
  scenic Model 2's temporal table by torch bicubic to the new n_t."""
  state = weight_files.load_state(str(SHARED_FIXTURES / 'scenic_vivit_model2_fe.npz'))
  assert video.convert_state('scenic_vivit', state, num_frames=8).model_fields['num_frames'] == 8
  conv = video.convert_state('scenic_vivit', state, num_frames=16)
  table = conv.params['temporal_encoder']['posembed']['pos_embedding']
  tt = conv.model_fields['tubelet'][0]
  assert conv.model_fields['num_frames'] == 16 and table.shape[1] - 16 // tt in (0, 1)
  assert conv.report.notes and conv.report.notes[0].startswith('clip 8 frames')
  video.check_params(conv.params, conv.model_config())
