"""The video-text tasks' pieces without a model: the zero-shot aggregator (prompt ensembles, cosine per view,
multi-view average), the retrieval aggregator (views averaged, several captions per video), the captions' tokens
and the caption drawn per step, and the tasks' config checks."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from vvt.tasks import registry
from vvt.tasks import retrieval
from vvt.tasks import video_text_options
from vvt.tasks import zero_shot


def test_zero_shot_scores_each_view_by_its_cosine_with_the_prompt_ensembles():
  task = zero_shot.ZeroShot(num_classes=2, templates=('a {}', 'the {}'))
  assert task.eval_texts({'': ['cat', 'dog']}) == ('a cat', 'the cat', 'a dog', 'the dog')
  agg = task.aggregator(2)
  agg.class_names = {'': ['cat', 'dog']}
  # class 0's prompts along x (ensemble x), class 1's along y and -x+y (ensemble normalised (-1, 1+sqrt2)...)
  agg.set_text_embeddings(np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 3.0], [0.0, 1.0]]))
  # video 0: views at (1, 0.2) and (1, -0.2): class 0; video 1: one view near y but its other view near x,
  # the average of the two views' cosines decides (0.9 + 0.1 for y against 0.1 + 0.8 for x)
  views = np.array([[1.0, 0.2], [1.0, -0.2], [0.1, 0.9], [0.8, 0.1]])
  agg.add({'': views}, np.array([0, 0, 1, 1]), np.ones(4), {'': np.array([0, 0, 1, 1])})
  res = agg.result()
  assert res['video_top1'] == 1.0 and res['clip_top1'] == 0.75
  expected = (views / np.linalg.norm(views, axis=1, keepdims=True))
  np.testing.assert_allclose(agg.video_scores()[''][1], expected[2:].mean(0), rtol=1e-6)
  assert res['zero_shot']['templates'] == ['a {}', 'the {}']
  with pytest.raises(ValueError, match='names of the classes'):
    task.eval_texts({'': None})


def test_retrieval_aggregator_averages_views_and_ranks_every_caption():
  agg = retrieval.RetrievalAggregator(num_videos=2, captions=2)
  text = np.zeros((4, 2, 2))
  text[:2, 0] = [1.0, 0.0]        # video 0: one caption along x (its second is padding)
  text[2:, 0] = [0.0, 1.0]        # video 1: two captions, along y and along x
  text[2:, 1] = [1.0, 0.1]
  real = np.array([[1, 0], [1, 0], [1, 1], [1, 1]], bool)
  video = np.array([[2.0, 0.0], [1.0, 0.2], [0.0, 1.0], [0.3, 1.0]])
  agg.add({'video': video, 'text': text}, np.array([0, 0, 1, 1]), np.ones(4), {'real': real})
  res = agg.result()
  # captions: c0 (x) -> video 0 first; c1 (y) -> video 1 first; c2 (x, video 1's) -> video 0 first: rank 2
  assert res['num_captions'] == 3 and res['num_retrieval_videos'] == 2 and res['num_views'] == 4
  assert res['t2v_r1'] == pytest.approx(2 / 3) and res['t2v_mean_rank'] == pytest.approx(4 / 3)
  # video 0 (near x): video 1's caption c2 (x, 0.1) is nearer than its own c0 (x): rank 2; video 1's own c1 first
  assert res['v2t_r1'] == 0.5 and res['v2t_mean_rank'] == 1.5
  arrays = agg.arrays()
  assert arrays['caption_video'].tolist() == [0, 1, 1] and arrays['caption_index'].tolist() == [0, 0, 1]
  np.testing.assert_allclose(np.linalg.norm(arrays['video_embeddings'], axis=1), 1.0, rtol=1e-6)
  (name, text_csv), = agg.report_files('/x/test')
  assert name == '/x/test_captions.csv' and text_csv.splitlines()[3] == '1,1,2'


def test_captions_are_tokenised_padding_left_zero():
  calls = []

  def tokenize(texts):
    calls.append(list(texts))
    n = len(texts)
    return np.arange(n * 3, dtype=np.int32).reshape(n, 3) + 1, np.ones((n, 3), np.int32)
  batch = {'caption': np.array([[b'a b', b''], [b'c', b'd']], dtype=object), 'mask': np.ones(2)}
  out = retrieval.tokenized(batch, tokenize, 3)
  assert calls == [['a b', 'c', 'd']] and 'caption' not in out
  assert out[retrieval.IDS].shape == (2, 2, 3) and out[retrieval.MASK][0, 1].tolist() == [0, 0, 0]
  assert out[retrieval.IDS][1, 1].tolist() == [7, 8, 9]


def test_a_step_draws_one_real_caption_per_video():
  ids = jnp.arange(2 * 3 * 2, dtype=jnp.int32).reshape(2, 3, 2)
  mask = jnp.array([[[1, 1], [0, 0], [1, 0]], [[0, 0], [0, 0], [0, 0]]], jnp.int32)
  drawn = set()
  for seed in range(12):
    got_ids, got_mask, real = retrieval.choose_caption(jax.random.key(seed), ids, mask)
    drawn.add(int(got_ids[0, 0]))
    assert real.tolist() == [1.0, 0.0]
  assert drawn == {0, 4}   # video 0's captions 0 and 2, never its padding


def _config(**kw):
  c = ml_collections.ConfigDict(dict(
      task=dict(name='retrieval', zero_shot=dict(templates=('a video of {}.',))),
      dataset=dict(name='dmvr', captions=2), optimizer=dict(accumulation_steps=1),
      model=dict(text=dict(max_length=8))))
  c.update_from_flattened_dict(kw)
  return c


def test_the_config_checks_name_each_field():
  assert registry.check_options(_config()) == []
  bad = _config(**{'dataset.captions': 0, 'dataset.name': 'tfds', 'optimizer.accumulation_steps': 2})
  got = registry.check_options(bad)
  assert [line.split(' ')[0].split('=')[0] for line in got] == [
      'dataset.captions', 'dataset.name', 'optimizer.accumulation_steps']
  zs = _config(**{'task.name': 'zero_shot', 'task.zero_shot.templates': ('no slot',)})
  zs.model.text = None
  assert video_text_options.check_zero_shot(zs) == [
      'task.zero_shot.templates[0] must hold "{}" exactly once (where the class name goes), got \'no slot\'',
      "task.name='zero_shot' needs a video-text model: model.text (its text tower, vvt/models/text_config.py), "
      'e.g. a converted VideoPrism or Perception Encoder video-text folder']
