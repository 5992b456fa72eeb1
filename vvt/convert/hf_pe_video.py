"""Hugging Face `PeVideoModel` (Perception Encoder video, transformers 5.23) <-> vvt's `PeVideoText`
(vvt/models/pe_video_text.py), both ways: the frame-level video encoder, the ModernBERT text tower, both
contrastive heads and the logit scale and bias.

  video_encoder.embedder.{proj, data_proj}                -> temporal/{proj, data_proj}
  video_encoder.patch_embedder.class_embedding            -> temporal/class_embedding
  video_encoder.patch_embedder.resnet_block.block{n}      -> temporal/block{n}: groupnorm -> norm_scale, norm_bias;
                                                              project (Conv1d (out, in, 3)) -> conv (3, in, out)
  video_encoder.layers.i                                  -> temporal/layer_i (self_attn/{q,k,v,o}_proj, q_norm,
                                                              k_norm; gate_proj, up_proj, down_proj; the two norms)
  video_encoder.{norm, output}, video_head                -> temporal/{norm, output}, video_head
  text_model.embeddings.{tok_embeddings, norm}            -> text/{tok_embeddings, embeddings_norm}
  text_model.layers.i.{attn_norm, attn.Wqkv, attn.Wo, mlp_norm, mlp.Wi, mlp.Wo}
                                                          -> text/layer_i/{attn_norm, Wqkv, attn_Wo, mlp_norm, Wi,
                                                              mlp_Wo}
  text_model.final_norm, text_video_head                  -> text/final_norm, text_head
  text_video_logit_scale, text_video_logit_bias (1,)      -> logit_scale, logit_bias ()

torch Linear weights (out, in) become Dense kernels (in, out) and back, every tensor bit-identical both ways.
The frame model, `video_encoder.embedder.vision_model.*` (timm's PE core ViT in a released checkpoint), is not part
of this mapping: `FRAME_MODEL` names its keys, which `params_of` leaves to the caller.

`read_folder(folder)` reads a `save_pretrained` folder: its config.json, then its safetensors with vvt's own
reader (no code from the file runs; a PyTorch pickle is refused). `read_config` refuses, in one line naming
hf_config.FIELD, what these modules cannot express: another model_type, a text tower other than ModernBERT, rotary
positions other than 'default', heads that do not divide.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from vvt.convert import hf_folder
from vvt.convert import weight_files
from vvt.models.modernbert import ACTIVATIONS as TEXT_ACTIVATIONS
from vvt.models.modernbert import ModernBertSpec
from vvt.models.pe_temporal import ACTIVATIONS as VIDEO_ACTIVATIONS
from vvt.models.pe_temporal import PeTemporalSpec

HF_CLASS = 'PeVideoModel'
FRAME_MODEL = 'video_encoder.embedder.vision_model.'
# transformers' PeVideoEncoderConfig and ModernBertConfig defaults (absent from a diff-only config.json).
VIDEO_DEFAULTS = dict(hidden_size=1792, intermediate_size=4800, num_hidden_layers=6, num_attention_heads=14,
                      num_key_value_heads=None, head_dim=128, hidden_act='silu', rms_norm_eps=1e-5,
                      rope_parameters=None, attention_bias=False)
TEXT_DEFAULTS = dict(model_type='modernbert', vocab_size=50368, hidden_size=1024, intermediate_size=2624,
                     num_hidden_layers=22, num_attention_heads=16, hidden_activation='gelu', norm_eps=1e-5,
                     norm_bias=False, attention_bias=False, mlp_bias=False, local_attention=128,
                     global_attn_every_n_layers=3, layer_types=None, rope_parameters=None)
VIDEO_THETA = 20000.0  # PeVideoEncoderConfig.default_theta
TEXT_THETAS = {'full_attention': 160000.0, 'sliding_attention': 10000.0}  # ModernBertConfig.default_theta


def _theta(rope: Mapping | None, field: str, default: float) -> float:
  """rope_parameters' rope_theta (default where absent); ValueError naming `field` for a rope_type not 'default'."""
  rope = dict(rope or {})
  kind = rope.get('rope_type', 'default')
  if kind != 'default':
    raise ValueError(f"hf_config.{field}.rope_type={kind!r}: vvt's PE video modules take 'default' rotary positions")
  return float(rope.get('rope_theta', default))


