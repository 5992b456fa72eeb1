"""`vvt export --format hf`: vvt models -> Hugging Face transformers folders that `from_pretrained` loads.

Checked against transformers itself (small models built here, random weights at every scale): HF -> vvt -> HF is
bit-identical in every tensor and equal in the config; vvt models with random weights export to folders whose
logits equal vvt's within 1e-5; what no transformers class expresses is refused in one line naming it, before
anything is written."""
import json

import jax
import ml_collections
import numpy as np
import pytest
from safetensors.numpy import load_file

from tests.conftest import REPO
from tests.convert.test_hf_parity import _hf_logits
from tests.convert.test_hf_parity import _randomise
from vvt.cli import main as vvt_main
from vvt.convert import hf_export
from vvt.convert import torch_layout
from vvt.convert import weight_files
import vvt.models
from vvt.train import checkpoints

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

ATOL = 1e-5
VIDEO = np.random.default_rng(0).standard_normal((2, 4, 16, 16, 3)).astype(np.float32)
TINY = dict(num_frames=4, image_size=16, hidden_size=32, num_layers=2, num_heads=4, mlp_dim=64, num_classes=5)


def _shapes(cfg):
  """The model's params as shapes (traced, never run)."""
  return jax.eval_shape(vvt.models.build(cfg).init, jax.random.PRNGKey(0), VIDEO[:1])['params']


def _random_params(cfg, seed=0):
  """vvt params of `cfg`, every one random: kernels ~ N(0, 1/fan_in), LayerNorm scales 1 + N(0, 0.01), biases
  N(0, 0.01), class token and tables N(0, 0.25)."""
  rng = np.random.default_rng(seed)
  out = {}
  for name, v in weight_files.flatten(_shapes(cfg)).items():
    shape = v.shape
    leaf = name.rsplit('/', 1)[-1]
    if leaf == 'kernel':
      qkv = any(f'/{p}/' in name for p in ('query', 'key', 'value'))
      fan_in = shape[-3] if qkv else int(np.prod(shape[:-1]))  # (D, H, d_h): fan in D (a stacked leaf: [L,] ...)
      value = rng.standard_normal(shape) / np.sqrt(fan_in)
    elif leaf == 'scale':
      value = 1 + 0.1 * rng.standard_normal(shape)
    elif leaf == 'bias':
      value = 0.1 * rng.standard_normal(shape)
    else:
      value = 0.5 * rng.standard_normal(shape)
    out[name] = np.asarray(value, np.float32)
  return weight_files.unflatten(out)


def _zeros(cfg):
  """Params of the model's shapes, all zero (the refusals read no weights)."""
  return jax.tree.map(lambda s: np.zeros(s.shape, np.float32), _shapes(cfg))


def _load(folder):
  """The exported folder through from_pretrained; every tensor of the class loaded, nothing left over."""
  hf_class = json.loads((folder / 'config.json').read_text())['architectures'][0]
  model, info = getattr(transformers, hf_class).from_pretrained(str(folder), output_loading_info=True)
  assert not any(info.values()), info  # missing_keys, unexpected_keys, mismatched_keys, error_msgs
  return model.eval()


# --------------------------------------------------------------------------- HF -> vvt -> HF


HF_MODELS = {
    'timesformer_divided': ('hf_timesformer', 'TimesformerConfig', 'TimesformerForVideoClassification',
                            dict(patch_size=8, num_frames=4)),
    'timesformer_joint': ('hf_timesformer', 'TimesformerConfig', 'TimesformerForVideoClassification',
                          dict(patch_size=8, num_frames=4, attention_type='joint_space_time', hidden_act='gelu_new',
                               qkv_bias=False, layer_norm_eps=1e-5)),
    'vivit': ('hf_vivit', 'VivitConfig', 'VivitForVideoClassification',
              dict(tubelet_size=[2, 8, 8], num_frames=4)),
    'vivit_exact_gelu': ('hf_vivit', 'VivitConfig', 'VivitForVideoClassification',
                         dict(tubelet_size=[1, 4, 4], num_frames=4, hidden_act='gelu', qkv_bias=False)),
    'videomae_mean': ('hf_videomae', 'VideoMAEConfig', 'VideoMAEForVideoClassification',
                      dict(patch_size=8, tubelet_size=2, num_frames=4)),
    'videomae_first_token': ('hf_videomae', 'VideoMAEConfig', 'VideoMAEForVideoClassification',
                             dict(patch_size=4, tubelet_size=2, num_frames=4, use_mean_pooling=False,
                                  layer_norm_eps=1e-6, hidden_act='gelu_new')),
}
LABELS = ('archery', 'bowling', 'cooking', 'dancing', 'eating')


