"""Model configuration: the papers' defaults per family, ViT sizes, and validation.

A model config is an `ml_collections.ConfigDict`. `get_config(family=..., **overrides)` fills every field
with the family's paper defaults; `resolve(cfg)` checks it and returns a fully specified copy in which
every derived field (sizes from `variant`, class-token layout, ...) is set. `vvt.models.build` hands that copy to
the modules as explicit fields (`vvt.models.spec.ModelSpec`): no module reads a default or derives a field.
The rules of each attention scheme (stages, class token, classifiers, grid) are its record in
vvt/models/schemes.py.

Field names follow the papers:
  family          'vivit' | 'timesformer' | 'xvit'
  attention       spatiotemporal (ViViT Model 1), factorised_encoder (Model 2), factorised_self_attention
                  (Model 3), factorised_dot_product (Model 4), space / joint / divided / local_global / axial
                  (TimeSformer Fig. 1), space_time_mixing (X-ViT eq. 10)
  variant         'Ti/16', 'B/16', 'L/16x2' (ViViT naming: patch h=w=16, tubelet t=2) ...
  image_size      the frame size: an int S (S x S frames) or a pair (H, W); the tubelet's h divides H, its w W
                  (`vvt.models.frame_size`; the ModelSpec holds (H, W))
  tubelet         (t, h, w) of the tokeniser; t=1 is uniform frame sampling (2D patches per frame)
  mixing          X-ViT space-time mixing (eq. 9): window t_w, shift_div (each neighbour gives 1/shift_div of
                  the channels, rho = 2/shift_div; official default and Kinetics configs 8, SSv2 4),
                  summary_token, num_segments (the official XVIT.NUM_SEGMENTS: frames are mixed only within
                  consecutive segments of num_segments frames; None = num_frames, one segment)
  time_embedding_rows  rows R of the separable time table; temporal index t gets row t mod R (None: one row
                  per temporal index). The official X-ViT backbone always has R = 8.
  pooling         the video representation of a class-token-less model (classifier='gap'): 'mean' (default:
                  the mean of the normalised tokens, scenic's GAP), 'mean_then_norm' (the final LayerNorm of the
                  token mean: VideoMAE's fc_norm, use_mean_pooling=True), 'first_token' (the normalised first
                  token, t = n = 0: VideoMAE with use_mean_pooling=False)
  encoder_norm_eps  eps of the final LayerNorm `encoder_norm` (None: layer_norm_eps); HF VideoMAE's fc_norm
                  has torch's default 1e-5 whatever its config's layer_norm_eps
  key_bias        whether the key projection has a bias where qkv_bias (False: query and value biases only, as
                  VideoMAE / BEiT; a key bias adds the same q.b_k to every logit of a query row, so it never
                  changes attention)
  classifier      'token' (the class token), 'gap' (the tokens pooled by `pooling`), 'attentive' (the attentive
                  pooler: learned query tokens attend over all the normalised tokens, V-JEPA 2's attentive probe /
                  VideoPrism's attention pooling; its fields in `attentive_pooler`)
  attentive_pooler  with classifier='attentive' (vvt/models/poolers.py): num_queries (their outputs averaged),
                  num_heads (None: num_heads), depth (self-attention blocks over the tokens before the queries
                  attend: V-JEPA 2's num_pooler_layers), mlp_dim (those blocks' MLP and the 'block' cross-attention's;
                  None: 4 * hidden_size), head_dim (per-head width of the cross-attention's q, k, v; None:
                  hidden_size / num_heads; VideoPrism: intermediate_size / num_heads), cross_attention ('block':
                  V-JEPA 2's pre-LN cross-attention without output projection, the queries as residual, then an MLP
                  block; 'plain': VideoPrism's q/k/v/out attention followed by a LayerNorm), per_dim_scale
                  (VideoPrism's learned per-dimension query scale: q * 1.4427 * softplus(s) / sqrt(d_h))
  positional_embedding  joint | separable | spatial | sinusoidal | none, or rope: V-JEPA 2's 3D rotary embedding
                  of queries and keys by their (t, h, w), no table, any clip length and frame size
                  (vvt/models/rope.py; single-encoder schemes without a class token)
  attention_logit_cap  None, or c > 0: the encoders' attention scores become c * tanh(scores / c) (VideoPrism: 50)
  layer_norm_scale_offset  every LayerNorm multiplies by offset + scale (VideoPrism 1.0: its scales are stored as
                  deviations from 1; default 0.0: flax's LayerNorm)
  text            None (a video model), or the text tower of a video-text model: vvt/models/text_config.py
  pe_video        family 'pe_video' (Perception Encoder video, a video-text model): its towers' specs,
                  vvt/models/pe_video_config.py; None for the other families
  pos_table_grid  None, or the (t, h, w) token grid the learned tables of attention='space_then_time' were
                  trained at: tables of that size are resized to the model's grid at run time (antialiased
                  bilinear, as VideoPrism), so the same weights run other clip lengths and frame sizes

Memory and speed (the same function whatever their values, up to float rounding):
  attention_impl  how the one attention primitive runs (vvt/models/kernels.py): 'auto' (default: per stage,
                  einsum for groups shorter than 1024 tokens, else splash on TPU / cuDNN dot_product on GPU
                  in bf16 / chunked elsewhere), 'einsum', 'dot_product' (jax.nn.dot_product_attention),
                  'chunked' (blockwise, online softmax, O(N) memory in both passes), 'splash' (Pallas TPU
                  kernel; building the model for another backend is an error). Attention dropout > 0 needs
                  'einsum' or 'auto'.
  remat           rematerialisation of each block: 'none', 'full' (save nothing), or a jax.checkpoint_policies
                  name (REMAT_POLICIES); True / False are 'full' / 'none'.
  scan_layers     the encoder layers as one nn.scan (params stacked along a leading layer axis: compile time
                  independent of depth); vvt.models.layout converts params between the two layouts.
  dtype           compute dtype, 'float32' | 'bfloat16'; param_dtype: the parameters' dtype, same choices.
"""
from __future__ import annotations

