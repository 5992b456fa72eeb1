"""Non-square frames, image_size = (H, W): converted weights retargeted to 48 x 40 against transformers run on the
same pixels (ViViT with `interpolate_pos_encoding=True`, VideoMAE built for (48, 40): its sine-cosine table is
recomputed), and a transformers ViViT built non-square converted as it is."""
import numpy as np
import pytest

from vvt.convert import video

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

from tests.convert.hf_encoders import max_diff  # noqa: E402  (after torch)
from tests.convert.hf_encoders import torch_video  # noqa: E402  (after torch)
from tests.convert.test_hf_parity import _randomise  # noqa: E402  (after torch)
from tests.convert.test_hf_parity import _state  # noqa: E402  (after torch)
from tests.convert.test_hf_parity import _vvt_logits  # noqa: E402  (after torch)

ATOL = 1e-5  # logits (|logits| of a few units)
SIZE = (48, 40)  # (H, W)


def _clip(frames, size=SIZE, seed=0):
  return np.random.default_rng(seed).standard_normal((2, frames, *size, 3)).astype(np.float32)


def _hf(model, x, **kwargs):
  """(logits, last hidden state (B, L, D)) of a transformers video classifier."""
  with torch.no_grad():
    out = model(torch_video(x), output_hidden_states=True, **kwargs)
  return out.logits.numpy(), out.hidden_states[-1].numpy()


def _vivit(size, frames=2):
  cfg = transformers.VivitConfig(image_size=size, num_frames=frames, tubelet_size=[2, 8, 8], hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=5)
  return _randomise(transformers.VivitForVideoClassification(cfg).eval()), cfg


def test_vivit_retargeted_to_48x40_is_transformers_interpolate_pos_encoding():
  """32 px ViViT weights (one temporal index: transformers reads its table as one square patch grid) run at
  48 x 40: the 4 x 4 grid resized to 6 x 5 by torch bicubic, as `interpolate_pos_encoding` does."""
  model, cfg = _vivit(32)
  conv = video.convert_state('hf_vivit', _state(model), hf_config=cfg.to_dict(), image_size=SIZE)
  assert conv.model_fields['image_size'] == SIZE
  assert conv.report.notes == ['clip 2 frames of 32px -> 2 frames of 48x40px: 1 position table(s) resized']
  x = _clip(2)
  logits, hidden = _hf(model, x, interpolate_pos_encoding=True)
  got_logits = _vvt_logits(conv, x)
  assert max_diff(got_logits, logits) < ATOL
  features = _vvt_hidden(conv, x)
  assert features.shape == hidden.shape == (2, 1 + 6 * 5, 32)
  assert _relative_diff(features, hidden) < ATOL


def _relative_diff(got, want) -> float:
  """The largest difference over the largest |value|: the residual stream before the final LayerNorm grows to
  tens, where float32's last bits alone are ~1e-6 of it."""
  return max_diff(got, want) / max(1.0, float(np.abs(want).max()))


def _vvt_hidden(conv, x):
  """The [class token and] patch tokens of vvt's last block, before the final LayerNorm: (B, [1 +] T * N, D)."""
  import jax

  import vvt.models
  module = vvt.models.build(conv.model_config())
  last = f'block_{conv.model_fields["num_layers"] - 1}'
  _, state = jax.jit(lambda v: module.apply({'params': conv.params}, v, mutable=['intermediates'],
                                            capture_intermediates=lambda m, _: m.name == last))(x)
  block = state['intermediates']['encoder']['layers'][last]
  out = block['__call__'][0]
  tokens, cls = out if isinstance(out, tuple) else (out, None)  # (B, T, N, D), (B, 1, D) or None
  parts = [np.asarray(p).reshape(tokens.shape[0], -1, tokens.shape[-1]) for p in (cls, tokens) if p is not None]
  return np.concatenate(parts, axis=1)


def test_vivit_built_non_square_converts_as_it_is():
  """transformers' ViViT built for (48, 40) frames: its config's pair is read, nothing is resized."""
  model, cfg = _vivit(list(SIZE), frames=4)
  conv = video.convert_state('hf_vivit', _state(model), hf_config=cfg.to_dict())
  assert conv.model_fields['image_size'] == SIZE and conv.report.notes == []
  x = _clip(4, seed=1)
  assert max_diff(_vvt_logits(conv, x), _hf(model, x)[0]) < ATOL