def _heads(cfg: Mapping, field: str, heads: str, divides: str) -> None:
  """ValueError naming hf_config.FIELD.heads where cfg[heads] does not divide cfg[divides]."""
  if not isinstance(cfg[heads], int) or cfg[heads] <= 0 or cfg[divides] % cfg[heads]:
    raise ValueError(f'hf_config.{field}.{heads}={cfg[heads]!r} must be > 0 and divide its {divides}={cfg[divides]}')


def temporal_spec(hf_config: Mapping) -> PeTemporalSpec:
  """The frame-level encoder's spec of a PeVideoConfig dict (its video_config over transformers' defaults)."""
  cfg = {**VIDEO_DEFAULTS, **dict(hf_config.get('video_config') or {})}
  if cfg['num_key_value_heads'] is None:
    cfg['num_key_value_heads'] = cfg['num_attention_heads']
  _heads(cfg, 'video_config', 'num_key_value_heads', 'num_attention_heads')
  if cfg['hidden_act'] not in VIDEO_ACTIVATIONS:
    raise ValueError(f"hf_config.video_config.hidden_act={cfg['hidden_act']!r}: vvt takes "
                     f"{', '.join(VIDEO_ACTIVATIONS)}")
  if cfg['head_dim'] % 2:
    raise ValueError(f"hf_config.video_config.head_dim={cfg['head_dim']} must be even (rotary pairs)")
  return PeTemporalSpec(
      hidden_size=cfg['hidden_size'], intermediate_size=cfg['intermediate_size'],
      num_layers=cfg['num_hidden_layers'], num_heads=cfg['num_attention_heads'],
      num_kv_heads=cfg['num_key_value_heads'], head_dim=cfg['head_dim'],
      rms_norm_eps=float(cfg['rms_norm_eps']), attention_bias=bool(cfg['attention_bias']), hidden_act=cfg['hidden_act'],
      rope_theta=_theta(cfg['rope_parameters'], 'video_config.rope_parameters', VIDEO_THETA))


def text_spec(hf_config: Mapping) -> ModernBertSpec:
  """The ModernBERT spec of a PeVideoConfig dict (its text_config over transformers' defaults)."""
  cfg = {**TEXT_DEFAULTS, **dict(hf_config.get('text_config') or {})}
  if cfg['model_type'] != 'modernbert':
    raise ValueError(f"hf_config.text_config.model_type is {cfg['model_type']!r}, not 'modernbert'")
  _heads(cfg, 'text_config', 'num_attention_heads', 'hidden_size')
  if cfg['hidden_activation'] not in TEXT_ACTIVATIONS:
    raise ValueError(f"hf_config.text_config.hidden_activation={cfg['hidden_activation']!r}: vvt takes "
                     f"{', '.join(TEXT_ACTIVATIONS)}")
  every = cfg['global_attn_every_n_layers']
  types = cfg['layer_types'] or ['sliding_attention' if i % every else 'full_attention'
                                 for i in range(cfg['num_hidden_layers'])]
  if len(types) != cfg['num_hidden_layers'] or set(types) - set(TEXT_THETAS):
    raise ValueError(f"hf_config.text_config.layer_types={types!r}: one of {sorted(TEXT_THETAS)} per layer "
                     f"({cfg['num_hidden_layers']})")
  rope = dict(cfg['rope_parameters'] or {})
  thetas = {kind: _theta(rope.get(kind), f'text_config.rope_parameters.{kind}', TEXT_THETAS[kind])
            for kind in TEXT_THETAS}
  return ModernBertSpec(
      vocab_size=cfg['vocab_size'], hidden_size=cfg['hidden_size'], intermediate_size=cfg['intermediate_size'],
      num_heads=cfg['num_attention_heads'], sliding=tuple(t == 'sliding_attention' for t in types),
      sliding_window=cfg['local_attention'] // 2, global_theta=thetas['full_attention'],
      local_theta=thetas['sliding_attention'], norm_eps=float(cfg['norm_eps']), norm_bias=bool(cfg['norm_bias']),
      attention_bias=bool(cfg['attention_bias']), mlp_bias=bool(cfg['mlp_bias']),
      hidden_activation=cfg['hidden_activation'])


