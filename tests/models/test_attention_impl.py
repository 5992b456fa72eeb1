"""Every implementation of the one attention primitive (model.attention_impl) against `einsum`: forward and
gradients in float32 at highest matmul precision (conftest), for the primitive and for every scheme."""
import functools
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import REPO
from tests.models.params import random_params
from tests.models.test_models import SCHEMES
from tests.models.test_models import tiny
from tests.models.test_models import video
import vvt.models as models
from vvt.models import kernels

# Two programs (online softmax over tiles vs one softmax) on q, k, v ~ N(0, 1), d_h = 16: logits |.| < ~5, so
# float32 rounding moves outputs and gradients by ~1e-7 of their largest magnitude (measured > 10x below RTOL).
RTOL = 1e-5


def assert_close(actual, expected, rtol=RTOL):
  """Max error within rtol of the largest magnitude in the tree `expected` (a gradient that is zero in exact
  arithmetic, e.g. the key bias's under softmax, is float noise of either sign: no leaf-wise relative test)."""
  scale = max(float(jnp.abs(e).max()) for e in jax.tree.leaves(expected)) or 1.0
  assert jax.tree.structure(actual) == jax.tree.structure(expected)
  for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=0, atol=rtol * scale)


def qkv(g, lq, lk, h=2, d=16, seed=0):
  ks = jax.random.split(jax.random.key(seed), 4)
  return (jax.random.normal(ks[0], (g, lq, h, d)), jax.random.normal(ks[1], (g, lk, h, d)),
          jax.random.normal(ks[2], (g, lk, h, d)), jax.random.normal(ks[3], (g, lq, h, d)))


def value_and_grads(fn, q, k, v, w):
  """Output and d(sum(w * out))/d(q, k, v) of one attention function, jitted."""
  out = jax.jit(fn)(q, k, v)
  grads = jax.jit(jax.grad(lambda q, k, v: jnp.sum(w * fn(q, k, v)), argnums=(0, 1, 2)))(q, k, v)
  return out, grads


IMPLS = {
    'chunked_block_8': lambda q, k, v: kernels.chunked_attention(q, k, v, block_size=8),
    'chunked_default': kernels.chunked_attention,  # tiled by queries on the CPU
    'chunked_keys_block_8': lambda q, k, v: kernels.chunked_attention(q, k, v, block_size=8, tiling='keys'),
    'chunked_keys_default': lambda q, k, v: kernels.chunked_attention(q, k, v, tiling='keys'),
    'chunked_queries_block_8': lambda q, k, v: kernels.chunked_attention(q, k, v, block_size=8,
                                                                          tiling='queries'),
    'dot_product': kernels.xla_dot_product_attention,
    # the cuDNN path's padding (tokens to a multiple of 64, seq lengths masking it) through jax's XLA kernel
    'dot_product_padded': lambda q, k, v: kernels.xla_dot_product_attention(
        q, k, v, pad_multiple=64, implementation='xla'),
}


@functools.lru_cache(maxsize=None)
def einsum_reference(g, lq, lk):
  """einsum's output and gradients on `qkv(g, lq, lk)`: compiled once per shape, read by every implementation."""
  return value_and_grads(kernels.einsum_attention, *qkv(g, lq, lk))


@pytest.mark.parametrize('lq,lk', [(37, 37), (37, 45), (5, 5), (64, 64)])  # Lk > Lq: X-ViT summary tokens
@pytest.mark.parametrize('name', sorted(IMPLS))
def test_primitive_matches_einsum(name, lq, lk):
  q, k, v, w = qkv(3, lq, lk)
  ref_out, ref_grads = einsum_reference(3, lq, lk)
  out, grads = value_and_grads(IMPLS[name], q, k, v, w)
  assert out.shape == ref_out.shape and np.all(np.isfinite(out))
  assert_close(out, ref_out)
  assert_close(grads, ref_grads)


@pytest.mark.parametrize('tiling', ['keys', 'queries'])
def test_chunked_keeps_bfloat16_and_accumulates_in_float32(tiling):
  q, k, v, w = (a.astype(jnp.bfloat16) for a in qkv(2, 40, 40))
  out, grads = value_and_grads(lambda *a: kernels.chunked_attention(*a, block_size=16, tiling=tiling), q, k, v, w)
  ref, ref_grads = value_and_grads(kernels.einsum_attention, *(a.astype(jnp.float32) for a in (q, k, v, w)))
  assert out.dtype == jnp.bfloat16 and all(g.dtype == jnp.bfloat16 for g in grads)
  assert float(jnp.abs(out.astype(jnp.float32) - ref).max()) < 2e-2
  for g, r in zip(grads, ref_grads, strict=True):
    assert float(jnp.abs(g.astype(jnp.float32) - r).max()) < 3e-2 * float(jnp.abs(r).max())