@pytest.mark.parametrize('name', sorted(HF_MODELS))
def test_hf_to_vvt_to_hf_is_bit_identical(name, tmp_path):
  source, config_class, model_class, extra = HF_MODELS[name]
  cfg = getattr(transformers, config_class)(
      image_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
      id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)}, **extra)
  original = _randomise(getattr(transformers, model_class)(cfg).eval())
  original.save_pretrained(tmp_path / 'hf')
  assert vvt_main(['convert', '--source', source, '--checkpoint', str(tmp_path / 'hf'), '--config',
                   str(REPO / 'configs/kinetics400/timesformer_b.py'), '--output', str(tmp_path / 'vvt')]) == 0
  assert vvt_main(['export', '--workdir', str(tmp_path / 'vvt'), '--format', 'hf',
                   '--output', str(tmp_path / 'back')]) == 0

  before, after = load_file(tmp_path / 'hf' / 'model.safetensors'), load_file(tmp_path / 'back' / 'model.safetensors')
  assert sorted(after) == sorted(before)
  for key, value in before.items():
    assert after[key].dtype == value.dtype == np.float32 and after[key].shape == value.shape, key
    np.testing.assert_array_equal(after[key], value, err_msg=key)
  config_before = json.loads((tmp_path / 'hf' / 'config.json').read_text())
  config_after = json.loads((tmp_path / 'back' / 'config.json').read_text())
  config_before.pop('transformers_version')
  assert config_after == config_before  # every field save_pretrained writes, labels included

  exported = _load(tmp_path / 'back')
  np.testing.assert_array_equal(_hf_logits(exported, VIDEO), _hf_logits(original, VIDEO))


# --------------------------------------------------------------------------- vvt -> HF, parity


VVT_MODELS = {  # name -> model fields (over TINY): one of each target, and the field values each one maps
    'divided': dict(family='timesformer', attention='divided', tubelet=(1, 8, 8), key_bias=False),
    'divided_scanned': dict(family='timesformer', attention='divided', tubelet=(1, 4, 4), scan_layers=True,
                            gelu_approximate=True, layer_norm_eps=1e-5),
    'joint_separable': dict(family='vivit', attention='spatiotemporal', tubelet=(1, 8, 8), qkv_bias=False,
                            positional_embedding='separable'),
    'spatiotemporal': dict(family='vivit', attention='spatiotemporal', tubelet=(2, 8, 8), key_bias=False),
    'joint_table': dict(family='timesformer', attention='joint', tubelet=(2, 4, 4), positional_embedding='joint'),
    'videomae_mean': dict(family='vivit', attention='spatiotemporal', tubelet=(2, 8, 8), classifier='gap',
                          positional_embedding='sinusoidal', pooling='mean_then_norm', encoder_norm_eps=1e-5,
                          gelu_approximate=False),
    'videomae_first_token': dict(family='timesformer', attention='joint', tubelet=(2, 4, 4), classifier='gap',
                                 positional_embedding='sinusoidal', pooling='first_token', qkv_bias=False,
                                 dtype='bfloat16', param_dtype='bfloat16'),
}
TSF, VIVIT, MAE = 'TimesformerForVideoClassification', 'VivitForVideoClassification', 'VideoMAEForVideoClassification'
EXPECTED_CLASS = {'divided': TSF, 'divided_scanned': TSF, 'joint_separable': TSF, 'spatiotemporal': VIVIT,
                  'joint_table': VIVIT, 'videomae_mean': MAE, 'videomae_first_token': MAE}


