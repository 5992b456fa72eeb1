"""Each scheme's attention neighbourhood is measured (Jacobian of one output token w.r.t. every input token)
and compared with the paper's definition: TimeSformer Fig. 2, ViViT Figs. 1, 4, 5 (ICCV version), X-ViT Fig. 1 /
eq. 9-10."""

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from vvt.models import attention as attn_lib
from vvt.models import groupings
from vvt.models import schemes
from vvt.models.blocks import EncoderBlock

T, NH, NW, D, HEADS = 4, 4, 4, 16, 4
GRID = (T, NH, NW)
COORDS = [(t, h, w) for t in range(T) for h in range(NH) for w in range(NW)]  # (t, h, w) token order


def expected(stage, q, window=1):
  """The paper's neighbourhood of query token q=(t, h, w): a (T, N) boolean mask of the keys it sees."""
  t0, h0, w0 = q
  rule = {
      'joint': lambda t, h, w: True,
      'space': lambda t, h, w: t == t0,
      'time': lambda t, h, w: (h, w) == (h0, w0),
      'width': lambda t, h, w: t == t0 and h == h0,  # same row: attends along the width
      'height': lambda t, h, w: t == t0 and w == w0,  # same column
      'local': lambda t, h, w: (h // (NH // 2), w // (NW // 2)) == (h0 // (NH // 2), w0 // (NW // 2)),
      'global': lambda t, h, w: (t % 2, h % 2, w % 2) == (t0 % 2, h0 % 2, w0 % 2),
      'factorised_dot_product': lambda t, h, w: t == t0 or (h, w) == (h0, w0),
      'space_time_mixing': lambda t, h, w: abs(t - t0) <= window,
  }[stage]
  return np.array([rule(*c) for c in COORDS]).reshape(T, NH * NW)


def influence(fn, x, q):
  """Which input tokens change output token q: nonzero rows of d out[q] / d x, as a (T, N) mask."""
  return influence_all(fn, x)[q[0], q[1] * NW + q[2]]


def influence_all(fn, x):
  """(T, N, T, N) mask: [output token, input token] pairs with a nonzero Jacobian block (one compile)."""
  jac = jax.jit(jax.jacobian(lambda x: fn(x)[0]))(x)  # (T, N, D, 1, T, N, D)
  return np.asarray(jnp.any(jac != 0, axis=(2, 3, 6)))


def mha(stage, mixing=None):
  module = attn_lib.MultiHeadAttention(num_heads=HEADS)
  x = jax.random.normal(jax.random.key(0), (1, T, NH * NW, D))
  inner = 'space' if stage == 'space_time_mixing' else stage
  params = module.init(jax.random.key(1), x, None, stage=inner, grid=GRID, mixing=mixing)
  fn = lambda p, x: module.apply(p, x, None, stage=inner, grid=GRID, mixing=mixing)[0]
  return fn, params, x


@pytest.mark.parametrize('stage', groupings.STAGES + tuple(groupings.HEAD_SPLITS))
def test_stage_neighbourhood_matches_paper(stage):
  fn, params, x = mha(stage)
  masks = influence_all(lambda x: fn(params, x), x)
  for q in COORDS:
    np.testing.assert_array_equal(masks[q[0], q[1] * NW + q[2]], expected(stage, q), err_msg=f'{stage} query {q}')


@pytest.mark.parametrize('window', [1, 2])
def test_space_time_mixing_sees_neighbouring_frames_only(window):
  mixing = ml_collections.ConfigDict(dict(window=window, shift_div=8, summary_token=False))
  fn, params, x = mha('space_time_mixing', mixing)
  masks = influence_all(lambda x: fn(params, x), x)
  for q in COORDS:  # zero fill at the clip ends: no wrap-around from the other end.
    np.testing.assert_array_equal(masks[q[0], q[1] * NW + q[2]], expected('space_time_mixing', q, window),
                                  err_msg=f'query {q}')


def test_space_time_mixing_reaches_other_frames_only_through_the_shifted_channels():
  mixing = ml_collections.ConfigDict(dict(window=1, shift_div=4, summary_token=False))
  fn, params, x = mha('space_time_mixing', mixing)
  fold = D // 4
  p = jax.tree.map(lambda a: a, params)
  for name in ('key', 'value'):  # zero the projections of the channels taken from t-1 and t+1
    kernel = p['params'][name]['kernel'].reshape(D, D).at[:, :2 * fold].set(0.0)
    p['params'][name]['kernel'] = kernel.reshape(D, HEADS, D // HEADS)
    p['params'][name]['bias'] = p['params'][name]['bias'].reshape(D).at[:2 * fold].set(0.0).reshape(HEADS, -1)
  masks = influence_all(lambda x: fn(p, x), x)
  for q in COORDS:
    np.testing.assert_array_equal(masks[q[0], q[1] * NW + q[2]], expected('space', q), err_msg=f'query {q}')


def test_temporal_shift_channel_roles_and_zero_fill():
  x = jnp.arange(1, T + 1, dtype=jnp.float32)[None, :, None, None] * jnp.ones((1, T, 1, 8))
  y = np.asarray(groupings.temporal_shift(x, window=1, shift_div=4))[0, :, 0]  # (T, C); fold = 2
  for t in range(T):
    np.testing.assert_array_equal(y[t, 0:2], t + 2 if t + 1 < T else 0)  # from frame t+1
    np.testing.assert_array_equal(y[t, 2:4], t if t > 0 else 0)  # from frame t-1
    np.testing.assert_array_equal(y[t, 4:], t + 1)  # own frame


@pytest.mark.parametrize('window', [1, 2])
def test_space_time_mixing_stays_within_segments(window):
  """Official XVIT.NUM_SEGMENTS: frames 0-1 and 2-3 mix as two clips of their own (zeros at every segment end)."""
  seg = 2
  mixing = ml_collections.ConfigDict(dict(window=window, shift_div=8, summary_token=False, num_segments=seg))
  fn, params, x = mha('space_time_mixing', mixing)
  masks = influence_all(lambda x: fn(params, x), x)
  for q in COORDS:
    want = expected('space_time_mixing', q, window) & (np.arange(T) // seg == q[0] // seg)[:, None]
    np.testing.assert_array_equal(masks[q[0], q[1] * NW + q[2]], want, err_msg=f'query {q}')


def test_temporal_shift_by_segments_is_the_shift_of_each_segment():
  x = jax.random.normal(jax.random.key(3), (2, T, 3, 8))
  y = groupings.temporal_shift(x, window=1, shift_div=4, num_segments=2)
  for s in range(0, T, 2):
    np.testing.assert_array_equal(y[:, s:s + 2], groupings.temporal_shift(x[:, s:s + 2], window=1, shift_div=4))
  np.testing.assert_array_equal(groupings.temporal_shift(x, window=1, shift_div=4, num_segments=T),
                                groupings.temporal_shift(x, window=1, shift_div=4))
  with pytest.raises(ValueError, match='num_segments=3'):
    groupings.temporal_shift(x, window=1, shift_div=4, num_segments=3)


def test_summary_tokens_are_shared_within_a_segment_only():
  mixing = ml_collections.ConfigDict(dict(window=1, shift_div=4, summary_token=True, num_segments=2))
  fn, params, x = mha('space_time_mixing', mixing)
  got = influence(lambda x: fn(params, x), x, (0, 1, 1))
  assert got[:2].all() and not got[2:].any()


def test_summary_token_lets_every_frame_see_every_frame():
  mixing = ml_collections.ConfigDict(dict(window=1, shift_div=4, summary_token=True))
  fn, params, x = mha('space_time_mixing', mixing)
  got = influence(lambda x: fn(params, x), x, (0, 1, 1))
  assert got.all()  # frame 3 reaches frame 0 through its summary token only


@pytest.mark.parametrize('stage', groupings.STAGES)
def test_group_ungroup_roundtrip(stage):
  x = jnp.arange(2 * T * NH * NW * 3).reshape(2, T, NH * NW, 3)
  g = groupings.group(x, stage, GRID)
  np.testing.assert_array_equal(groupings.ungroup(g, stage, GRID, 2, T, NH * NW), x)


def test_global_class_token_skips_time_attention_and_joins_space_attention():
  """TimeSformer divided: cls excluded from temporal attention, replicated per frame in spatial attention."""
  module = attn_lib.MultiHeadAttention(num_heads=HEADS)
  x = jax.random.normal(jax.random.key(0), (1, T, NH * NW, D))
  cls = jax.random.normal(jax.random.key(2), (1, 1, D))
  params = module.init(jax.random.key(1), x, cls, stage='space', grid=GRID)
  y_time, c_time = module.apply(params, x, cls, stage='time', grid=GRID)
  assert c_time is None
  y_time_no_cls, _ = module.apply(params, x, None, stage='time', grid=GRID)
  np.testing.assert_array_equal(y_time, y_time_no_cls)
  # space: every patch output depends on cls; cls output is the mean of its per-frame outputs.
  jac = jax.jacobian(lambda c: module.apply(params, x, c, stage='space', grid=GRID)[0])(cls)
  assert np.all(np.asarray(jnp.any(jac != 0, axis=(0, 3, 4, 5, 6))))
  _, c_space = module.apply(params, x, cls, stage='space', grid=GRID)
  per_frame = [module.apply(params, x[:, t:t + 1], cls, stage='space', grid=(1, NH, NW))[1] for t in range(T)]
  np.testing.assert_allclose(c_space, np.mean(per_frame, axis=0), atol=1e-5)


@pytest.mark.parametrize('stages,expect_all', [(('time', 'space'), True), (('space',), False)])
def test_block_composes_stages(stages, expect_all):
  """One divided block (time then space) lets a token see the whole clip; a space block only its frame."""
  block = EncoderBlock(stages=stages, projected=(False,) * len(stages), grid=GRID, num_heads=HEADS, mlp_dim=32)
  x = jax.random.normal(jax.random.key(0), (1, T, NH * NW, D))
  params = block.init(jax.random.key(1), x, None)
  got = influence(lambda x: block.apply(params, x, None)[0], x, (1, 2, 2))
  assert got.all() == expect_all
  assert got[1].all()


# The papers' stages of one block of every scheme (ViViT sec. 3.3, TimeSformer Fig. 1, X-ViT sec. 3): a scheme in
# vvt/models/schemes.py needs its row here, and each of its groupings a rule in `expected`.
PAPER_STAGES = {
    'spatiotemporal': (('joint',),),
    'factorised_encoder': (('joint',),),  # each of its two encoders
    'factorised_self_attention': (('space',), ('time',)),
    'factorised_dot_product': (('space', 'time'),),  # one stage, its heads split between the two
    'space': (('space',),),
    'joint': (('joint',),),
    'divided': (('time',), ('space',)),
    'local_global': (('local',), ('global',)),
    'axial': (('time',), ('width',), ('height',)),
    'space_time_mixing': (('space',),),  # keys and values shifted in time (tests above)
    'space_then_time': (('joint',),),  # each of its two encoders (VideoPrism: frames, then every position's times)
}


def test_every_scheme_of_the_table_has_its_papers_stages():
  assert set(schemes.SCHEME_TABLE) == set(PAPER_STAGES)
  for name, scheme in schemes.SCHEME_TABLE.items():
    got = tuple(groupings.head_groupings(stage) for stage in scheme.stages)
    assert got == PAPER_STAGES[name], name


def head_parts(stage):
  """[(grouping, heads, mask, joins the class token)] of one stage: per head part (`groupings.head_slices`), the
  (M, M) bool [query, key] pairs of the M = T * N tokens that `groupings.group` puts in one group."""
  ids = np.arange(T * NH * NW).reshape(1, T, NH * NW)
  parts = []
  for grouping, heads in groupings.head_slices(stage, HEADS):
    index = np.asarray(groupings.group(ids, grouping, GRID))  # (G, L) token indices t * N + n
    mask = np.zeros((T * NH * NW, T * NH * NW), bool)
    mask[index[:, :, None], index[:, None, :]] = True
    parts.append((grouping, heads, mask, groupings.joins_class_token(grouping)))
  return parts


@pytest.mark.parametrize('name', sorted(schemes.SCHEME_TABLE))
def test_table_groups_are_the_papers_neighbourhoods(name):
  """Each stage of the table's record, grouped as the model groups it: each head part's groups are the paper's
  rule."""
  for stage in schemes.SCHEME_TABLE[name].stages_for('space_time'):
    parts = head_parts(stage)
    for grouping, _, mask, class_token in parts:
      for i, q in enumerate(COORDS):
        np.testing.assert_array_equal(mask[i].reshape(T, NH * NW), expected(grouping, q),
                                      err_msg=f'{name} {stage} {grouping} query {q}')
      assert class_token == (grouping != 'time')
    assert sum(heads.stop - heads.start for _, heads, _, _ in parts) == HEADS


def test_attention_order_reverses_only_model_3():
  for name, scheme in schemes.SCHEME_TABLE.items():
    reverse = scheme.stages_for('time_space')
    assert reverse == (scheme.stages[::-1] if name == 'factorised_self_attention' else scheme.stages), name