import difflib

import ml_collections
from ml_collections import config_dict

from vvt.models import frame_size
from vvt.models import pe_video_config
from vvt.models import schemes
from vvt.models import text_config

# ViT sizes (Dosovitskiy et al., Table 1): hidden size, layers, heads, MLP width.
VIT_SIZES = {
    'Ti': dict(hidden_size=192, num_layers=12, num_heads=3, mlp_dim=768),
    'S': dict(hidden_size=384, num_layers=12, num_heads=6, mlp_dim=1536),
    'B': dict(hidden_size=768, num_layers=12, num_heads=12, mlp_dim=3072),
    'L': dict(hidden_size=1024, num_layers=24, num_heads=16, mlp_dim=4096),
    'H': dict(hidden_size=1280, num_layers=32, num_heads=16, mlp_dim=5120),
}

POSITIONAL_EMBEDDINGS = ('joint', 'separable', 'spatial', 'sinusoidal', 'none', 'rope')
CROSS_ATTENTIONS = ('block', 'plain')  # model.attentive_pooler.cross_attention
ATTENTION_IMPLS = ('auto', 'einsum', 'dot_product', 'chunked', 'splash')
# model.remat: 'none', 'full', or a policy of jax.checkpoint_policies (no jax import here: checked by a test).
REMAT_POLICIES = ('none', 'full', 'dots_saveable', 'dots_with_no_batch_dims_saveable', 'nothing_saveable',
                  'everything_saveable', 'checkpoint_dots', 'checkpoint_dots_with_no_batch_dims')
DTYPES = ('float32', 'bfloat16')
FRAME_AGGREGATIONS = ('mean', 'mean_before_norm', 'temporal_attention')
POOLINGS = ('mean', 'mean_then_norm', 'first_token')  # model.pooling, with classifier='gap'


def _family_defaults(family: str) -> dict:
  """The paper's defaults of each family (and of its official implementation)."""
  if family == 'vivit':  # ViViT sec. 3-4, scenic implementation (flax: tanh GELU, LN eps 1e-6).
    return dict(attention='factorised_encoder', variant='B/16x2', num_frames=32, image_size=224,
                positional_embedding='joint', gelu_approximate=True, frame_aggregation='mean',
                attention_order='space_time', temporal_projection=False)
  if family == 'timesformer':  # TimeSformer sec. 3, official code (exact GELU, LN eps 1e-6).
    return dict(attention='divided', variant='B/16', num_frames=8, image_size=224,
                positional_embedding='separable', gelu_approximate=False, frame_aggregation='mean_before_norm',
                attention_order='time_space', temporal_projection=True)
  if family == 'xvit':  # X-ViT sec. 3, official code (exact GELU; TA head with LN eps 1e-5, no qkv bias).
    return dict(attention='space_time_mixing', variant='B/16', num_frames=8, image_size=224,
                positional_embedding='separable', gelu_approximate=False,
                frame_aggregation='temporal_attention', attention_order='space_time',
                temporal_projection=False)
  if family == 'pe_video':  # Perception Encoder video (vvt/models/pe_video_config.py): its towers in model.pe_video;
    # these video-model fields are ignored (the frames each on their own, as its frame model sees them).
    return dict(attention='space', variant='B/16', num_frames=8, image_size=224, positional_embedding='joint',
                gelu_approximate=False, frame_aggregation='mean', attention_order='space_time',
                temporal_projection=False)
  raise ValueError(f'model.family must be one of {schemes.FAMILIES}, got {family!r}')


