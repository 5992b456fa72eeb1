"""Cross-entropy with label smoothing, multi-head sum, mixup and cutmix."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from vvt.tasks import losses


def test_cross_entropy_matches_optax_and_smoothing_formula():
  rng = np.random.default_rng(0)
  logits = jnp.asarray(rng.normal(size=(6, 5)), jnp.float32)
  labels = jnp.asarray([0, 1, 2, 3, 4, 0])
  ce = losses.softmax_cross_entropy(logits, losses.one_hot_targets(labels, 5, 0.0))
  np.testing.assert_allclose(ce, optax.softmax_cross_entropy_with_integer_labels(logits, labels),
                             rtol=1e-6)
  t = losses.one_hot_targets(labels, 5, label_smoothing=0.3)
  np.testing.assert_allclose(t.sum(-1), 1.0, rtol=1e-6)
  np.testing.assert_allclose(t[0], [0.7 + 0.06, 0.06, 0.06, 0.06, 0.06], rtol=1e-6)
  logp = jax.nn.log_softmax(logits)
  manual = -(0.7 * logp[jnp.arange(6), labels] + 0.3 * logp.mean(-1))
  np.testing.assert_allclose(losses.softmax_cross_entropy(logits, t), manual, rtol=1e-5)


def test_multi_head_loss_is_the_sum_of_heads():
  rng = np.random.default_rng(1)
  lv = jnp.asarray(rng.normal(size=(4, 97)), jnp.float32)
  ln = jnp.asarray(rng.normal(size=(4, 300)), jnp.float32)
  yv, yn = jnp.asarray([1, 2, 3, 96]), jnp.asarray([0, 299, 5, 7])
  total = losses.multi_head_loss(
      {'verb': lv, 'noun': ln},
      {'verb': losses.one_hot_targets(yv, 97, 0.0), 'noun': losses.one_hot_targets(yn, 300, 0.0)})
  expected = (optax.softmax_cross_entropy_with_integer_labels(lv, yv) +
              optax.softmax_cross_entropy_with_integer_labels(ln, yn))
  np.testing.assert_allclose(total, expected, rtol=1e-6)


def _batch(b=4, t=3, s=8):
  rng = np.random.default_rng(2)
  x = jnp.asarray(rng.normal(size=(b, t, s, s, 3)), jnp.float32)
  y = {'': losses.one_hot_targets(jnp.arange(b) % 3, 3, 0.0)}
  return x, y


def test_no_mixing_is_identity():
  x, y = _batch()
  x2, y2, lam = losses.mix_batch(jax.random.PRNGKey(0), x, y)
  assert x2 is x and float(lam) == 1.0
  np.testing.assert_array_equal(y2[''], y[''])


def test_mixup_mixes_inputs_and_targets_with_the_same_lambda():
  x, y = _batch()
  x2, y2, lam = jax.jit(lambda r: losses.mix_batch(r, x, y, mixup_alpha=0.4))(
      jax.random.PRNGKey(3))
  lam = float(lam)
  assert 0.0 < lam < 1.0
  np.testing.assert_allclose(x2, lam * x + (1 - lam) * x[::-1], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(y2[''], lam * y[''] + (1 - lam) * y[''][::-1], rtol=1e-6)
  np.testing.assert_allclose(y2[''].sum(-1), 1.0, rtol=1e-6)
  # deterministic given the key, different for another key
  x3, _, lam3 = losses.mix_batch(jax.random.PRNGKey(3), x, y, mixup_alpha=0.4)
  np.testing.assert_allclose(x3, x2, rtol=1e-5, atol=1e-6)
  _, _, lam4 = losses.mix_batch(jax.random.PRNGKey(4), x, y, mixup_alpha=0.4)
  assert float(lam4) != pytest.approx(lam)


def test_cutmix_pastes_one_box_in_every_frame_and_lambda_is_its_area():
  x, y = _batch(b=4, t=5, s=16)
  for seed in range(5):
    x2, y2, lam = losses.mix_batch(jax.random.PRNGKey(seed), x, y, cutmix_alpha=1.0)
    from_partner = np.isclose(np.asarray(x2), np.asarray(x[::-1])) & ~np.isclose(
        np.asarray(x2), np.asarray(x))
    box = from_partner[0, :, :, :, 0]  # (T, H, W)
    assert all((box[t] == box[0]).all() for t in range(5))  # same box in every frame
    assert float(lam) == pytest.approx(1.0 - box[0].mean(), abs=1e-6)
    np.testing.assert_allclose(y2[''], float(lam) * y[''] + (1 - float(lam)) * y[''][::-1],
                               rtol=1e-5)


def test_mixup_and_cutmix_switch():
  x, y = _batch(s=16)
  kinds = set()
  for seed in range(12):
    x2, _, lam = losses.mix_batch(jax.random.PRNGKey(seed), x, y, mixup_alpha=0.5,
                                  cutmix_alpha=1.0, switch_prob=0.5)
    is_mixup = np.allclose(x2, float(lam) * x + (1 - float(lam)) * x[::-1], atol=1e-5)
    kinds.add(is_mixup)
  assert kinds == {True, False}