def test_chunked_tiling_follows_the_backend_and_refuses_unknown_ones():
  """chunked is tiled by queries for the CPU and by keys elsewhere: the programs differ by their loops' tiles."""
  q, k, v, _ = qkv(1, 600, 600)
  cpu, gpu = (str(jax.make_jaxpr(lambda *a, b=b: kernels.chunked_attention(*a, backend=b))(q, k, v))
              for b in ('cpu', 'gpu'))
  assert 'f32[128,600]' in cpu and 'f32[128,600]' not in gpu  # a tile of 128 queries x all keys, one head
  assert 'f32[1,2,600,512]' in gpu and 'f32[1,2,600,512]' not in cpu  # all queries and heads x 512 keys
  assert 'f32[1,2,600,600]' not in cpu + gpu  # never all the scores
  with pytest.raises(ValueError, match='tiling must be'):
    kernels.chunked_attention(q, k, v, tiling='rows')


def test_splash_kernel_in_interpret_mode_matches_einsum():
  """The Pallas TPU kernel, run by Pallas' interpreter on CPU: padding to 128 and the segment-id masking."""
  pytest.importorskip('jax.experimental.pallas.ops.tpu.splash_attention')
  q, k, v, w = qkv(1, 130, 131, h=2, d=32)
  ref_out, ref_grads = value_and_grads(kernels.einsum_attention, q, k, v, w)
  out, grads = value_and_grads(lambda q, k, v: kernels.splash_attention(q, k, v, interpret=True), q, k, v, w)
  assert_close(out, ref_out)
  assert_close(grads, ref_grads)


@pytest.mark.parametrize('impl', ['chunked', 'dot_product', 'splash'])
def test_only_einsum_has_attention_dropout(impl):
  q, k, v, _ = qkv(1, 8, 8)
  with pytest.raises(ValueError, match=f"attention_impl='{impl}' has no attention dropout"):
    kernels.dot_product_attention(q, k, v, dropout_rate=0.1, dropout_rng=jax.random.key(0),
                                    deterministic=False, impl=impl, backend='tpu')
  with pytest.raises(ValueError, match=f"model.attention_impl='{impl}' has no attention dropout"):
    models.resolve(tiny('vivit', 'spatiotemporal', attention_impl=impl, attention_dropout_rate=0.1))


def test_auto_rule():
  choose = lambda backend, n, dtype=jnp.float32, dropout=False: kernels.choose_impl(
      'auto', backend=backend, q_len=n, kv_len=n, head_dim=64, dtype=dtype, dropout=dropout)
  for backend in ('cpu', 'gpu', 'tpu'):
    for n in (8, 16, 197, 785, 1023):  # temporal, spatial, TimeSformer local: short groups
      assert choose(backend, n) == 'einsum'
    assert choose(backend, 3137, dropout=True) == 'einsum'
  assert choose('cpu', 1024) == choose('cpu', 3137) == 'chunked'
  assert choose('tpu', 1569) == 'splash'
  assert choose('gpu', 3137, jnp.bfloat16) == 'dot_product'
  assert choose('gpu', 3137, jnp.float32) == 'chunked'  # cuDNN takes half precision only
  assert kernels.choose_impl('chunked', backend='cpu', q_len=8, kv_len=8, head_dim=64, dtype=jnp.float32,
                               dropout=False) == 'chunked'


def loss_and_grads(module, params, x, w):
  def loss(p):
    out = module.apply({'params': p}, x)
    return jnp.sum(w * out), out
  (_, out), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(params)
  return out, grads


# Every distinct path to the primitive: global cls (joint), two encoders, space/time without cls, Model 4's split
# heads, the cls skipping `time` (+ projection), local/global, axial, per-frame cls, X-ViT's shifted K/V with
# summary tokens and segments. dot_product (jax's own function) on four of them.
MODEL_CASES = [(SCHEMES[i], impls) for i, impls in (
    (0, ('chunked', 'dot_product')), (1, ('chunked',)), (3, ('chunked',)), (5, ('chunked', 'dot_product')),
    (8, ('chunked', 'dot_product')), (9, ('chunked',)), (10, ('chunked',)), (6, ('chunked',)),
    (14, ('chunked', 'dot_product')))]


@pytest.mark.parametrize('scheme_case,impls', MODEL_CASES, ids=lambda c: '-'.join(c[:2]) if len(c) == 3 else None)
def test_every_scheme_matches_einsum(scheme_case, impls, monkeypatch):
  """chunked, in both tilings (by 4 queries, the CPU's; by 4 keys, GPU / TPU's, built here with backend='gpu':
  several tiles and a padded last one in every stage), and dot_product give einsum's logits and gradients:
  Model 4's split heads, X-ViT's shifted K/V and summary tokens, class tokens."""
  family, scheme, kw = scheme_case
  monkeypatch.setattr(kernels, 'CHUNK_SIZE', 4)
  monkeypatch.setattr(kernels, 'QUERY_TILE', 4)
  x = video(b=2)
  w = jax.random.normal(jax.random.key(5), (2, 3))
  cfg = dict(kw, num_layers=1)
  ref = models.build(tiny(family, scheme, attention_impl='einsum', **cfg))
  params = random_params(ref, x)
  ref_out, ref_grads = loss_and_grads(ref, params, x, w)
  for impl, backend in [(impl, None) for impl in impls] + [('chunked', 'gpu')]:
    module = models.build(tiny(family, scheme, attention_impl=impl, **cfg), backend=backend)
    out, grads = loss_and_grads(module, params, x, w)
    assert_close(out, ref_out)
    assert_close(grads, ref_grads)