def read_config(hf_config: Mapping) -> tuple[PeTemporalSpec, ModernBertSpec]:
  """(temporal spec, text spec) of a PeVideoModel's config.json dict; ValueError naming hf_config.FIELD."""
  if hf_config.get('model_type') != 'pe_video':
    raise ValueError(f"hf_config.model_type is {hf_config.get('model_type')!r}, not 'pe_video'")
  return temporal_spec(hf_config), text_spec(hf_config)


def _linear(table: list, name: str, key: str, bias: bool) -> None:
  table.append((f'{name}/kernel', f'{key}.weight', 'linear'))
  if bias:
    table.append((f'{name}/bias', f'{key}.bias', 'copy'))


def _norm(table: list, name: str, key: str, bias: bool = True) -> None:
  table.append((f'{name}/scale', f'{key}.weight', 'copy'))
  if bias:
    table.append((f'{name}/bias', f'{key}.bias', 'copy'))


def _temporal_table(spec: PeTemporalSpec) -> list:
  """(flax path, torch key, layout) of the frame-level encoder and the video head."""
  t, key = [], 'video_encoder'
  _linear(t, 'temporal/proj', f'{key}.embedder.proj', False)
  _linear(t, 'temporal/data_proj', f'{key}.embedder.data_proj', True)
  t.append(('temporal/class_embedding', f'{key}.patch_embedder.class_embedding', 'copy'))
  for n in (1, 2):
    block = f'{key}.patch_embedder.resnet_block.block{n}'
    t += [(f'temporal/block{n}/norm_scale', f'{block}.groupnorm.weight', 'copy'),
          (f'temporal/block{n}/norm_bias', f'{block}.groupnorm.bias', 'copy'),
          (f'temporal/block{n}/conv/kernel', f'{block}.project.weight', 'conv'),
          (f'temporal/block{n}/conv/bias', f'{block}.project.bias', 'copy')]
  for i in range(spec.num_layers):
    name, layer = f'temporal/layer_{i}', f'{key}.layers.{i}'
    for proj in ('q_proj', 'k_proj', 'v_proj', 'o_proj'):
      _linear(t, f'{name}/self_attn/{proj}', f'{layer}.self_attn.{proj}', spec.attention_bias)
    for proj in ('gate_proj', 'up_proj', 'down_proj'):
      _linear(t, f'{name}/{proj}', f'{layer}.mlp.{proj}', False)
    t += [(f'{name}/self_attn/{n}/weight', f'{layer}.self_attn.{n}.weight', 'copy') for n in ('q_norm', 'k_norm')]
    t += [(f'{name}/{n}/weight', f'{layer}.{n}.weight', 'copy')
          for n in ('input_layernorm', 'post_attention_layernorm')]
  t.append(('temporal/norm/weight', f'{key}.norm.weight', 'copy'))
  _linear(t, 'temporal/output', f'{key}.output', False)
  _norm(t, 'video_head/layer_norm', 'video_head.layer_norm')
  _linear(t, 'video_head/proj', 'video_head.proj', False)
  return t


