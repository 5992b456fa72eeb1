"""The V-JEPA 2 predictor (vvt/models/predictor.py) against transformers' `VJEPA2Predictor`: a tiny random-init
`VJEPA2Model` saved with `save_pretrained`, its predictor read by `hf_vjepa2.read_predictor`, both run on the same
encoder output, context indices and target indices in float32; the predictor written back bit for bit, and with
the encoder as a `VJEPA2Model` folder transformers loads."""
import jax
import numpy as np
import pytest
from safetensors.numpy import load_file
import torch
import transformers

from tests.convert import hf_encoders as H
from vvt.convert import conversion
from vvt.convert import hf_export
from vvt.convert import hf_vjepa2
from vvt.convert import torch_layout
from vvt.convert import video
import vvt.models
from vvt.models import predictor as predictor_lib

# Head size 12 (three rotated parts of 4 channels) and 10 (three parts of 2, 4 channels not rotated); a 4 x 4 grid
# of 2 temporal tokens; two mask tokens (index 1 is transformers' default `mask_index`).
CONFIGS = {
    'a': dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=8, crop_size=32,
              frames_per_clip=4, tubelet_size=2, pred_hidden_size=24, pred_num_hidden_layers=2,
              pred_num_attention_heads=2, pred_num_mask_tokens=2),
    'b': dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, patch_size=8, crop_size=32,
              frames_per_clip=4, tubelet_size=2, pred_hidden_size=20, pred_num_hidden_layers=1,
              pred_num_attention_heads=2, pred_num_mask_tokens=2, pred_mlp_ratio=2.0, qkv_bias=False),
}


@pytest.fixture(scope='module', params=sorted(CONFIGS))
def saved(request, tmp_path_factory):
  model = H.randomise(transformers.VJEPA2Model(transformers.VJEPA2Config(**CONFIGS[request.param])), seed=5)
  return model, H.save(model, tmp_path_factory.mktemp(f'vjepa2_pred_{request.param}'))


def _read(folder):
  state = load_file(str(folder / 'model.safetensors'))
  cfg = hf_vjepa2.read_config(transformers.VJEPA2Config.from_pretrained(str(folder)).to_dict())
  w = conversion.Writer(conversion.Source(state, 'test'))
  fields = hf_vjepa2.read_predictor(w, cfg)
  return state, fields, w.result({}).params['predictor']


def _indices(rng, batch, n):
  """Per clip disjoint sorted context (6,) and target (5,) indices of n tokens."""
  order = np.stack([rng.permutation(n) for _ in range(batch)])
  return np.sort(order[:, :6], axis=1), np.sort(order[:, 6:11], axis=1)


def test_predictor_outputs_agree_with_transformers(saved):
  model, folder = saved
  _, fields, params = _read(folder)
  spec = predictor_lib.PredictorSpec(**fields)
  grid = (2, 4, 4)
  rng = np.random.default_rng(0)
  features = rng.standard_normal((2, 32, 32)).astype(np.float32)
  context, target = _indices(rng, 2, 32)
  with torch.no_grad():
    ref = model.predictor(torch.from_numpy(features), [torch.from_numpy(context)],
                          [torch.from_numpy(target)]).last_hidden_state.numpy()
  gathered = np.take_along_axis(features, context[..., None], axis=1)
  module = predictor_lib.Predictor(spec)
  out = jax.jit(lambda p, c, ci, ti: module.apply({'params': p}, c, ci, ti, grid=grid, index=1))(
      params, gathered, context, target)
  diff = float(np.abs(np.asarray(out) - ref).max())
  print(f'max |predictor diff| {diff:.2g}; outputs up to {np.abs(ref).max():.2f}')
  assert out.shape == ref.shape == (2, 5, 32)
  assert diff < H.ATOL
  assert np.abs(ref[0] - ref[1]).max() > 0.01  # the clips differ: nothing is a no-op


def test_predictor_written_back_bit_for_bit(saved):
  _, folder = saved
  state, fields, params = _read(folder)
  w = torch_layout.TorchState({'predictor': params}, 'VJEPA2Model')
  hf = hf_vjepa2.write_predictor(w, fields)
  written = w.result()
  original = {k: v for k, v in state.items() if k.startswith('predictor.')}
  assert sorted(written) == sorted(original)
  for key, value in original.items():
    np.testing.assert_array_equal(written[key], value, err_msg=key)
  cfg = transformers.VJEPA2Config.from_pretrained(str(folder))
  assert {k: getattr(cfg, k) for k in hf} == pytest.approx(hf)


def test_a_pretraining_model_is_written_as_a_vjepa2_model(saved, tmp_path):
  """A VJEPA2Model's encoder (`convert`) and predictor (`read_predictor`) written back by `write_pretraining`: the
  same tensors bit for bit, a folder transformers loads with no key missing or unexpected."""
  model, folder = saved
  state, _, predictor = _read(folder)
  conv = video.convert('hf_vjepa2', str(folder), vvt.models.get_config('vivit', num_classes=3))  # a new head: unwritten
  out = tmp_path / 'export'
  hf_class, n = hf_export.write_pretraining({**conv.params, 'predictor': predictor}, conv.model_config(), str(out))
  written = load_file(str(out / 'model.safetensors'))
  assert hf_class == 'VJEPA2Model' and n == len(written) == len(state)
  for key, value in state.items():
    np.testing.assert_array_equal(written[key], value, err_msg=key)
  loaded, info = transformers.VJEPA2Model.from_pretrained(str(out), output_loading_info=True)
  assert not any(info.values()), info
  for field in ('pred_hidden_size', 'pred_num_hidden_layers', 'pred_num_attention_heads', 'pred_num_mask_tokens',
                'qkv_bias', 'hidden_size', 'crop_size', 'frames_per_clip'):
    assert getattr(loaded.config, field) == getattr(model.config, field), field
