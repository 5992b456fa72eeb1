"""Perception Encoder video's model config (`model.family='pe_video'`, `model.pe_video`): its towers' specs, the
section that holds them in a run config, and its checks. No JAX, no Flax (config checks stay fast).

A converted PeVideoModel (`vvt convert --source hf_pe_video`) is a model config of family 'pe_video' whose
`pe_video` section holds what `PeVideoText` (vvt/models/pe_video_text.py) needs, as plain fields:

  frame      the frame model, timm's PE core ViT (`PeFrameSpec`: image_size, patch_size, embed_dim, depth, num_heads,
             mlp_dim, num_classes, pool_heads, pool_mlp_dim, class_token, ref_grid, rope_offset, rope_xy,
             rope_temperature, layer_scale, norm_eps)
  temporal   the frame-level video encoder (`PeTemporalSpec`)
  text       the ModernBERT text tower (`ModernBertSpec`; `sliding` one bool per layer)
  token_ids  the text tower's special token ids (pad, bos, eos, cls, sep; None where absent), written back by the
             export

The rest of the model config says what the run's data and commands read: `num_frames` (any: the frame-level
encoder has rotary positions), `image_size` (the frame model's, fixed by its position table), `hidden_size` (the
embedding width E, the text tower's), and `text` (a `model.text` section of family 'pe_video': `max_length`, the
tokens a text is padded to; its sizes the ModernBERT's). The video-model fields (attention, variant, tubelet,
positional_embedding, classifier, ...) mean nothing for this family: they are ignored, as the module reads
`model.pe_video` only.

`resolve_pe_video(c)` checks the section of a resolved config (problems, one line each, naming the field).
"""
from __future__ import annotations

import dataclasses

from vvt.models import frame_size

FAMILY = 'pe_video'
FRAME_ACTIVATIONS = ('silu', 'gelu')  # PeTemporalSpec.hidden_act (vvt/models/pe_temporal.py)
TEXT_ACTIVATIONS = ('gelu', 'silu', 'gelu_pytorch_tanh')  # ModernBertSpec.hidden_activation (modernbert.py)
TOKEN_IDS = ('pad_token_id', 'bos_token_id', 'eos_token_id', 'cls_token_id', 'sep_token_id')


@dataclasses.dataclass(frozen=True)
class PeFrameSpec:
  """The shape of a PE core ViT (the `Eva` arguments of a `vit_pe_core_*` architecture and its overrides)."""
  image_size: tuple[int, int]  # (H, W): the position table's grid is (H / p, W / p)
  patch_size: int
  embed_dim: int
  depth: int
  num_heads: int
  mlp_dim: int  # int(embed_dim * mlp_ratio)
  num_classes: int  # the head's width: transformers' num_labels
  pool_heads: int = 8  # attn_pool_num_heads
  pool_mlp_dim: int = 0  # int(embed_dim * attn_pool_mlp_ratio)
  class_token: bool = True
  ref_grid: tuple[int, int] | None = None  # ref_feat_shape (h, w): RoPE positions rescaled onto it
  rope_offset: float = 0.0  # rope_grid_offset
  rope_xy: bool = True  # rope_grid_indexing 'xy': the x (width) bands first; 'ij': the y bands first
  rope_temperature: float = 10000.0
  layer_scale: bool = False  # init_values set: gamma_1, gamma_2 per block
  norm_eps: float = 1e-5

  @property
  def grid(self) -> tuple[int, int]:
    return self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size


@dataclasses.dataclass(frozen=True)
class PeTemporalSpec:
  """The frame-level encoder's shape (transformers' `PeVideoEncoderConfig` without its vision_config)."""
  hidden_size: int
  intermediate_size: int
  num_layers: int
  num_heads: int
  num_kv_heads: int
  head_dim: int
  rms_norm_eps: float = 1e-5
  rope_theta: float = 20000.0
  attention_bias: bool = False
  hidden_act: str = 'silu'