def get_config(family: str = 'vivit', **overrides) -> ml_collections.ConfigDict:
  """Returns the model config of `family` with the paper's defaults, updated by `overrides`.

  Fields left as None are derived by `resolve` (sizes from `variant`, tubelet from the patch size, ...).
  """
  fam = _family_defaults(family)
  c = ml_collections.ConfigDict()  # built field by field, then merged with the overrides
  c.family = family
  c.attention = fam['attention']
  c.variant = fam['variant']
  c.num_frames = fam['num_frames']
  c.image_size = fam['image_size']
  c.num_classes = 400
  c.tubelet = None  # (t, h, w); None: (2 for ViViT else 1, patch, patch) from the variant name.
  # ViT sizes; None means "from the variant".
  c.hidden_size = None
  c.num_layers = None
  c.num_heads = None
  c.mlp_dim = None
  c.classifier = 'token'  # 'token' | 'gap' | 'attentive'
  # classifier='attentive': the attentive pooler's fields (module docstring; None: derived by resolve).
  c.attentive_pooler = ml_collections.ConfigDict(dict(
      num_queries=1, num_heads=None, depth=0, mlp_dim=None, head_dim=None, cross_attention='block',
      per_dim_scale=False))
  c.pooling = 'mean'  # with classifier='gap': 'mean' | 'mean_then_norm' | 'first_token' (module docstring)
  c.class_token = None  # 'global' | 'per_frame'; None: derived from family and attention.
  c.positional_embedding = fam['positional_embedding']
  # Model 2 (factorised encoder): temporal transformer depth and sizes (None: same as spatial).
  c.temporal_layers = 4
  c.temporal_num_heads = None
  c.temporal_mlp_dim = None
  # Factorised self-attention / divided: order of the stages and TimeSformer's extra temporal projection.
  c.attention_order = fam['attention_order']  # 'space_time' | 'time_space'
  c.temporal_projection = fam['temporal_projection']
  # Separable embedding: rows of the time table, used periodically (t mod rows); None: one per temporal index.
  c.time_embedding_rows = None
  # X-ViT space-time mixing (eq. 9): temporal window t_w, fraction of channels from each neighbour = 1/shift_div
  # (official default SHIFT_DIV = 8, rho = 25%); frames mix within segments of num_segments frames (None: all).
  c.mixing = ml_collections.ConfigDict(dict(window=1, shift_div=8, summary_token=False, num_segments=None))
  # How per-frame outputs are turned into one video output (per-frame class tokens only).
  c.frame_aggregation = fam['frame_aggregation']
  # X-ViT temporal-attention (TA) head.
  c.temporal_head = ml_collections.ConfigDict(dict(
      num_layers=1, num_heads=None, mlp_ratio=4, qkv_bias=False, layer_norm_eps=1e-5, mlp_dim=None))
  c.representation_size = None
  c.text = None  # a video-text model's text tower (vvt/models/text_config.py); None: a video model
  c.pe_video = None  # family 'pe_video': its towers' specs (vvt/models/pe_video_config.py); None for the others
  _add_numerics(c, fam['gelu_approximate'])
  return _merge(c.to_dict(), overrides)


def _add_numerics(c: ml_collections.ConfigDict, gelu_approximate: bool) -> None:
  """The fields of `get_config` on regularisation, numerics (where the official implementations differ),
  dtypes and memory."""
  # Regularisation.
  c.dropout_rate = 0.0
  c.attention_dropout_rate = 0.0
  c.stochastic_depth = 0.0
  # Numerics of the official implementations differ: make them explicit.
  c.layer_norm_eps = 1e-6
  c.gelu_approximate = gelu_approximate
  c.qkv_bias = True
  c.key_bias = True  # False: query and value biases only (VideoMAE); applies where qkv_bias
  c.encoder_norm_eps = None  # eps of the final LayerNorm; None: layer_norm_eps
  c.layer_norm_scale_offset = 0.0  # every LayerNorm multiplies by offset + scale (VideoPrism: 1.0)
  c.attention_logit_cap = None  # c * tanh(scores / c) in the encoders' attention (VideoPrism: 50.0)
  c.pos_table_grid = None  # space_then_time: the (t, h, w) grid of the learned tables (resized at run time)
  c.dtype = 'float32'  # compute dtype
  c.param_dtype = 'float32'  # dtype of the parameters
  # Memory / speed: implementation of attention, rematerialisation policy, layers as one scan.
  c.attention_impl = 'auto'
  c.remat = 'none'  # or True / False (= 'full' / 'none')
  c.scan_layers = False