def test_auto_with_attention_dropout_is_einsum_with_the_same_mask():
  x = video(b=2)
  outs = []
  for impl in ('einsum', 'auto'):
    module = models.build(tiny('timesformer', 'divided', num_layers=1, attention_impl=impl,
                               attention_dropout_rate=0.3))
    params = random_params(module, x)
    outs.append(jax.jit(lambda p, module=module: module.apply({'params': p}, x, train=True,
                                               rngs={'dropout': jax.random.key(7)}))(params))
  np.testing.assert_array_equal(outs[0], outs[1])


def test_splash_off_tpu_is_a_build_error():
  cfg = tiny('vivit', 'spatiotemporal', attention_impl='splash')
  models.resolve(cfg)  # a valid config: the backend decides
  with pytest.raises(ValueError, match="model.attention_impl='splash' is the Pallas TPU kernel: .* backend 'cpu'"):
    models.build(cfg)
  assert models.build(cfg, backend='tpu').backend == 'tpu'  # e.g. a deviceless TPU compile on a CPU host


def test_config_checks_and_command_line_override():
  with pytest.raises(ValueError, match=r"^model.attention_impl must be one of .*did you mean 'chunked'"):
    models.resolve(tiny('vivit', 'spatiotemporal', attention_impl='chunk'))
  from vvt.config import loader as cli_config
  overrides = [('model.attention_impl', 'chunked'), ('model.remat', 'dots_saveable'), ('model.scan_layers', 'True'),
               ('model.param_dtype', 'bfloat16')]
  config = cli_config.load('configs/kinetics400/vivit_b_fe.py', overrides, files=(), init=False)
  model = models.resolve(config.model)
  assert (model.attention_impl, model.remat, model.scan_layers, model.param_dtype) == (
      'chunked', 'dots_saveable', True, 'bfloat16')
  config = cli_config.load('configs/kinetics400/vivit_b_fe.py', [('model.remat', 'True')], files=(), init=False)
  assert models.resolve(config.model).remat == 'full'


def test_splash_runs_per_device_under_a_sharded_mesh():
  """A Mosaic kernel is not partitioned by XLA ("cannot be automatically partitioned"): under the mesh the
  steps are traced with, splash runs in shard_map, groups over the data axes and heads over `model`. On 4
  forced host devices (Pallas' interpreter), in a subprocess: value and gradients equal einsum's, and the
  lowered step has the shard_map (without it, this test fails)."""
  pytest.importorskip('jax.experimental.pallas.ops.tpu.splash_attention')
  code = textwrap.dedent("""
      import jax, jax.numpy as jnp, numpy as np
      from jax.sharding import NamedSharding, PartitionSpec as P
      from vvt.models import kernels
      from vvt.train import mesh as mesh_lib
      jax.config.update('jax_default_matmul_precision', 'highest')
      mesh = mesh_lib.mesh_of_axes({'data': 2, 'model': 2})
      ks = jax.random.split(jax.random.key(0), 4)
      q, k, v, w = (jax.random.normal(r, (4, 130, 2, 32)) for r in ks)
      put = lambda x: jax.device_put(x, NamedSharding(mesh, P('data', None, 'model', None)))
      def loss(fn):
        return jax.jit(jax.value_and_grad(lambda q, k, v: jnp.sum(fn(q, k, v) * w), argnums=(0, 1, 2)))
      splash = lambda q, k, v: kernels.splash_attention(q, k, v, interpret=True)
      with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
        text = loss(splash).lower(put(q), put(k), put(v)).as_text()
        got = loss(splash)(put(q), put(k), put(v))
      want = loss(kernels.einsum_attention)(q, k, v)
      err = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)))
      print('shard_map', 'shard_map' in text or 'manual' in text.lower(), 'err', err < 2e-4)
  """)
  env = dict(os.environ, XLA_FLAGS='--xla_force_host_platform_device_count=4', JAX_PLATFORMS='cpu')
  res = subprocess.run([sys.executable, '-c', code], cwd=str(REPO), env=env, capture_output=True, text=True,
                       timeout=600)
  assert res.stdout.split() == ['shard_map', 'True', 'err', 'True'], res.stdout + res.stderr[-3000:]
