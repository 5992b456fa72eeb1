"""Hugging Face `PeVideoModel` (Perception Encoder video, transformers 5.23) <-> vvt's `PeVideoText`
(vvt/models/pe_video_text.py), both ways: the frame model (timm's PE core ViT), the frame-level video encoder, the
ModernBERT text tower, both contrastive heads and the logit scale and bias.

  video_encoder.embedder.vision_model.timm_model.*        -> frame/... (timm's names: patch_embed.proj (D, 3, p, p)
                                                              -> patch_embed (p, p, 3, D); cls_token, pos_embed,
                                                              norm_pre, blocks.i -> block_i (norm1, attn.qkv,
                                                              attn.proj, norm2, mlp.fc1, mlp.fc2, gamma_1, gamma_2),
                                                              norm, attn_pool (latent, q, kv, proj, norm, mlp), head)

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

The frame model's shape is its `vision_config`: a `timm_wrapper` config whose `architecture` is one of timm's
`vit_pe_core_*` (their `Eva` arguments in `PE_CORE`, read from timm 1.0.31 `timm/models/eva.py`, the
`vit_pe_core_*` functions and their `_pe_cfg` input sizes), `model_args` overriding them (transformers passes them
to `timm.create_model`, `modeling_timm_wrapper.py`), `num_classes` the head's width.

`convert_for(state, ask)` is `vvt convert --source hf_pe_video` (the model config of family 'pe_video',
`model_fields`; vvt/models/pe_video_config.py), `to_hf(params, model_cfg)` `vvt export --format hf` of it;
`hf_of_specs` the same from the three specs.

`read_folder(folder)` reads a `save_pretrained` folder: its config.json, then its safetensors with vvt's own
reader (no code from the file runs; a PyTorch pickle is refused). `read_config` refuses, in one line naming
hf_config.FIELD, what these modules cannot express: another model_type, a frame model that is not a PE core ViT or
a model_args key vvt does not read, a text tower other than ModernBERT, rotary positions other than 'default',
heads that do not divide.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import hf_folder
from vvt.convert import torch_layout
from vvt.convert import weight_files
from vvt.models import pe_video_config
from vvt.models.modernbert import ACTIVATIONS as TEXT_ACTIVATIONS
from vvt.models.modernbert import ModernBertSpec
from vvt.models.pe_frame import PeFrameSpec
from vvt.models.pe_temporal import ACTIVATIONS as VIDEO_ACTIVATIONS
from vvt.models.pe_temporal import PeTemporalSpec

HF_CLASS = 'PeVideoModel'
FRAME_MODEL = 'video_encoder.embedder.vision_model.timm_model'
# timm 1.0.31 eva.py: the Eva arguments of each vit_pe_core_* (and its _pe_cfg input size) that differ among them;
# all: mlp_ratio 4 (gigantic 8960 / 1536), attn_pool_num_heads 8, attn_pool_mlp_ratio 4, rope_grid_indexing 'xy',
# LayerNorm eps 1e-5, no layer scale.
_PE = dict(mlp_ratio=4.0, class_token=True, rope_grid_offset=1.0, rope_grid_indexing='xy', rope_temperature=10000.0,
           attn_pool_num_heads=8, attn_pool_mlp_ratio=4.0, init_values=None)
PE_CORE = {
    'vit_pe_core_tiny_patch16_384': dict(_PE, img_size=384, patch_size=16, embed_dim=192, depth=12, num_heads=3,
                                         ref_feat_shape=(24, 24)),
    'vit_pe_core_small_patch16_384': dict(_PE, img_size=384, patch_size=16, embed_dim=384, depth=12, num_heads=6,
                                          ref_feat_shape=(24, 24)),
    'vit_pe_core_base_patch16_224': dict(_PE, img_size=224, patch_size=16, embed_dim=768, depth=12, num_heads=12,
                                         ref_feat_shape=(14, 14)),
    'vit_pe_core_large_patch14_336': dict(_PE, img_size=336, patch_size=14, embed_dim=1024, depth=24, num_heads=16,
                                          ref_feat_shape=(24, 24)),
    'vit_pe_core_gigantic_patch14_448': dict(_PE, img_size=448, patch_size=14, embed_dim=1536, depth=50, num_heads=16,
                                             mlp_ratio=8960 / 1536, class_token=False, rope_grid_offset=0.0,
                                             ref_feat_shape=(32, 32)),
}
# model_args that change nothing at inference, or that vvt's frame model has only at this value.
INERT_ARGS = ('drop_rate', 'pos_drop_rate', 'proj_drop_rate', 'attn_drop_rate', 'drop_path_rate', 'patch_drop_rate')
FIXED_ARGS = dict(in_chans=3, global_pool='map', attn_type='rope', use_rot_pos_emb=True, use_abs_pos_emb=True,
                  use_pre_transformer_norm=True, qkv_bias=True, qkv_fused=True, rope_type='cat', num_reg_tokens=0,
                  dynamic_img_size=False, no_embed_class=False, qk_norm=False, swiglu_mlp=False, scale_mlp=False,
                  scale_attn_inner=False, use_post_norm=False, rope_rotate_half=False)
# PeVideoEncoderConfig's vision_config defaults (configuration_pe_video.py).
VISION_DEFAULTS = dict(architecture='vit_pe_core_large_patch14_336', num_classes=1024, model_args=None)
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


def _pair(value, field: str) -> tuple[int, int]:
  pair = (value, value) if isinstance(value, int) else tuple(value) if isinstance(value, (list, tuple)) else ()
  if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in pair):
    raise ValueError(f'hf_config.{field}={value!r} must be an int > 0 or a pair of them')
  return pair


def _frame_args(vision: Mapping) -> dict:
  """The Eva arguments of a vision_config: its architecture's, model_args over them; ValueError naming the field."""
  field = 'hf_config.video_config.vision_config'
  if vision['architecture'] not in PE_CORE:
    raise ValueError(f"{field}.architecture={vision['architecture']!r}: vvt's frame model is timm's PE core ViT, "
                     f"one of {', '.join(PE_CORE)}")
  args = dict(PE_CORE[vision['architecture']])
  for key, value in dict(vision.get('model_args') or {}).items():
    if key in args or key in INERT_ARGS or (key in FIXED_ARGS and value == FIXED_ARGS[key]):
      args[key] = value
    else:
      fixed = f' (vvt takes {FIXED_ARGS[key]!r} only)' if key in FIXED_ARGS else ''
      raise ValueError(f"{field}.model_args.{key}={value!r}: vvt's PE frame model does not take it{fixed}")
  if args['rope_grid_indexing'] not in ('xy', 'ij'):
    raise ValueError(f"{field}.model_args.rope_grid_indexing={args['rope_grid_indexing']!r} must be 'xy' or 'ij'")
  if not isinstance(args['class_token'], bool):
    raise ValueError(f"{field}.model_args.class_token={args['class_token']!r} must be true or false")
  for key in ('mlp_ratio', 'attn_pool_mlp_ratio', 'rope_temperature', 'rope_grid_offset', 'init_values'):
    value, positive = args[key], key in ('mlp_ratio', 'attn_pool_mlp_ratio', 'rope_temperature')
    if key == 'init_values' and value is None:
      continue
    if not isinstance(value, (int, float)) or isinstance(value, bool) or (positive and value <= 0):
      raise ValueError(f"{field}.model_args.{key}={value!r} must be a number{' > 0' if positive else ''}")
  return args