@dataclasses.dataclass(frozen=True)
class ModernBertSpec:
  """The shape of a ModernBERT (transformers' `ModernBertConfig`, its layer pattern spelt out)."""
  vocab_size: int
  hidden_size: int
  intermediate_size: int
  num_heads: int
  sliding: tuple[bool, ...]  # per layer: a sliding-window layer (else global attention)
  sliding_window: int  # half the local window: local_attention // 2
  global_theta: float = 160000.0
  local_theta: float = 10000.0
  norm_eps: float = 1e-5
  norm_bias: bool = False
  attention_bias: bool = False
  mlp_bias: bool = False
  hidden_activation: str = 'gelu'


@dataclasses.dataclass(frozen=True)
class PeVideoSpec:
  """Everything `PeVideoText` is built from: the three towers' specs, the special token ids ((name, id), ...)."""
  frame: PeFrameSpec
  temporal: PeTemporalSpec
  text: ModernBertSpec
  token_ids: tuple[tuple[str, int | None], ...] = ()


SPECS = {'frame': PeFrameSpec, 'temporal': PeTemporalSpec, 'text': ModernBertSpec}
TUPLES = {'image_size', 'ref_grid', 'sliding'}  # fields held as lists in a config, tuples in a spec


def section(spec: PeVideoSpec) -> dict:
  """The `model.pe_video` section (plain dicts, lists for tuples) of a spec."""
  out = {name: {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(getattr(spec, name)).items()}
         for name in SPECS}
  out['token_ids'] = {name: dict(spec.token_ids).get(name) for name in TOKEN_IDS}
  return out


def spec_of(pe) -> PeVideoSpec:
  """The PeVideoSpec of a (checked) `model.pe_video` section (a dict or ConfigDict)."""
  parts = {}
  for name, cls in SPECS.items():
    given = dict(pe[name])
    parts[name] = cls(**{f.name: tuple(given[f.name]) if f.name in TUPLES and given[f.name] is not None
                         else given[f.name] for f in dataclasses.fields(cls) if f.name in given})
  ids = dict(pe.get('token_ids') or {})
  return PeVideoSpec(**parts, token_ids=tuple((name, ids.get(name)) for name in TOKEN_IDS))


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _field_problems(name: str, given: dict) -> list[str]:
  """Unknown, missing and mistyped fields of one part (`frame`, `temporal`, `text`) of the section."""
  cls, where = SPECS[name], f'model.pe_video.{name}'
  fields = {f.name: f for f in dataclasses.fields(cls)}
  p = [f'unknown model config field {where}.{k}' for k in sorted(set(given) - set(fields))]
  for k, f in fields.items():
    if k not in given:
      if f.default is dataclasses.MISSING:
        p.append(f'{where}.{k} is missing')
      continue
    v, kind = given[k], str(f.type)
    ok = (kind.startswith('int') and _is_int(v) and v > 0) or (kind == 'float' and _is_number(v)) or (
        kind == 'bool' and isinstance(v, bool)) or (kind == 'str' and isinstance(v, str))
    if k in TUPLES:
      ok = (v is None and k == 'ref_grid') or (isinstance(v, (list, tuple)) and all(
          (isinstance(x, bool) if k == 'sliding' else _is_int(x) and x > 0) for x in v) and (
              k == 'sliding' and len(v) > 0 or len(v) == 2))
    if k == 'pool_mlp_dim' and _is_int(v) and v >= 0:
      ok = True
    if not ok:
      p.append(f'{where}.{k}={v!r} is not a valid {f.type}')
  return p