@pytest.mark.parametrize('name', sorted(VVT_MODELS))
def test_vvt_model_exports_with_equal_logits(name, tmp_path):
  cfg = vvt.models.get_config(**{**TINY, **VVT_MODELS[name]})
  params = _random_params(cfg)
  hf_class, n = hf_export.write(params, cfg, str(tmp_path), class_names=LABELS)
  assert hf_class == EXPECTED_CLASS[name]
  model = _load(tmp_path)
  assert model.config.id2label == dict(enumerate(LABELS))
  # vvt's function in float32 (the bfloat16 model's float32 twin: the exported weights are float32)
  f32 = vvt.models.get_config(**{**TINY, **VVT_MODELS[name], 'dtype': 'float32', 'param_dtype': 'float32'})
  ours = np.asarray(jax.jit(vvt.models.build(f32).apply)({'params': params}, VIDEO))
  theirs = _hf_logits(model, VIDEO)
  diff = float(np.abs(ours - theirs).max())
  print(f'{name} -> {hf_class}: {n} tensors, max |logit difference| {diff:.2g}')
  assert np.abs(ours).max() > 0.5 and diff < ATOL  # logits of random weights at every scale, not near zero


def test_a_zero_key_bias_or_none_leaves_attention_unchanged():
  """vvt without a key bias -> a zero one (TimeSformer, ViViT); a vvt key bias is left out (VideoMAE)."""
  cfg = vvt.models.get_config(**{**TINY, **VVT_MODELS['divided']})
  params = _random_params(cfg)
  _, _, state = hf_export.to_hf(params, cfg)
  q, k, v = np.split(state['timesformer.encoder.layer.0.attention.attention.qkv.bias'], 3)
  assert not k.any() and q.any() and v.any()
  cfg = vvt.models.get_config(**{**TINY, **VVT_MODELS['videomae_mean']})
  params = _random_params(cfg)
  assert 'bias' in params['encoder']['layers']['block_0']['joint_attention']['key']
  _, _, state = hf_export.to_hf(params, cfg)
  assert not any('key.bias' in k or 'k_bias' in k for k in state)


# --------------------------------------------------------------------------- refusals

BASE = dict(family='timesformer', attention='divided', tubelet=(1, 8, 8))
REFUSED = [  # (model fields over TINY, what the one line names)
    (dict(family='vivit', attention='factorised_encoder'), "model.attention='factorised_encoder' (ViViT Model 2)"),
    (dict(family='vivit', attention='factorised_self_attention', classifier='gap'),
     "model.attention='factorised_self_attention' (ViViT Model 3)"),
    (dict(family='vivit', attention='factorised_dot_product', classifier='gap'),
     "model.attention='factorised_dot_product' (ViViT Model 4)"),
    (dict(family='timesformer', attention='space'), 'one row of logits per frame'),
    (dict(family='timesformer', attention='local_global', tubelet=(2, 4, 4)), "model.attention='local_global'"),
    (dict(family='timesformer', attention='axial'), "model.attention='axial'"),
    (dict(family='xvit', attention='space_time_mixing'), "model.attention='space_time_mixing' (X-ViT eq. 9-10)"),
    (dict(BASE, tubelet=(2, 8, 8)), 'model.tubelet=(2, 8, 8)'),
    (dict(BASE, classifier='gap'), "model.classifier='gap'"),
    (dict(BASE, positional_embedding='sinusoidal'), "model.positional_embedding='sinusoidal'"),
    (dict(BASE, temporal_projection=False), 'model.temporal_projection=False'),
    (dict(BASE, time_embedding_rows=2), 'model.time_embedding_rows=2'),
    (dict(BASE, encoder_norm_eps=1e-5), 'model.encoder_norm_eps=1e-05'),
    (dict(BASE, representation_size=16), 'model.representation_size=16'),
    (dict(BASE, num_classes={'verb': 3, 'noun': 4}), "model.num_classes={'noun': 4, 'verb': 3}"),
    (dict(family='timesformer', attention='joint', tubelet=(1, 8, 8), class_token='per_frame'),
     "model.class_token='per_frame'"),
    (dict(family='vivit', attention='spatiotemporal', positional_embedding='sinusoidal'),
     "model.positional_embedding='sinusoidal' and model.classifier='token' with model.attention='spatiotemporal'"),
    (dict(family='vivit', attention='spatiotemporal', classifier='gap'),
     "model.classifier='gap' and model.positional_embedding='joint' with model.attention='spatiotemporal'"),
    (dict(family='vivit', attention='spatiotemporal', classifier='gap', positional_embedding='sinusoidal'),
     "model.pooling='mean'"),
    (dict(family='vivit', attention='spatiotemporal', classifier='gap', positional_embedding='sinusoidal',
          pooling='mean_then_norm'), 'model.encoder_norm_eps=1e-06'),
    (dict(family='vivit', attention='spatiotemporal', classifier='gap', positional_embedding='sinusoidal',
          pooling='first_token', encoder_norm_eps=1e-5), 'model.encoder_norm_eps=1e-05'),
    (dict(family='vivit', attention='spatiotemporal', layer_norm_eps=1e-5, encoder_norm_eps=1e-6),
     'model.encoder_norm_eps=1e-06'),
]