def frame_spec(hf_config: Mapping) -> PeFrameSpec:
  """The frame model's spec of a PeVideoConfig dict (video_config.vision_config; see the module docstring)."""
  vision = {**VISION_DEFAULTS, **dict(dict(hf_config.get('video_config') or {}).get('vision_config') or {})}
  a, field = _frame_args(vision), 'video_config.vision_config.model_args'
  for name in ('patch_size', 'embed_dim', 'depth', 'num_heads', 'attn_pool_num_heads'):
    if not isinstance(a[name], int) or isinstance(a[name], bool) or a[name] <= 0:
      raise ValueError(f'hf_config.{field}.{name}={a[name]!r} must be an int > 0')
  if a['embed_dim'] % (4 * a['num_heads']):
    raise ValueError(f"hf_config.{field}.num_heads={a['num_heads']}: embed_dim={a['embed_dim']} must be 4 x heads x "
                     'an int (2-D RoPE turns two pairs per band)')
  if a['embed_dim'] % a['attn_pool_num_heads']:
    raise ValueError(f"hf_config.{field}.attn_pool_num_heads={a['attn_pool_num_heads']} must divide "
                     f"embed_dim={a['embed_dim']}")
  classes = vision['num_classes']
  if not isinstance(classes, int) or isinstance(classes, bool) or classes <= 0:
    raise ValueError(f'hf_config.video_config.vision_config.num_classes={classes!r} must be an int > 0')
  ref = a['ref_feat_shape']
  return PeFrameSpec(
      image_size=_pair(a['img_size'], f'{field}.img_size'), patch_size=a['patch_size'], embed_dim=a['embed_dim'],
      depth=a['depth'], num_heads=a['num_heads'], mlp_dim=int(a['embed_dim'] * a['mlp_ratio']), num_classes=classes,
      pool_heads=a['attn_pool_num_heads'], pool_mlp_dim=int(a['embed_dim'] * a['attn_pool_mlp_ratio']),
      class_token=bool(a['class_token']), ref_grid=None if ref is None else _pair(ref, f'{field}.ref_feat_shape'),
      rope_offset=float(a['rope_grid_offset']), rope_xy=a['rope_grid_indexing'] == 'xy',
      rope_temperature=float(a['rope_temperature']), layer_scale=a['init_values'] is not None)


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