def _shape_problems(spec: PeVideoSpec) -> list[str]:
  """What the modules cannot run: heads that do not divide, odd rotary widths, unknown activations."""
  f, t, x, p = spec.frame, spec.temporal, spec.text, []
  if f.embed_dim % (4 * f.num_heads):
    p.append(f'model.pe_video.frame.embed_dim={f.embed_dim} must be 4 x num_heads={f.num_heads} x an int (2-D RoPE)')
  if f.embed_dim % f.pool_heads:
    p.append(f'model.pe_video.frame.pool_heads={f.pool_heads} must divide embed_dim={f.embed_dim}')
  if any(s % f.patch_size for s in f.image_size):
    p.append(f'model.pe_video.frame.image_size={list(f.image_size)} is not a multiple of patch_size={f.patch_size}')
  if t.num_heads % t.num_kv_heads or t.head_dim % 2:
    p.append(f'model.pe_video.temporal: num_kv_heads={t.num_kv_heads} must divide num_heads={t.num_heads} and '
             f'head_dim={t.head_dim} be even')
  if t.hidden_act not in FRAME_ACTIVATIONS:
    p.append(f'model.pe_video.temporal.hidden_act={t.hidden_act!r} must be one of {FRAME_ACTIVATIONS}')
  if x.hidden_size % x.num_heads:
    p.append(f'model.pe_video.text.num_heads={x.num_heads} must divide hidden_size={x.hidden_size}')
  if x.hidden_activation not in TEXT_ACTIVATIONS:
    p.append(f'model.pe_video.text.hidden_activation={x.hidden_activation!r} must be one of {TEXT_ACTIVATIONS}')
  return p


def _section_problems(pe) -> list[str]:
  if not isinstance(pe, dict) or set(pe) - set(SPECS) - {'token_ids'}:
    return [f'model.pe_video must be a section of {sorted(SPECS)} and token_ids, got {pe!r}']
  p = []
  for name in SPECS:
    if not isinstance(pe.get(name), dict):
      p.append(f'model.pe_video.{name} must be a section of its fields, got {pe.get(name)!r}')
    else:
      p += _field_problems(name, pe[name])
  return p


def resolve_pe_video(c) -> list[str]:
  """The problems of a resolved model config's `pe_video` section and of what it must agree with (image_size, the
  text section): one line each; [] when none. A family other than 'pe_video' must leave it None."""
  pe = c.get('pe_video')
  pe = pe.to_dict() if hasattr(pe, 'to_dict') else pe
  if c.family != FAMILY:
    return [] if pe is None else [f"model.pe_video is Perception Encoder video's section: model.family={c.family!r} "
                                  "takes none (set it to None, or model.family='pe_video')"]
  if pe is None:
    return ["model.family='pe_video' needs model.pe_video (its towers' specs: vvt convert --source hf_pe_video "
            'writes them)']
  p = _section_problems(pe)
  if p:
    return p
  spec = spec_of(pe)
  p = _shape_problems(spec)
  if frame_size.parse(c.image_size) != spec.frame.image_size:
    p.append(f'model.image_size={c.image_size!r}: the PE frame model takes {list(spec.frame.image_size)} frames '
             '(its position table is that grid)')
  if c.get('text') is None or c.text.family != FAMILY:
    p.append("model.text must be a section of family 'pe_video' (its max_length: the tokens a text is padded to)")
  else:
    p += _mirror_problems(c, spec.text)
  return p


def _mirror_problems(c, text: ModernBertSpec) -> list[str]:
  """model.hidden_size and the sizes of the `model.text` section must be those of model.pe_video.text (the tower
  the module builds): one line per field that is not."""
  mirrored = (('hidden_size', text.hidden_size), ('vocab_size', text.vocab_size), ('num_layers', len(text.sliding)),
              ('num_heads', text.num_heads), ('mlp_dim', text.intermediate_size))
  p = [f'model.text.{name}={c.text[name]!r} must be model.pe_video.text\'s ({value}): that tower is the one built'
       for name, value in mirrored if c.text[name] != value]
  if c.hidden_size != text.hidden_size:
    p.append(f'model.hidden_size={c.hidden_size} must be the embedding width, model.pe_video.text.hidden_size='
             f'{text.hidden_size}')
  return p
