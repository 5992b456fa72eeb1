"""The text tower of a video-text model: `model.text`, its defaults and its checks (no JAX, no Flax).

`model.text` None (the default) is a video model; a section makes the model a video-text model
(vvt/models/video_text.py): the video model (any family; its classifier's input, `pooled`, is the video
embedding, no classification head) and a text tower whose embedding is compared with it. Fields:

  family          'pe_video': the ModernBERT of Perception Encoder video, its shape in model.pe_video.text
                  (vvt/models/pe_video_config.py; this section's sizes mirror it, max_length is its own);
                  'videoprism': VideoPrism's text encoder (transformers' `VideoPrismTextModel`): token embedding
                  x sqrt(D) + a fixed sinusoidal table, a learned class token appended after the last token,
                  pre-LN transformer layers, a final LayerNorm, the class token's output
  vocab_size      rows of the token embedding (VideoPrism: 32000, its SentencePiece vocabulary)
  hidden_size, num_layers, num_heads, mlp_dim   the tower's sizes (None: the video model's hidden_size,
                  num_heads, mlp_dim)
  max_length      the text length the tokenizer pads and truncates to, the rows of the position table (64)
  activation      the MLP's: 'relu' (VideoPrism), 'gelu' (exact), 'gelu_tanh'
  layer_norm_eps  eps of every LayerNorm of the tower (its scales offset as the video model's:
                  model.layer_norm_scale_offset)
  attention_logit_cap  c * tanh(scores / c) of the tower's attention scores (VideoPrism: 50.0; None: none)
  causal          each token attends to itself and the tokens before it (VideoPrism's text encoder), besides the
                  padding mask
  normalize       both embeddings divided by their L2 norm (x / sqrt(|x|^2 + 1e-6), as VideoPrism)
  logit_scale     the learned log scale s of the similarity logits exp(s) * <v, t> (+ b): its initial value
                  (0.0: the cosine itself, VideoPrism's logits without a temperature)
  logit_bias      the learned bias b: its initial value, or None for no bias (VideoPrism has none)

`resolve_text(c)` checks a model config's text section against the resolved video model and fills its derived
fields; every problem is one line naming the field.
"""
from __future__ import annotations

import difflib

import ml_collections

TEXT_FAMILIES = ('videoprism', 'pe_video')  # pe_video: the ModernBERT of model.pe_video.text
ACTIVATIONS = ('relu', 'gelu', 'gelu_tanh')

DEFAULTS = dict(family='videoprism', vocab_size=32000, hidden_size=None, num_layers=12, num_heads=None,
                mlp_dim=None, max_length=64, activation='relu', layer_norm_eps=1e-6, attention_logit_cap=50.0,
                causal=True, normalize=True, logit_scale=0.0, logit_bias=None)


def text_config(**overrides) -> ml_collections.ConfigDict:
  """A `model.text` section: the defaults (VideoPrism's text encoder) updated by `overrides`."""
  return ml_collections.ConfigDict({**DEFAULTS, **overrides})


def _is_int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool)


def _field_problems(t: dict) -> list[str]:
  """The problems of each field on its own."""
  p = []
  for name in ('vocab_size', 'num_layers', 'max_length', 'hidden_size', 'num_heads', 'mlp_dim'):
    v = t[name]
    if not (v is None and name in ('hidden_size', 'num_heads', 'mlp_dim')) and not (_is_int(v) and v >= 1):
      p.append(f'model.text.{name} must be a positive int, got {v!r}')
  if t['family'] not in TEXT_FAMILIES:
    p.append(f'model.text.family must be one of {TEXT_FAMILIES}, got {t["family"]!r}')
  if t['activation'] not in ACTIVATIONS:
    p.append(f'model.text.activation must be one of {ACTIVATIONS}, got {t["activation"]!r}')
  if not _is_number(t['layer_norm_eps']) or t['layer_norm_eps'] <= 0:
    p.append(f'model.text.layer_norm_eps must be a number > 0, got {t["layer_norm_eps"]!r}')
  cap = t['attention_logit_cap']
  if cap is not None and (not _is_number(cap) or cap <= 0):
    p.append(f'model.text.attention_logit_cap must be a number > 0 or None, got {cap!r}')
  for name in ('causal', 'normalize'):
    if not isinstance(t[name], bool):
      p.append(f'model.text.{name} must be True or False, got {t[name]!r}')
  if not _is_number(t['logit_scale']):
    p.append(f'model.text.logit_scale must be a number, got {t["logit_scale"]!r}')
  if t['logit_bias'] is not None and not _is_number(t['logit_bias']):
    p.append(f'model.text.logit_bias must be a number or None, got {t["logit_bias"]!r}')
  return p


def _unknown(names) -> list[str]:
  out = []
  for name in sorted(set(names) - set(DEFAULTS)):
    close = difflib.get_close_matches(name, sorted(DEFAULTS), n=1)
    out.append(f'unknown model config field model.text.{name}' + (f' (did you mean model.text.{close[0]}?)'
                                                                   if close else ''))
  return out


def resolve_text(c) -> list[str]:
  """Checks `c.text` of a model config whose video fields are resolved; fills hidden_size / num_heads / mlp_dim
  from the video model where None. Returns the problems (one line each; [] when none or no text section)."""
  if c.get('text') is None:
    return []
  given = c.text.to_dict() if isinstance(c.text, ml_collections.ConfigDict) else c.text
  if not isinstance(given, dict):
    return [f'model.text must be a section of text-tower fields or None, got {given!r}']
  problems = _unknown(given)
  t = {**DEFAULTS, **given}
  problems += _field_problems(t)
  if problems:
    return problems
  for name, video in (('hidden_size', 'hidden_size'), ('num_heads', 'num_heads'), ('mlp_dim', 'mlp_dim')):
    t[name] = c[video] if t[name] is None else t[name]
  if t['hidden_size'] % t['num_heads']:
    problems.append(f'model.text.hidden_size={t["hidden_size"]} is not divisible by model.text.num_heads='
                    f'{t["num_heads"]}')
  if t['hidden_size'] != c.hidden_size:
    problems.append(f'model.text.hidden_size={t["hidden_size"]} must be the video embedding\'s size, '
                    f'model.hidden_size={c.hidden_size}: the two embeddings are compared directly')
  if c.representation_size is not None:
    problems.append(f'model.representation_size={c.representation_size}: a video-text model compares the '
                    'pooled representation itself; set it to None')
  t['logit_scale'] = float(t['logit_scale'])
  t['logit_bias'] = None if t['logit_bias'] is None else float(t['logit_bias'])
  t['layer_norm_eps'] = float(t['layer_norm_eps'])
  t['attention_logit_cap'] = None if t['attention_logit_cap'] is None else float(t['attention_logit_cap'])
  c.text = ml_collections.ConfigDict(t)
  return problems