def read_config(hf_config: Mapping) -> tuple[PeFrameSpec, PeTemporalSpec, ModernBertSpec]:
  """(frame spec, temporal spec, text spec) of a PeVideoModel's config.json dict; ValueError naming
  hf_config.FIELD."""
  if hf_config.get('model_type') != 'pe_video':
    raise ValueError(f"hf_config.model_type is {hf_config.get('model_type')!r}, not 'pe_video'")
  return frame_spec(hf_config), temporal_spec(hf_config), text_spec(hf_config)


def _linear(table: list, name: str, key: str, bias: bool) -> None:
  table.append((f'{name}/kernel', f'{key}.weight', 'linear'))
  if bias:
    table.append((f'{name}/bias', f'{key}.bias', 'copy'))


def _norm(table: list, name: str, key: str, bias: bool = True) -> None:
  table.append((f'{name}/scale', f'{key}.weight', 'copy'))
  if bias:
    table.append((f'{name}/bias', f'{key}.bias', 'copy'))


def _frame_table(spec: PeFrameSpec) -> list:
  """(flax path, torch key, layout) of the frame model."""
  t, key = [('frame/patch_embed/kernel', f'{FRAME_MODEL}.patch_embed.proj.weight', 'conv2d'),
            ('frame/pos_embed', f'{FRAME_MODEL}.pos_embed', 'copy')], FRAME_MODEL
  if spec.class_token:
    t.append(('frame/cls_token', f'{key}.cls_token', 'copy'))
  _norm(t, 'frame/norm_pre', f'{key}.norm_pre')
  for i in range(spec.depth):
    name, block = f'frame/block_{i}', f'{key}.blocks.{i}'
    for n in ('norm1', 'norm2'):
      _norm(t, f'{name}/{n}', f'{block}.{n}')
    for n in ('attn.qkv', 'attn.proj', 'mlp.fc1', 'mlp.fc2'):
      _linear(t, f'{name}/{n.replace(".", "/")}', f'{block}.{n}', True)
    if spec.layer_scale:
      t += [(f'{name}/{g}', f'{block}.{g}', 'copy') for g in ('gamma_1', 'gamma_2')]
  _norm(t, 'frame/norm', f'{key}.norm')
  t.append(('frame/attn_pool/latent', f'{key}.attn_pool.latent', 'copy'))
  for n in ('q', 'kv', 'proj', 'mlp.fc1', 'mlp.fc2'):
    _linear(t, f'frame/attn_pool/{n.replace(".", "/")}', f'{key}.attn_pool.{n}', True)
  _norm(t, 'frame/attn_pool/norm', f'{key}.attn_pool.norm')
  _linear(t, 'frame/head', f'{key}.head', True)
  return t


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