def _merge(defaults: dict, overrides) -> ml_collections.ConfigDict:
  """defaults updated by overrides; nested dicts (mixing, temporal_head) merge field by field; any type may
  replace a default (num_classes: int -> dict of heads)."""
  merged = dict(defaults)
  for key, value in dict(overrides).items():
    if isinstance(value, ml_collections.ConfigDict):
      value = value.to_dict()
    if isinstance(merged.get(key), dict) and isinstance(value, dict) and key != 'num_classes':
      value = {**merged[key], **value}
    merged[key] = value
  # remat takes a policy name or a bool (existing configs): a field of any type, also for `c.remat = True`.
  merged['remat'] = config_dict.FieldReference(merged.get('remat', 'none'), field_type=object)
  return ml_collections.ConfigDict(merged)


def parse_variant(variant: str) -> tuple[str, int, int | None]:
  """'B/16x2' -> ('B', 16, 2); 'L/16' -> ('L', 16, None)."""
  try:
    size, rest = variant.split('/')
    if 'x' in rest:
      patch, t = rest.split('x')
      return size, int(patch), int(t)
    return size, int(rest), None
  except ValueError:
    raise ValueError(f"model.variant must look like 'B/16' or 'B/16x2', got {variant!r}") from None


class ModelConfigError(ValueError):
  """Every problem found in a model config, one line each (`problems`, in the order `resolve` checks them)."""

  def __init__(self, problems):
    self.problems = tuple(problems)
    super().__init__('\n'.join(self.problems))


def _collect(problems: list, check, *args) -> None:
  """Runs `check(*args)`, adding the lines of the ValueError it raises (if any) to `problems`."""
  try:
    check(*args)
  except ValueError as e:
    problems.extend(getattr(e, 'problems', None) or [str(e)])


def _raise_if(problems: list) -> None:
  if problems:
    raise ModelConfigError(problems)


_DEFAULTS = get_config('vivit')
_KNOWN_FIELDS = set(_DEFAULTS.keys())
_NESTED_FIELDS = {'mixing': set(_DEFAULTS.mixing.keys()), 'temporal_head': set(_DEFAULTS.temporal_head.keys()),
                  'attentive_pooler': set(_DEFAULTS.attentive_pooler.keys())}


def _check_known(names, known, prefix: str) -> None:
  """ModelConfigError naming every unknown field, each with the closest valid name as a hint."""
  problems = []
  for name in sorted(set(names) - set(known)):
    close = difflib.get_close_matches(name, sorted(known), n=1)
    hint = f' (did you mean {prefix}{close[0]}?)' if close else ''
    problems.append(f'unknown model config field {prefix}{name}{hint}')
  _raise_if(problems)


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _positive_int(name: str, v, optional: bool = False) -> None:
  if optional and v is None:
    return
  if not _is_int(v) or v < 1:
    raise ValueError(f'model.{name} must be a positive int{" or None" if optional else ""}, got {v!r}')


def _rate(name: str, v) -> None:
  if not _is_number(v) or not 0 <= v < 1:
    raise ValueError(f'model.{name} must be a number in [0, 1), got {v!r}')


def _check_ranges(c) -> None:
  """Types and ranges of every numeric field (before anything divides by them): every bad one named."""
  p = []
  for name in ('dropout_rate', 'attention_dropout_rate', 'stochastic_depth'):
    _collect(p, _rate, name, c[name])
  _collect(p, _positive_int, 'num_frames', c.num_frames)
  _collect(p, frame_size.parse, c.image_size, 'model.image_size')
  for name in ('hidden_size', 'num_layers', 'num_heads', 'mlp_dim',  # None: from the variant
               'temporal_num_heads', 'temporal_mlp_dim', 'representation_size', 'time_embedding_rows'):
    _collect(p, _positive_int, name, c[name], True)
  if not _is_int(c.temporal_layers) or c.temporal_layers < 0:
    p.append(f'model.temporal_layers must be an int >= 0 (0 is the average-pool baseline), '
             f'got {c.temporal_layers!r}')
  head = c.temporal_head
  eps = (('layer_norm_eps', c.layer_norm_eps), ('temporal_head.layer_norm_eps', head.layer_norm_eps),
         ('encoder_norm_eps', c.encoder_norm_eps))  # None: layer_norm_eps's
  for name, v in eps:
    if not (v is None and name == 'encoder_norm_eps') and (not _is_number(v) or v <= 0):
      p.append(f'model.{name} must be a number > 0, got {v!r}')
  for name in ('num_layers', 'mlp_ratio'):
    _collect(p, _positive_int, f'temporal_head.{name}', head[name])
  for name in ('num_heads', 'mlp_dim'):
    _collect(p, _positive_int, f'temporal_head.{name}', head[name], True)
  if not _is_int(c.mixing.window) or c.mixing.window < 0:
    p.append(f'model.mixing.window must be an int >= 0, got {c.mixing.window!r}')
  if not _is_int(c.mixing.shift_div) or c.mixing.shift_div < 1:
    p.append(f'model.mixing.shift_div must be an int >= 1, got {c.mixing.shift_div!r}')
  _collect(p, _positive_int, 'mixing.num_segments', c.mixing.num_segments, True)
  _raise_if(p)