def _videomae(size):
  cfg = transformers.VideoMAEConfig(image_size=size, patch_size=8, num_frames=4, tubelet_size=2, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=3,
                                    use_mean_pooling=True)
  return transformers.VideoMAEForVideoClassification(cfg).eval(), cfg


def test_videomae_retargeted_to_48x40_is_transformers_built_for_it():
  """32 px VideoMAE weights at 48 x 40: transformers has no interpolation for its fixed sine-cosine table, it is
  built for the new patch count; vvt recomputes it over the 2 x 6 x 5 tokens alike."""
  small, cfg = _videomae(32)
  _randomise(small)
  conv = video.convert_state('hf_videomae', _state(small), hf_config=cfg.to_dict(), image_size=SIZE)
  assert conv.report.notes == ['clip 4 frames of 32px -> 4 frames of 48x40px: no position table to resize']
  big, _ = _videomae(list(SIZE))
  big.load_state_dict(small.state_dict())
  x = _clip(4, seed=2)
  logits, hidden = _hf(big, x)
  got_logits = _vvt_logits(conv, x)
  assert max_diff(got_logits, logits) < ATOL
  assert _relative_diff(_vvt_hidden(conv, x), hidden) < ATOL


def test_a_size_the_patch_does_not_divide_is_refused_naming_it():
  model, cfg = _vivit(32)
  with pytest.raises(ValueError, match=r'^image_size=\(48, 41\) is not a multiple of the tubelet \(2, 8, 8\)'):
    video.convert_state('hf_vivit', _state(model), hf_config=cfg.to_dict(), image_size=(48, 41))


def test_export_writes_the_pair_transformers_reads(tmp_path):
  """A 48 x 40 conversion exported back (vvt -> transformers): config image_size [48, 40], the same logits."""
  from vvt.convert import hf_export
  import vvt.models
  model, cfg = _vivit(32)
  conv = video.convert_state('hf_vivit', _state(model), hf_config=cfg.to_dict(), image_size=SIZE)
  hf_export.write(conv.params, vvt.models.resolve(conv.model_config()), str(tmp_path))
  back = transformers.VivitForVideoClassification.from_pretrained(str(tmp_path)).eval()
  assert list(back.config.image_size) == list(SIZE)
  x = _clip(2, seed=3)
  assert max_diff(_hf(back, x)[0], _vvt_logits(conv, x)) < ATOL


def test_convert_cli_takes_h_w_and_refuses_what_is_no_size(tmp_path, capsys):
  """`vvt convert --image-size 48,40` with a run config: config.json holds [48, 40] everywhere and resize fields
  that fit the crop; the checkpoint loads back at 32 px (its 6 x 5 grid resized to 4 x 4). A bad size: exit 2."""
  import json
  import pathlib

  from vvt.cli import main as vvt_main
  from vvt.train import clip_resize
  repo = pathlib.Path(__file__).resolve().parents[2]
  model, cfg = _vivit(32, frames=8)
  model.save_pretrained(str(tmp_path / 'hf'))
  config = f'{repo / "tests" / "train" / "tiny_config.py"}:{tmp_path / "none"},joint'
  args = ['convert', '--source', 'hf_vivit', '--checkpoint', str(tmp_path / 'hf'), '--config', config,
          '--output', str(tmp_path / 'out'), '--config.num_classes=5']
  assert vvt_main([*args, '--image-size', '48,40']) == 0
  assert '[convert] 8 frames of 48x40px, 5 classes' in capsys.readouterr().out
  run = json.loads((tmp_path / 'out' / 'config.json').read_text())
  assert run['image_size'] == run['model']['image_size'] == run['dataset']['image_size'] == [48, 40]
  assert min(run['dataset'][f] for f in ('train_min_resize', 'train_max_resize', 'eval_resize')) >= 48
  direct = video.convert_state('hf_vivit', _state(model), hf_config=cfg.to_dict())
  logged = []
  params, _ = clip_resize.load_eval_params(str(tmp_path / 'out'), 0, None, direct.model_config(), log=logged.append)
  assert 'checkpoint written for 8 frames of 48x40px, run at 8 frames of 32px' in logged[0]
  assert params['encoder']['posembed']['pos_embedding'].shape == (1, 1 + 4 * 4 * 4, 32)
  assert vvt_main([*args, '--output', str(tmp_path / 'refused'), '--image-size', '48x']) == 2
  assert "--image-size must be a positive int S (square frames) or H,W (e.g. 48,40), got '48x'" in (
      capsys.readouterr().err)
  assert not (tmp_path / 'refused').exists()