def table(frame: PeFrameSpec, temporal: PeTemporalSpec, text: ModernBertSpec) -> list[tuple[str, str, str]]:
  """Every (flax path, torch key, layout) of the mapping: layout 'copy', 'linear' (transposed), 'conv' ((out, in,
  k) <-> (k, in, out)), 'conv2d' ((out, in, kh, kw) <-> (kh, kw, in, out)) or 'scalar' ((1,) <-> ())."""
  return _frame_table(frame) + _temporal_table(temporal) + _text_table(text)


def _to_flax(value: np.ndarray, layout: str) -> np.ndarray:
  if layout == 'linear':
    return np.ascontiguousarray(value.T)
  if layout == 'conv':
    return np.ascontiguousarray(value.transpose(2, 1, 0))
  if layout == 'conv2d':
    return np.ascontiguousarray(value.transpose(2, 3, 1, 0))
  return value.reshape(()) if layout == 'scalar' else value


def _to_torch(value: np.ndarray, layout: str) -> np.ndarray:
  if layout == 'scalar':
    return np.asarray(value).reshape(1)
  if layout == 'conv2d':
    return np.ascontiguousarray(np.asarray(value).transpose(3, 2, 0, 1))
  return _to_flax(np.asarray(value), layout)  # a transpose is its own inverse; 'conv' reverses its three axes


def params_of(state: Mapping[str, np.ndarray], hf_config: Mapping) -> dict:
  """The PeVideoText params (nested dict of numpy) of a PeVideoModel state dict; ValueError naming a missing key, a
  key the mapping does not read, or a frame head whose width is not the config's num_classes."""
  import flax.traverse_util
  specs = read_config(hf_config)
  rows = table(*specs)
  missing = next((key for _, key, _ in rows if key not in state), None)
  if missing is not None:
    raise ValueError(f'the PeVideoModel weights have no {missing}')
  extra = sorted(set(state) - {key for _, key, _ in rows})
  if extra:
    raise ValueError(f"the PeVideoModel weights have {len(extra)} tensor(s) vvt's PE video model does not read: "
                     f"{', '.join(extra[:3])}{' ...' if len(extra) > 3 else ''}")
  head = np.shape(state[f'{FRAME_MODEL}.head.weight'])
  if head[0] != specs[0].num_classes:
    raise ValueError(f'hf_config.video_config.vision_config.num_classes={specs[0].num_classes} but the frame '
                     f"model's head ({FRAME_MODEL}.head.weight) is {head}")
  flat = {tuple(path.split('/')): _to_flax(np.asarray(state[key]), layout) for path, key, layout in rows}
  return flax.traverse_util.unflatten_dict(flat)


def state_of(params: Mapping, frame: PeFrameSpec, temporal: PeTemporalSpec,
             text: ModernBertSpec) -> dict[str, np.ndarray]:
  """The inverse of `params_of`: the PeVideoModel state dict of PeVideoText params."""
  import flax.traverse_util
  flat = flax.traverse_util.flatten_dict(dict(params), sep='/')
  return {key: _to_torch(np.asarray(flat[path]), layout) for path, key, layout in table(frame, temporal, text)}


def read_folder(folder: str) -> tuple[PeFrameSpec, PeTemporalSpec, ModernBertSpec, dict]:
  """(frame spec, temporal spec, text spec, params) of a PeVideoModel folder. Its config.json is checked before any
  weight is read (`hf_folder.ConfigFileError` naming the file, ValueError naming hf_config.FIELD); its weights are
  model.safetensors (`hf_folder.weights_file` refuses a PyTorch pickle)."""
  config = hf_folder.read_config(folder)
  specs = read_config(config)
  state = weight_files.load_state(hf_folder.weights_file(folder, 'the PeVideoModel reader'))
  return (*specs, params_of(state, config))


# ------------------------------------------------------------------------------------------ vvt -> HF

TOKEN_IDS = pe_video_config.TOKEN_IDS


def token_ids(hf_config: Mapping) -> dict:
  """The special token ids of a PeVideoConfig's text_config (None where absent): the export writes them back
  (ModernBERT's forward does not read them; its embedding table's padding row does at build time)."""
  text = dict(hf_config.get('text_config') or {})
  return {name: text.get(name) for name in TOKEN_IDS}