def _text_table(spec: ModernBertSpec) -> list:
  """(flax path, torch key, layout) of ModernBERT, the text head, the logit scale and bias."""
  t, key = [('text/tok_embeddings/embedding', 'text_model.embeddings.tok_embeddings.weight', 'copy')], 'text_model'
  _norm(t, 'text/embeddings_norm', f'{key}.embeddings.norm', spec.norm_bias)
  for i in range(len(spec.sliding)):
    name, layer = f'text/layer_{i}', f'{key}.layers.{i}'
    if i:
      _norm(t, f'{name}/attn_norm', f'{layer}.attn_norm', spec.norm_bias)
    _linear(t, f'{name}/Wqkv', f'{layer}.attn.Wqkv', spec.attention_bias)
    _linear(t, f'{name}/attn_Wo', f'{layer}.attn.Wo', spec.attention_bias)
    _norm(t, f'{name}/mlp_norm', f'{layer}.mlp_norm', spec.norm_bias)
    _linear(t, f'{name}/Wi', f'{layer}.mlp.Wi', spec.mlp_bias)
    _linear(t, f'{name}/mlp_Wo', f'{layer}.mlp.Wo', spec.mlp_bias)
  _norm(t, 'text/final_norm', f'{key}.final_norm', spec.norm_bias)
  _norm(t, 'text_head/layer_norm', 'text_video_head.layer_norm')
  _linear(t, 'text_head/proj', 'text_video_head.proj', False)
  return t + [('logit_scale', 'text_video_logit_scale', 'scalar'), ('logit_bias', 'text_video_logit_bias', 'scalar')]


def table(temporal: PeTemporalSpec, text: ModernBertSpec) -> list[tuple[str, str, str]]:
  """Every (flax path, torch key, layout) of the mapping: layout 'copy', 'linear' (transposed), 'conv' ((out, in,
  k) <-> (k, in, out)) or 'scalar' ((1,) <-> ())."""
  return _temporal_table(temporal) + _text_table(text)


def _to_flax(value: np.ndarray, layout: str) -> np.ndarray:
  if layout == 'linear':
    return np.ascontiguousarray(value.T)
  if layout == 'conv':
    return np.ascontiguousarray(value.transpose(2, 1, 0))
  return value.reshape(()) if layout == 'scalar' else value


def _to_torch(value: np.ndarray, layout: str) -> np.ndarray:
  if layout == 'scalar':
    return np.asarray(value).reshape(1)
  return _to_flax(np.asarray(value), layout)  # a transpose is its own inverse; 'conv' reverses its three axes


def params_of(state: Mapping[str, np.ndarray], hf_config: Mapping) -> dict:
  """The PeVideoText params (nested dict of numpy) of a PeVideoModel state dict; ValueError naming a missing key.
  The frame model's keys (FRAME_MODEL...) are not read."""
  import flax.traverse_util
  temporal, text = read_config(hf_config)
  flat = {}
  for path, key, layout in table(temporal, text):
    if key not in state:
      raise ValueError(f'the PeVideoModel weights have no {key}')
    flat[tuple(path.split('/'))] = _to_flax(np.asarray(state[key]), layout)
  return flax.traverse_util.unflatten_dict(flat)


def state_of(params: Mapping, temporal: PeTemporalSpec, text: ModernBertSpec) -> dict[str, np.ndarray]:
  """The inverse of `params_of`: the PeVideoModel state dict (without the frame model) of PeVideoText params."""
  import flax.traverse_util
  flat = flax.traverse_util.flatten_dict(dict(params), sep='/')
  return {key: _to_torch(np.asarray(flat[path]), layout) for path, key, layout in table(temporal, text)}


def read_folder(folder: str) -> tuple[PeTemporalSpec, ModernBertSpec, dict, list[str]]:
  """(temporal spec, text spec, params, the frame model's keys, which are not read) of a PeVideoModel folder. Its
  config.json is checked before any weight is read (`hf_folder.ConfigFileError` naming the file, ValueError naming
  hf_config.FIELD); its weights are model.safetensors (`hf_folder.weights_file` refuses a PyTorch pickle)."""
  config = hf_folder.read_config(folder)
  temporal, text = read_config(config)
  state = weight_files.load_state(hf_folder.weights_file(folder, 'the PeVideoModel reader'))
  frame_model = sorted(key for key in state if key.startswith(FRAME_MODEL))
  return temporal, text, params_of(state, config), frame_model
