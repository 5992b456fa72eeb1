"""`hf_videoprism` of a `VideoPrismClipModel` folder: both towers kept (vvt/convert/hf_videoprism_clip.py), the
folder's own tokenizer read with the `tokenizers` library as transformers' processor pads and truncates
(vvt/data/transforms/tokenizer.py), parity with transformers in float32, and `vvt convert` -> `vvt export --format
hf` back to the same tensors.

The reference is transformers itself: a tiny VideoPrismClipModel with random weights at scales where attention is
far from uniform (tests/convert/hf_encoders.py) and a tiny VideoPrismTokenizer built from a word list here, both
saved with `save_pretrained`; nothing is downloaded."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file
import torch
import transformers

from tests.cli.test_sweep import vvt_in_process
from tests.conftest import REPO
from tests.convert import hf_encoders as H
from vvt.convert import hf_export
from vvt.convert import video
from vvt.data import TokenizerError
from vvt.data import load_tokenizer
import vvt.models

MAX_LENGTH = 8
WORDS = ('a', 'person', 'dog', 'cat', 'juggling', 'running', 'on', 'the', 'beach', 'video', 'of', 'ball', 'red')
TEXTS = ['a person juggling', 'a dog running on the beach with a red ball and a cat', 'Cat', 'video of a zebra']
VISION = dict(image_size=32, num_frames=4, tubelet_size=[1, 16, 16], hidden_size=32, num_attention_heads=2,
              intermediate_size=64, num_spatial_layers=1, num_temporal_layers=1, num_auxiliary_layers=1)
TEXT = dict(vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            max_position_embeddings=MAX_LENGTH)


def tokenizer(folder):
  """A VideoPrismTokenizer (T5's unigram vocabulary layout: <pad> 0, </s> 1, <unk> 2, then pieces) of WORDS."""
  vocab = [('<pad>', 0.0), ('</s>', 0.0), ('<unk>', 0.0), ('▁', -2.0)]
  vocab += [(f'▁{w}', -float(i + 3)) for i, w in enumerate(WORDS)] + [(c, -20.0) for c in 'abcdefghijklmnopqrstuvwxyz']
  tok = transformers.VideoPrismTokenizer(vocab=vocab, extra_ids=0)
  tok.save_pretrained(str(folder))
  return tok


@pytest.fixture(scope='module')
def clip_folder(tmp_path_factory):
  """(transformers model, its folder with the tokenizer's files, transformers' tokenizer)."""
  cfg = transformers.VideoPrismConfig(vision_config=VISION, text_config=TEXT)
  model = H.randomise(transformers.VideoPrismClipModel(cfg), 51, norm_offset=0.0)
  folder = H.save(model, tmp_path_factory.mktemp('videoprism_clip'))
  return model, folder, tokenizer(folder)


def test_the_tokenizer_pads_and_truncates_as_transformers(clip_folder):
  """input_ids and attention_mask of the folder's tokenizer.json equal the processor's (padding='max_length',
  truncation, max_length 8): a text cut at 8 tokens, unknown pieces, no end-of-sequence token."""
  _, folder, hf_tok = clip_folder
  ids, mask = load_tokenizer(str(folder), MAX_LENGTH).encode(TEXTS)
  ref = hf_tok(TEXTS, padding='max_length', truncation=True, max_length=MAX_LENGTH, return_tensors='np')
  np.testing.assert_array_equal(ids, ref['input_ids'])
  np.testing.assert_array_equal(mask, ref['attention_mask'])
  assert ids.dtype == mask.dtype == np.int32 and mask[1].all() and mask[0].sum() == 3
  assert 1 not in ids  # no </s>


def test_tokenizer_refusals(tmp_path, clip_folder):
  _, folder, _ = clip_folder
  with pytest.raises(TokenizerError, match=r'no tokenizer.json \(the tokenizer of a video-text model'):
    load_tokenizer(str(tmp_path), MAX_LENGTH)
  (tmp_path / 'tokenizer.json').write_text('{"version": "1.0", "model": 3}')
  with pytest.raises(TokenizerError, match=r'tokenizer.json: not a tokenizers file'):
    load_tokenizer(str(tmp_path), MAX_LENGTH)
  (tmp_path / 'tokenizer.json').write_text((folder / 'tokenizer.json').read_text())
  (tmp_path / 'tokenizer_config.json').write_text(json.dumps({'pad_token': '<blank>'}))
  with pytest.raises(TokenizerError, match="its pad token '<blank>' is not in its vocabulary"):
    load_tokenizer(str(tmp_path), MAX_LENGTH)


def test_both_towers_and_the_logits_within_1e5(clip_folder):
  """Video embeddings, text embeddings (padded texts) and the logits (their softmax over the videos is
  transformers' logits_per_video) within 1e-5 of transformers in float32; nothing of the file unused."""
  model, folder, _ = clip_folder
  conv = video.convert('hf_videoprism', str(folder))
  assert conv.report.unused == [] and [n for n, _ in conv.report.initialised] == ['logit_scale']
  module = vvt.models.build(conv.model_config())
  x = H.clip(3, 4, 32, seed=3)
  ids, mask = load_tokenizer(str(folder), MAX_LENGTH).encode(TEXTS)
  run = jax.jit(lambda p, v, i, m: module.apply(
      {'params': p}, v, i, m, method=lambda s, v, i, m: (s.encode_video(v), s.encode_text(i, m), s(v, i, m))))
  v, t, logits = run(conv.params, x, ids, mask)
  with torch.no_grad():
    ref = model(pixel_values_videos=H.torch_video(x), input_ids=torch.from_numpy(ids).long(),
                attention_mask=torch.from_numpy(mask).long())
  assert H.max_diff(v, ref.video_embeds) < H.ATOL and H.max_diff(t, ref.text_embeds) < H.ATOL
  assert H.max_diff(jax.nn.softmax(logits, axis=0), ref.logits_per_video) < H.ATOL
  assert np.abs(np.asarray(t)[:, None] - np.asarray(t)[None]).max() > 0.02  # the texts differ


def test_convert_then_export_gives_back_every_tensor(clip_folder, tmp_path, capsys):
  """`vvt convert` writes a video-text checkpoint with the tokenizer's files; `vvt export --format hf` writes a
  VideoPrismClipModel folder whose every tensor is the original's (the position buffers transformers recomputes
  left out), with the tokenizer, that transformers loads and runs to the same embeddings."""
  model, folder, _ = clip_folder
  out, hf = tmp_path / 'converted', tmp_path / 'hf'
  res = vvt_in_process(capsys, 'convert', '--source', 'hf_videoprism', '--checkpoint', str(folder), '--config',
                       str(REPO / 'configs/synthetic_video_text.py'), '--output', str(out))
  assert res.returncode == 0, res.stderr
  assert f'[convert] tokenizer: tokenizer.json, tokenizer_config.json -> {out}' in res.stdout
  assert json.loads((out / 'config.json').read_text())['model']['text']['vocab_size'] == TEXT['vocab_size']
  res = vvt_in_process(capsys, 'export', '--workdir', str(out), '--format', 'hf', '--output', str(hf))
  assert res.returncode == 0, res.stderr
  assert 'VideoPrismClipModel' in res.stdout and (hf / 'tokenizer.json').exists()
  exported, original = load_file(str(hf / 'model.safetensors')), load_file(str(folder / 'model.safetensors'))
  assert set(original) - set(exported) == {'text_model.embeddings.position_embedding',
                                           'text_model.embeddings.position_ids'} and set(exported) <= set(original)
  assert all(np.array_equal(exported[k], original[k]) for k in exported)
  back = transformers.VideoPrismClipModel.from_pretrained(str(hf)).eval()
  x = torch.from_numpy(H.clip(1, 4, 32, seed=4)).permute(0, 1, 4, 2, 3)
  ids = torch.tensor([[5, 6, 7, 0, 0, 0, 0, 0]])
  with torch.no_grad():
    a = model(pixel_values_videos=x, input_ids=ids, attention_mask=(ids > 0).long())
    b = back(pixel_values_videos=x, input_ids=ids, attention_mask=(ids > 0).long())
  assert torch.equal(a.video_embeds, b.video_embeds) and torch.equal(a.text_embeds, b.text_embeds)


def test_refusals_name_the_field(clip_folder, tmp_path):
  """A text tower vvt cannot hold, and a trained temperature the transformers class has no place for."""
  _, folder, _ = clip_folder
  cfg = json.loads((folder / 'config.json').read_text())
  for change, message in (
      (dict(hidden_size=48, num_attention_heads=2), 'hf_config.text_config.hidden_size=48 but vision_config.'
                                                    'hidden_size=32'),
      (dict(hidden_act='tanh'), "hf_config.text_config.hidden_act='tanh': vvt's text tower takes relu"),
      (dict(num_hidden_layers=1), 'hf_config.text_config.num_hidden_layers=1 but the checkpoint also has layers [1]')):
    sub = tmp_path / str(len(message))
    sub.mkdir()
    path = H.folder_with_config(folder, sub, {'text_config': {**cfg['text_config'], **change}})
    assert message in H.refusal('hf_videoprism', path)
  conv = video.convert('hf_videoprism', str(folder))
  params = {**conv.params, 'logit_scale': jnp.float32(0.5)}
  with pytest.raises(ValueError, match='the learned logit_scale is 0.5: VideoPrismClipModel has no temperature'):
    hf_export.to_hf(params, conv.model_config())