def _mlp_ratio(width: int, dim: int, ratio: float) -> float:
  """A ratio r with int(dim * r) == width (timm's rounding): `ratio` where it gives it, else width / dim (nudged)."""
  for r in (ratio, width / dim, (width + 0.5) / dim):
    if int(dim * r) == width:
      return r
  raise ValueError(f'no mlp_ratio of dim {dim} gives width {width}')  # unreachable: (width + 0.5) / dim does


def vision_config(frame: PeFrameSpec) -> dict:
  """The vision_config (TimmWrapperConfig dict) of a frame spec: the PE core architecture of its patch size and
  width where one has it (else the large one), `model_args` for every Eva argument that differs from it."""
  arch = next((a for a, v in PE_CORE.items() if (v['patch_size'], v['embed_dim']) == (frame.patch_size,
                                                                                      frame.embed_dim)),
              'vit_pe_core_large_patch14_336')
  base = PE_CORE[arch]
  ref = None if frame.ref_grid is None else list(frame.ref_grid)
  want = dict(img_size=list(frame.image_size), patch_size=frame.patch_size, embed_dim=frame.embed_dim,
              depth=frame.depth, num_heads=frame.num_heads,
              mlp_ratio=_mlp_ratio(frame.mlp_dim, frame.embed_dim, base['mlp_ratio']), class_token=frame.class_token,
              ref_feat_shape=ref, rope_grid_offset=frame.rope_offset,
              rope_grid_indexing='xy' if frame.rope_xy else 'ij', rope_temperature=frame.rope_temperature,
              attn_pool_num_heads=frame.pool_heads,
              attn_pool_mlp_ratio=_mlp_ratio(frame.pool_mlp_dim, frame.embed_dim, base['attn_pool_mlp_ratio']),
              init_values=1.0 if frame.layer_scale else None)
  same = lambda k, v: (list(base[k]) if isinstance(base[k], tuple) else base[k]) == v or (
      k == 'img_size' and v == [base[k]] * 2)
  args = {k: v for k, v in want.items() if not same(k, v)}
  # id2label as well as num_classes: transformers builds a nested TimmWrapperConfig from the dict as it is (not
  # through its from_dict), so its head's width is len(id2label), 2 without it.
  labels = [f'LABEL_{i}' for i in range(frame.num_classes)]
  return dict(model_type='timm_wrapper', architecture=arch, num_classes=frame.num_classes, label_names=labels,
              id2label=dict(enumerate(labels)), do_pooling=True, global_pool='map', model_args=args or None)


def video_config(frame: PeFrameSpec, temporal: PeTemporalSpec) -> dict:
  """The video_config (PeVideoEncoderConfig dict) of the frame and temporal specs."""
  t = temporal
  return dict(model_type='pe_video_encoder', vision_config=vision_config(frame), hidden_size=t.hidden_size,
              intermediate_size=t.intermediate_size, num_hidden_layers=t.num_layers,
              num_attention_heads=t.num_heads, num_key_value_heads=t.num_kv_heads, head_dim=t.head_dim,
              hidden_act=t.hidden_act, rms_norm_eps=t.rms_norm_eps, attention_bias=t.attention_bias,
              rope_parameters={'rope_type': 'default', 'rope_theta': t.rope_theta})


def text_config(text: ModernBertSpec, ids: Mapping | None = None) -> dict:
  """The text_config (ModernBertConfig dict) of a ModernBERT spec, the special token ids `ids` (`token_ids`; None:
  none)."""
  s = text
  rope = {kind: {'rope_type': 'default', 'rope_theta': theta}
          for kind, theta in (('full_attention', s.global_theta), ('sliding_attention', s.local_theta))}
  return dict(model_type='modernbert', vocab_size=s.vocab_size, hidden_size=s.hidden_size,
              intermediate_size=s.intermediate_size, num_hidden_layers=len(s.sliding),
              num_attention_heads=s.num_heads, hidden_activation=s.hidden_activation, norm_eps=s.norm_eps,
              norm_bias=s.norm_bias, attention_bias=s.attention_bias, mlp_bias=s.mlp_bias,
              local_attention=2 * s.sliding_window,
              layer_types=['sliding_attention' if x else 'full_attention' for x in s.sliding], rope_parameters=rope,
              **{name: (ids or {}).get(name) for name in TOKEN_IDS})