def resolve(cfg: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """Checks a model config and returns a copy with every derived field filled in.

  Raises ModelConfigError (a ValueError), one line per problem (`problems`), for unknown fields (with the closest
  valid name), wrong types and ranges, and impossible combinations, before anything is traced or compiled. The
  checks run in three stages, every problem of a stage reported together: the names (and the family, whose
  defaults the others need), then each field on its own (ranges, choices, sizes from the variant), then the
  combinations of fields, which only mean something once every field is valid. The scheme's rules (class
  token, classifiers, grid and head constraints) come from its record in `vvt.models.schemes`.
  """
  problems = []
  c = _merged_with_family_defaults(cfg, problems)
  _collect(problems, _check_ranges, c)
  _collect(problems, _check_choices, c)
  _collect(problems, _check_memory_fields, c)
  if c.get('text') is None:  # a video-text model has no classifier (vvt/models/text_config.py)
    _collect(problems, _check_num_classes, c.num_classes)
  _collect(problems, schemes.get, c.attention)
  _collect(problems, _check_variant, c.variant)
  _raise_if(problems)
  scheme = schemes.get(c.attention)
  _collect(problems, _fill_sizes, c)
  _raise_if(problems)  # the combinations below need the token grid
  grid = token_grid(c)
  _collect(problems, _resolve_class_token, c, scheme)
  _collect(problems, _resolve_pooling, c)
  _collect(problems, _check_scheme_constraints, c, scheme, grid)
  _collect(problems, _resolve_mixing, c, scheme)
  _collect(problems, _resolve_time_embedding, c, scheme, grid[0])
  _collect(problems, _resolve_temporal_sizes, c, scheme)
  _collect(problems, _resolve_encoder_fields, c, scheme, grid)
  _collect(problems, _resolve_attentive_pooler, c)
  problems.extend(text_config.resolve_text(c))
  problems.extend(pe_video_config.resolve_pe_video(c))
  _raise_if(problems)
  return c


def _merged_with_family_defaults(cfg, problems: list) -> ml_collections.ConfigDict:
  """cfg over its family's defaults; unknown field names (nested ones included) added to `problems`. A bad family
  (whose defaults every other check needs) or a nested section that is not one raises at once."""
  _collect(problems, _check_known, cfg.keys(), _KNOWN_FIELDS, 'model.')
  if cfg.get('family') not in schemes.FAMILIES:
    problems.append(f'model.family must be one of {schemes.FAMILIES}, got {cfg.get("family")!r} '
                    '(the other model fields are checked once it is one)')
    raise ModelConfigError(problems)
  c = _merge(get_config(cfg.family).to_dict(), cfg)
  for name, known in _NESTED_FIELDS.items():
    if not isinstance(c[name], (dict, ml_collections.ConfigDict)):
      problems.append(f'model.{name} must be a dict of {sorted(known)}, got {c[name]!r} '
                      '(the other model fields are checked once it is one)')
      raise ModelConfigError(problems)
    _collect(problems, _check_known, c[name].keys(), known, f'model.{name}.')
  return c


def _check_variant(variant) -> None:
  size, _, _ = parse_variant(variant)
  if size not in VIT_SIZES:
    raise ValueError(f'model.variant size must be one of {tuple(VIT_SIZES)}, got {size!r}')


def _fill_sizes(c) -> None:
  """ViT sizes and the tubelet from `variant` where None; the token grid and heads must divide."""
  size, patch, t = parse_variant(c.variant)
  for k, v in VIT_SIZES[size].items():
    if c[k] is None:
      c[k] = v
  if c.tubelet is None:  # 'B/16x2' -> (2, 16, 16); 'B/16' -> (1, 16, 16), uniform frame sampling.
    c.tubelet = (t or 1, patch, patch)
  if (not isinstance(c.tubelet, (tuple, list)) or len(c.tubelet) != 3
      or not all(_is_int(x) and x >= 1 for x in c.tubelet)):
    raise ValueError(f'model.tubelet must be three positive ints (t, h, w), got {c.tubelet!r}')
  c.tubelet = tuple(c.tubelet)
  tt, th, tw = c.tubelet
  problems = []
  if c.num_frames % tt:
    problems.append(f'model.num_frames={c.num_frames} is not divisible by the tubelet length {tt}')
  problems.extend(frame_size.indivisible(c.image_size, (th, tw), 'model.image_size'))
  if c.hidden_size % c.num_heads:
    problems.append(f'model.hidden_size={c.hidden_size} is not divisible by model.num_heads={c.num_heads}')
  _raise_if(problems)


def _check_choices(c) -> None:
  """The fields that take one of a list of names: every bad one named."""
  choices = (('classifier', schemes.CLASSIFIERS), ('positional_embedding', POSITIONAL_EMBEDDINGS),
             ('frame_aggregation', FRAME_AGGREGATIONS), ('pooling', POOLINGS),
             ('attention_order', schemes.ATTENTION_ORDERS),
             ('dtype', DTYPES), ('param_dtype', DTYPES))
  problems = []
  for name, allowed in choices:
    if c[name] not in allowed:
      expected = f'{allowed[0]!r} or {allowed[1]!r}' if len(allowed) == 2 else f'one of {allowed}'
      problems.append(f'model.{name} must be {expected}, got {c[name]!r}')
  _raise_if(problems)


def _resolve_class_token(c, scheme: schemes.Scheme) -> None:
  """class_token from the scheme and family where None; the scheme must allow it with classifier='token'."""
  if c.class_token is None:
    c.class_token = scheme.default_class_token(c.family)
  if c.class_token not in schemes.CLASS_TOKENS:
    raise ValueError(f"model.class_token must be 'global' or 'per_frame', got {c.class_token!r}")
  if c.classifier not in scheme.classifiers:
    raise ValueError(f"model.attention={scheme.name!r} ({scheme.paper}) has no class token: "
                     "set model.classifier='gap'")
  if c.classifier == 'token' and c.class_token == 'per_frame' and not scheme.per_frame_class_token:
    allowed = [s.name for s in schemes.SCHEME_TABLE.values() if s.per_frame_class_token]
    raise ValueError(f"model.class_token='per_frame' works with {', '.join(allowed[:-1])} or {allowed[-1]} "
                     f'attention, not {scheme.name!r}')


def _resolve_pooling(c) -> None:
  """pooling other than 'mean' needs classifier='gap'; encoder_norm_eps from layer_norm_eps where None;
  key_bias must be a bool."""
  if c.pooling != 'mean' and c.classifier != 'gap':
    raise ValueError(f"model.pooling={c.pooling!r} pools a class-token-less model: it needs model.classifier='gap' "
                     f'(classifier={c.classifier!r} reads the class token)')
  if c.encoder_norm_eps is None:
    c.encoder_norm_eps = c.layer_norm_eps
  if not isinstance(c.key_bias, bool):
    raise ValueError(f'model.key_bias must be True or False, got {c.key_bias!r}')


def _check_scheme_constraints(c, scheme: schemes.Scheme, grid) -> None:
  """The token grid and the heads the scheme's groupings need (e.g. local_global: an even grid)."""
  multiple = scheme.grid_multiple
  if any(n % m for n, m in zip(grid, multiple, strict=True)):
    need = 'an even token grid' if set(multiple) <= {1, 2} else f'a token grid divisible by {multiple}'
    raise ValueError(f'model.attention={scheme.name} needs {need} (t, h, w), got {tuple(grid)}')
  if c.num_heads % scheme.head_multiple:
    raise ValueError(f'model.attention={scheme.name} splits the heads among {scheme.head_multiple} groupings: '
                     f'model.num_heads={c.num_heads} must be a multiple of {scheme.head_multiple}')


def _resolve_mixing(c, scheme: schemes.Scheme) -> None:
  """X-ViT mixing: num_segments (None: num_frames); window, shift_div and segments must fit the model."""
  if c.mixing.num_segments is None:
    c.mixing.num_segments = c.num_frames
  if not scheme.temporal_mixing:
    return
  w, div, seg = c.mixing.window, c.mixing.shift_div, c.mixing.num_segments
  if 2 * w * (c.hidden_size // div) > c.hidden_size:
    raise ValueError(f'model.mixing: window={w} and shift_div={div} take more than hidden_size='
                     f'{c.hidden_size} channels from neighbouring frames')
  if c.num_frames % seg:
    raise ValueError(f'model.num_frames={c.num_frames} is not a multiple of model.mixing.num_segments={seg} '
                     '(frames are mixed within consecutive segments of num_segments frames)')
  if seg % c.tubelet[0]:
    raise ValueError(f'model.mixing.num_segments={seg} is not a multiple of the tubelet length {c.tubelet[0]}')


def _resolve_time_embedding(c, scheme: schemes.Scheme, nt: int) -> None:
  """time_embedding_rows: a divisor of n_t for a separable table of a single encoder (None there: n_t)."""
  rows = c.time_embedding_rows
  separable = c.positional_embedding == 'separable' and not scheme.two_encoders
  if rows is not None and not separable:
    raise ValueError(f'model.time_embedding_rows={rows} applies to positional_embedding=\'separable\' of a '
                     f'single-encoder model only, not {c.positional_embedding!r} with attention={c.attention!r}')
  if rows is not None and nt % rows:
    raise ValueError(f'model.time_embedding_rows={rows} does not divide the {nt} temporal indices '
                     f'(model.num_frames={c.num_frames} / tubelet {c.tubelet[0]}): index t uses row t mod {rows}')
  if rows is None and separable:
    c.time_embedding_rows = nt


def _resolve_temporal_sizes(c, scheme: schemes.Scheme) -> None:
  """Heads and MLP width of Model 2's temporal encoder and X-ViT's TA head (None: the encoder's)."""
  if c.temporal_num_heads is None:
    c.temporal_num_heads = c.num_heads
  if c.temporal_mlp_dim is None:
    c.temporal_mlp_dim = c.mlp_dim
  if c.temporal_head.num_heads is None:
    c.temporal_head.num_heads = c.num_heads
  used = (('temporal_num_heads', c.temporal_num_heads, scheme.two_encoders),
          ('temporal_head.num_heads', c.temporal_head.num_heads, c.frame_aggregation == 'temporal_attention'))
  for name, heads, in_use in used:
    if in_use and c.hidden_size % heads:
      raise ValueError(f'model.hidden_size={c.hidden_size} is not divisible by model.{name}={heads}')


def _resolve_encoder_fields(c, scheme: schemes.Scheme, grid) -> None:
  """V-JEPA 2's rope, VideoPrism's logit cap, LayerNorm scale offset and resized position tables."""
  if c.positional_embedding == 'rope':
    if c.classifier == 'token':
      raise ValueError("model.positional_embedding='rope' rotates the patch tokens by their (t, h, w): a class "
                       "token has none; set model.classifier to 'gap' or 'attentive'")
    if scheme.two_encoders or scheme.temporal_mixing:
      raise ValueError(f"model.positional_embedding='rope' needs a single-encoder scheme without X-ViT's mixing, "
                       f'not attention={scheme.name!r}')
    if (c.hidden_size // c.num_heads) % 2:
      raise ValueError(f"model.positional_embedding='rope' rotates channel pairs: the head size "
                       f'{c.hidden_size // c.num_heads} must be even')
  cap = c.attention_logit_cap
  if cap is not None:
    if not _is_number(cap) or cap <= 0:
      raise ValueError(f'model.attention_logit_cap must be a number > 0 or None, got {cap!r}')
    if c.attention_impl not in ('auto', 'einsum'):
      raise ValueError(f'model.attention_impl={c.attention_impl!r} has no logit cap: model.attention_logit_cap='
                       f'{cap} needs attention_impl einsum or auto')
    c.attention_logit_cap = float(cap)
  if not _is_number(c.layer_norm_scale_offset):
    raise ValueError(f'model.layer_norm_scale_offset must be a number, got {c.layer_norm_scale_offset!r}')
  c.layer_norm_scale_offset = float(c.layer_norm_scale_offset)
  table = c.pos_table_grid
  if table is None:
    return
  if (not isinstance(table, (tuple, list)) or len(table) != 3
      or not all(_is_int(x) and x >= 1 for x in table)):
    raise ValueError(f'model.pos_table_grid must be three positive ints (t, h, w) or None, got {table!r}')
  if not scheme.temporal_over_positions or c.positional_embedding != 'joint':
    raise ValueError(f"model.pos_table_grid resizes the learned 'joint' tables of attention='space_then_time', not "
                     f'positional_embedding={c.positional_embedding!r} with attention={scheme.name!r}')
  c.pos_table_grid = tuple(table)


def _resolve_attentive_pooler(c) -> None:
  """attentive_pooler: types, and num_heads / mlp_dim / head_dim from the encoder where None."""
  p = c.attentive_pooler
  _positive_int('attentive_pooler.num_queries', p.num_queries)
  for name in ('num_heads', 'mlp_dim', 'head_dim'):
    _positive_int(f'attentive_pooler.{name}', p[name], optional=True)
  if not _is_int(p.depth) or p.depth < 0:
    raise ValueError(f'model.attentive_pooler.depth must be an int >= 0, got {p.depth!r}')
  if p.cross_attention not in CROSS_ATTENTIONS:
    raise ValueError(f"model.attentive_pooler.cross_attention must be 'block' or 'plain', got {p.cross_attention!r}")
  if not isinstance(p.per_dim_scale, bool):
    raise ValueError(f'model.attentive_pooler.per_dim_scale must be True or False, got {p.per_dim_scale!r}')
  if p.num_heads is None:
    p.num_heads = c.num_heads
  if p.mlp_dim is None:
    p.mlp_dim = 4 * c.hidden_size
  if p.head_dim is None:
    if c.hidden_size % p.num_heads:
      raise ValueError(f'model.hidden_size={c.hidden_size} is not divisible by model.attentive_pooler.num_heads='
                       f'{p.num_heads} (or set attentive_pooler.head_dim)')
    p.head_dim = c.hidden_size // p.num_heads
  used = c.classifier == 'attentive'
  scheme = schemes.get(c.attention)
  if used and scheme.two_encoders and not scheme.temporal_over_positions:
    raise ValueError(f"model.classifier='attentive' pools the tokens of the last encoder: attention={c.attention!r} "
                     "(ViViT Model 2) has pooled each frame to one token before it; use 'token' or 'gap'")
  if used and p.cross_attention == 'block' and p.num_heads * p.head_dim != c.hidden_size:
    raise ValueError(f"model.attentive_pooler.cross_attention='block' has no output projection: num_heads x "
                     f'head_dim = {p.num_heads} x {p.head_dim} must be hidden_size={c.hidden_size}')
  if used and p.depth and c.hidden_size % p.num_heads:
    raise ValueError(f'model.hidden_size={c.hidden_size} is not divisible by model.attentive_pooler.num_heads='
                     f'{p.num_heads} (its self-attention blocks)')


def _check_memory_fields(c) -> None:
  """attention_impl, remat (normalised to a policy name), scan_layers: every bad one named."""
  problems = []
  if c.attention_impl not in ATTENTION_IMPLS:
    close = difflib.get_close_matches(str(c.attention_impl), ATTENTION_IMPLS, n=1)
    hint = f' (did you mean {close[0]!r}?)' if close else ''
    problems.append(f'model.attention_impl must be one of {ATTENTION_IMPLS}, got {c.attention_impl!r}{hint}')
  elif c.attention_impl not in ('auto', 'einsum') and _is_number(c.attention_dropout_rate) and (
      c.attention_dropout_rate > 0):
    problems.append(f'model.attention_impl={c.attention_impl!r} has no attention dropout: model.attention_dropout_rate='
                    f'{c.attention_dropout_rate} needs attention_impl einsum or auto')
  remat = c.remat
  if isinstance(remat, str) and remat.lower() in ('true', 'false'):  # --config.model.remat=True on a str field
    remat = remat.lower() == 'true'
  if isinstance(remat, bool) or remat is None:
    remat = 'full' if remat else 'none'
  if remat not in REMAT_POLICIES:
    close = difflib.get_close_matches(str(remat), REMAT_POLICIES, n=1)
    hint = f' (did you mean {close[0]!r}?)' if close else ''
    problems.append(f'model.remat must be True, False or one of {REMAT_POLICIES}, got {c.remat!r}{hint}')
  else:
    c.remat = remat
  if not isinstance(c.scan_layers, bool):
    problems.append(f'model.scan_layers must be True or False, got {c.scan_layers!r}')
  _raise_if(problems)


def _check_num_classes(num_classes):
  if isinstance(num_classes, int):
    if num_classes < 1:
      raise ValueError(f'model.num_classes must be positive, got {num_classes}')
    return
  try:
    items = dict(num_classes).items()
  except (TypeError, ValueError):
    raise ValueError(f'model.num_classes must be an int or a dict of heads, got {num_classes!r}') from None
  for head, n in items:
    if not isinstance(n, int) or n < 1:
      raise ValueError(f'model.num_classes[{head!r}] must be a positive int, got {n!r}')


def token_grid(cfg) -> tuple[int, int, int]:
  """(n_t, n_h, n_w): the token grid of a resolved config."""
  tt, th, tw = cfg.tubelet
  h, w = frame_size.parse(cfg.image_size)
  return cfg.num_frames // tt, h // th, w // tw
