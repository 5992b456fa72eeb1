"""Retrieval metrics against hand-computed small cases, the contrastive loss against its direct formula, the
prompt ensemble."""
import jax.numpy as jnp
import numpy as np
import pytest

from vvt.tasks import contrastive
from vvt.tasks import prompts
from vvt.tasks import retrieval_metrics as rm


def test_text_to_video_ranks_one_caption_per_video():
  # 3 captions x 3 videos; caption i describes video i
  sim = np.array([[0.9, 0.1, 0.2],    # its video first: rank 1
                  [0.8, 0.5, 0.1],    # video 0 higher: rank 2
                  [0.7, 0.6, 0.1]])   # last: rank 3
  ranks = rm.text_to_video_ranks(sim, [0, 1, 2])
  assert ranks.tolist() == [1, 2, 3]
  out = rm.summary(ranks, 't2v', ks=(1, 2))
  assert out == {'t2v_r1': pytest.approx(1 / 3), 't2v_r2': pytest.approx(2 / 3), 't2v_median_rank': 2.0,
                 't2v_mean_rank': 2.0}


def test_ties_count_against_the_match():
  sim = np.full((2, 2), 0.5)   # a model that scores everything alike ranks every match last
  assert rm.text_to_video_ranks(sim, [0, 1]).tolist() == [2, 2]
  assert rm.video_to_text_ranks(sim, [0, 1]).tolist() == [2, 2]
  # one other video tied with the match, one below: rank 2
  assert rm.text_to_video_ranks(np.array([[0.3, 0.3, 0.1]]), [1]).tolist() == [2]


def test_several_captions_per_video():
  # 4 captions, 2 videos: captions 0, 1, 2 describe video 0, caption 3 video 1
  sim = np.array([[0.2, 0.9],    # caption 0: video 1 higher -> t2v rank 2
                  [0.8, 0.1],    # caption 1: rank 1
                  [0.1, 0.3],    # caption 2: rank 2
                  [0.5, 0.4]])   # caption 3 (video 1): video 0 higher -> rank 2
  assert rm.text_to_video_ranks(sim, [0, 0, 0, 1]).tolist() == [2, 1, 2, 2]
  # video 0 over the captions (0.8 best, its own caption 1) -> rank 1; video 1's column: 0.9 (caption 0),
  # 0.4 (its caption 3), 0.3, 0.1 -> its best own caption is second
  assert rm.video_to_text_ranks(sim, [0, 0, 0, 1]).tolist() == [1, 2]
  out = rm.retrieval_metrics(sim, [0, 0, 0, 1], ks=(1,))
  assert out['t2v_r1'] == 0.25 and out['v2t_r1'] == 0.5
  assert out['v2t_median_rank'] == 1.5 and out['t2v_mean_rank'] == 1.75
  assert out['num_captions'] == 4 and out['num_retrieval_videos'] == 2 and 'best caption' in out[
      'retrieval_protocol']


def test_a_caption_of_a_video_not_in_the_similarities_is_refused():
  with pytest.raises(ValueError, match='names video 2 of 2'):
    rm.text_to_video_ranks(np.zeros((1, 2)), [2])


def _direct_info_nce(v, t, scale):
  v = v / np.linalg.norm(v, axis=1, keepdims=True)
  t = t / np.linalg.norm(t, axis=1, keepdims=True)
  logits = scale * v @ t.T
  b = len(v)
  out = []
  for i in range(b):
    v2t = -np.log(np.exp(logits[i, i]) / np.exp(logits[i]).sum())
    t2v = -np.log(np.exp(logits[i, i]) / np.exp(logits[:, i]).sum())
    out.append((v2t + t2v) / 2)
  return np.array(out)


def test_info_nce_is_the_symmetric_cross_entropy():
  rng = np.random.default_rng(0)
  v, t = rng.normal(size=(5, 8)), rng.normal(size=(5, 8))
  got = contrastive.info_nce(jnp.asarray(v, jnp.float32), jnp.asarray(t, jnp.float32), 7.0)
  np.testing.assert_allclose(got, _direct_info_nce(v, t, 7.0), rtol=1e-4, atol=1e-5)


def test_a_masked_pair_is_neither_query_nor_negative():
  rng = np.random.default_rng(1)
  v, t = rng.normal(size=(4, 8)), rng.normal(size=(4, 8))
  mask = jnp.asarray([1, 1, 0, 1], jnp.float32)
  got = contrastive.info_nce(jnp.asarray(v, jnp.float32), jnp.asarray(t, jnp.float32), 3.0, mask)
  keep = [0, 1, 3]
  assert float(got[2]) == 0.0
  np.testing.assert_allclose(np.asarray(got)[keep], _direct_info_nce(v[keep], t[keep], 3.0), rtol=1e-4, atol=1e-5)


def test_prompts_are_class_major_and_the_ensemble_is_the_renormalised_mean():
  texts = prompts.prompts(['ice_skating', 'bowling'], ('a video of {}.', '{} in a video'))
  assert texts == ['a video of ice skating.', 'ice skating in a video', 'a video of bowling.', 'bowling in a video']
  emb = np.array([[3.0, 0.0], [0.0, 1.0], [0.0, 2.0], [0.0, 5.0]])
  got = prompts.ensemble(emb, 2)
  np.testing.assert_allclose(got, [[np.sqrt(0.5), np.sqrt(0.5)], [0.0, 1.0]], rtol=1e-6)
  assert prompts.template_problems('task.zero_shot.templates', ('a {} of {}', 'ok {}')) == [
      'task.zero_shot.templates[0] must hold "{}" exactly once (where the class name goes), got \'a {} of {}\'']
  assert 'is empty' in prompts.template_problems('task.zero_shot.templates', ())[0]