def hf_of_specs(params: Mapping, frame: PeFrameSpec, temporal: PeTemporalSpec, text: ModernBertSpec,
                ids: Mapping | None = None) -> tuple[dict, dict[str, np.ndarray]]:
  """(config.json dict, state dict) of a `PeVideoModel`: the inverse of `read_config` and `params_of`, every tensor
  bit-identical; `ids` the text tower's special token ids (`token_ids` of the config read)."""
  config = dict(model_type='pe_video', architectures=[HF_CLASS], video_config=video_config(frame, temporal),
                text_config=text_config(text, ids))
  return config, state_of(params, frame, temporal, text)


def to_hf(params: Mapping, model_cfg) -> tuple[dict, dict[str, np.ndarray]]:
  """`vvt export --format hf` of a resolved model config of family 'pe_video': (config.json dict, state dict) of a
  `PeVideoModel` from its `model.pe_video` specs (`hf_of_specs`); NotExpressible naming model.family for another."""
  if model_cfg.get('pe_video') is None:
    raise torch_layout.NotExpressible(f"model.family={model_cfg.family!r}: {HF_CLASS} is family 'pe_video'")
  spec = pe_video_config.spec_of(model_cfg.pe_video)
  return hf_of_specs(params, spec.frame, spec.temporal, spec.text, dict(spec.token_ids))


# ------------------------------------------------------------------------------------------ vvt convert

NUM_FRAMES = 8  # the clip length a converted folder records where --num-frames does not say (any runs: rotary time)
TEXT_LENGTH = 64  # model.text.max_length: the tokens a text is padded / truncated to (ModernBERT takes any)


def model_fields(frame: PeFrameSpec, temporal: PeTemporalSpec, text: ModernBertSpec, ids: Mapping,
                 num_frames: int | None = None) -> dict:
  """The vvt model config fields (`vvt.models.get_config(**fields)`) of the three specs: family 'pe_video', its
  `pe_video` section, the embedding width, the frame size and a `text` section of family 'pe_video'
  (vvt/models/pe_video_config.py)."""
  spec = pe_video_config.PeVideoSpec(frame, temporal, text, tuple(dict(ids).items()))
  width = text.hidden_size
  text_fields = dict(family='pe_video', vocab_size=text.vocab_size, hidden_size=width, num_layers=len(text.sliding),
                     num_heads=text.num_heads, mlp_dim=text.intermediate_size, max_length=TEXT_LENGTH,
                     activation='gelu', layer_norm_eps=float(text.norm_eps), attention_logit_cap=None, causal=False,
                     normalize=False, logit_scale=0.0, logit_bias=0.0)
  size = frame.image_size[0] if frame.image_size[0] == frame.image_size[1] else list(frame.image_size)
  return dict(family='pe_video', num_frames=int(num_frames or NUM_FRAMES), image_size=size,
              tubelet=(1, frame.patch_size, frame.patch_size), hidden_size=width, num_layers=temporal.num_layers,
              num_heads=text.num_heads, mlp_dim=text.intermediate_size, num_classes=None, text=text_fields,
              pe_video=pe_video_config.section(spec))


def convert_for(state: Mapping[str, np.ndarray], ask: conversion.Ask) -> conversion.Converted:
  """`vvt convert --source hf_pe_video`: a PeVideoModel state dict and its config.json (ask.hf_config) -> both
  towers' params and the model fields (`model_fields`); ValueError naming hf_config.FIELD (`read_config`), a
  missing or unread tensor (`params_of`), or an --image-size other than the frame model's."""
  config = dict(ask.hf_config or {})
  specs = read_config(config)
  if ask.image_size is not None and tuple(ask.image_size if isinstance(ask.image_size, (list, tuple))
                                          else (ask.image_size,) * 2) != specs[0].image_size:
    raise ValueError(f"image_size={ask.image_size!r}: the PE frame model takes {list(specs[0].image_size)} frames "
                     '(its position table is that grid; hf_config.video_config.vision_config.model_args.img_size)')
  params = params_of(state, config)
  report = conversion.Report(loaded=[(path, key) for path, key, layout in table(*specs) if layout == 'copy'],
                             transformed=[(path, f'{key} ({layout})') for path, key, layout in table(*specs)
                                          if layout != 'copy'])
  return conversion.Converted(params, model_fields(*specs, token_ids(config), ask.num_frames), report)