@pytest.mark.parametrize('fields,names', REFUSED, ids=[r[1][:40] for r in REFUSED])
def test_what_no_transformers_class_expresses_is_one_line_naming_it(fields, names, tmp_path):
  cfg = vvt.models.get_config(**{**TINY, **fields})
  params = _zeros(cfg)
  with pytest.raises(torch_layout.NotExpressible) as e:
    hf_export.write(params, cfg, str(tmp_path / 'out'))
  message = str(e.value)
  print(message)
  assert names in message and '\n' not in message
  assert not (tmp_path / 'out').exists()


def test_a_field_no_exporter_reads_must_keep_its_default(monkeypatch):
  """A model field added to vvt later is refused until an exporter reads it (stood in for by gelu_approximate)."""
  monkeypatch.setattr(hf_export, 'READ', hf_export.READ - {'gelu_approximate'})
  hf_export.check(vvt.models.get_config(**{**TINY, **BASE}))  # at the family default: nothing to say
  with pytest.raises(torch_layout.NotExpressible, match=r'model.gelu_approximate=True: .* only at its default False'):
    hf_export.check(vvt.models.get_config(**{**TINY, **BASE, 'gelu_approximate': True}))


def test_every_scheme_is_selected_by_at_most_one_target():
  from vvt.models import schemes
  for attention in schemes.SCHEMES:
    for classifier in ('token', 'gap'):
      for pos in ('joint', 'separable', 'spatial', 'sinusoidal', 'none'):
        m = dict(family='vivit', attention=attention, classifier=classifier, positional_embedding=pos)
        assert sum(not t.mismatches(m) for t in hf_export.TARGETS) <= 1, m


def test_cli_refusal_is_exit_2_and_one_line_before_anything_is_written(tmp_path, capsys):
  """The synthetic recipe's divided model (2x8x8 tubelets, sine-cosine table, GAP) has no transformers class."""
  cfg = vvt.models.get_config(**{**TINY, **BASE, 'tubelet': (2, 8, 8)})
  params = _zeros(cfg)
  checkpoints.save_params(str(tmp_path / 'run'), params, step=0,
                          config=json.loads(ml_collections.ConfigDict({'model': cfg}).to_json_best_effort()))
  out = tmp_path / 'hf'
  assert vvt_main(['export', '--workdir', str(tmp_path / 'run'), '--format', 'hf', '--output', str(out)]) == 2
  err = capsys.readouterr().err.strip()
  assert err == ('vvt export: error: cannot export to Hugging Face: model.tubelet=(2, 8, 8): '
                 'TimesformerForVideoClassification embeds single frames in square patches, tubelet (1, p, p)')
  assert not out.exists()
  assert vvt_main(['export', '--import', str(tmp_path / 'w.safetensors'), '--format', 'hf', '--output',
                   str(out)]) == 2
  assert 'vvt convert --source hf_' in capsys.readouterr().err and not out.exists()
