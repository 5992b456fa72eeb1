"""Text towers of the video-text models: token ids (B, L) -> one embedding per text (B, D).

`TextEncoder` (model.text.family 'videoprism': transformers' `VideoPrismTextModel`, the text encoder of
VideoPrism's video-text model):

    input_ids (B, L) int32 -> token_embedding (B, L, D) * sqrt(D) + sinusoid(L, D)      (no learned positions)
      -> append the class token `cls` (1, 1, D) * sqrt(D)                                (B, L + 1, D)
      -> num_layers pre-LN blocks (attention with the causal and padding mask, MLP)    (B, L + 1, D)
      -> encoder_norm -> the class token's output                                       (B, D)

The sinusoid of position p, channel i < D / 2 is sin(p / 10000^(2i / D)), of channel D / 2 + i its cos. The
class token comes last, so with `causal` it attends to every real token; the padding mask (attention_mask (B, L),
1 for a token, 0 for padding; None: no padding) hides the padded keys from every query. transformers applies the
causal mask only when it is given an attention_mask (without one its text encoder attends both ways): vvt always
applies it, as the model was trained. Training: dropout (model.dropout_rate) on both residual branches of every
block, no attention dropout. Parameter names follow the video blocks' (`joint_norm`,
`joint_attention/{query,key,value,out}`, `mlp_norm`, `mlp/Dense_0`, `mlp/Dense_1`, under `block_i`), so
the converters map a text layer as a video one.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from vvt.models import kernels
from vvt.models import norms
from vvt.models.spec import TextSpec

ACTIVATIONS = {'relu': nn.relu, 'gelu': lambda x: nn.gelu(x, approximate=False),
               'gelu_tanh': lambda x: nn.gelu(x, approximate=True)}


def sinusoid(length: int, dim: int) -> np.ndarray:
  """(length, dim) float32: sin of position x frequency in the first dim / 2 channels, cos in the others;
  frequencies 1 / 10000^(2i / dim) (VideoPrism's fixed text position table)."""
  inv_freq = 1.0 / (10000 ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
  angles = np.arange(length, dtype=np.float32)[:, None] * inv_freq.astype(np.float32)
  return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def attention_mask_of(attention_mask, length: int, causal: bool):
  """bool (B, 1, L + 1, L + 1): the keys each query attends to, of token mask (B, L) (None: every token real)
  with the class token appended last (always real)."""
  b = attention_mask.shape[0]
  keys = jnp.concatenate([attention_mask.astype(bool), jnp.ones((b, 1), bool)], axis=1)  # (B, L + 1)
  mask = jnp.broadcast_to(keys[:, None, None, :], (b, 1, length + 1, length + 1))
  if causal:
    mask = mask & jnp.tril(jnp.ones((length + 1, length + 1), bool))[None, None]
  return mask


class MaskedSelfAttention(nn.Module):
  """Self-attention over x (B, L, D) with a bool mask (B, 1, L, L): q/k/v (D, H, d_h), out (H, d_h, D), as the
  video blocks' `MultiHeadAttention` names them; scores capped by `logit_cap` before the mask."""
  num_heads: int
  qkv_bias: bool
  logit_cap: float | None
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, mask):
    d = x.shape[-1]
    dense = lambda name: nn.DenseGeneral((self.num_heads, d // self.num_heads), use_bias=self.qkv_bias,
                                         dtype=self.dtype, param_dtype=self.param_dtype,
                                         kernel_init=nn.initializers.xavier_uniform(), name=name)
    q, k, v = dense('query')(x), dense('key')(x), dense('value')(x)  # (B, L, H, d_h)
    y = kernels.einsum_attention(q, k, v, logit_cap=self.logit_cap, mask=mask)
    return nn.DenseGeneral(d, axis=(-2, -1), dtype=self.dtype, param_dtype=self.param_dtype,
                           kernel_init=nn.initializers.xavier_uniform(), name='out')(y)


class TextMlp(nn.Module):
  """Dense_0 (D -> mlp_dim), the activation, Dense_1 (mlp_dim -> D)."""
  mlp_dim: int
  activation: str
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    dense = lambda n, name: nn.Dense(n, dtype=self.dtype, param_dtype=self.param_dtype,
                                     kernel_init=nn.initializers.xavier_uniform(), name=name)
    return dense(x.shape[-1], 'Dense_1')(ACTIVATIONS[self.activation](dense(self.mlp_dim, 'Dense_0')(x)))


class TextBlock(nn.Module):
  """x <- x + Attention(LN(x)); x <- x + Dense_1(act(Dense_0(LN(x)))), with dropout on both branches."""
  spec: TextSpec
  layer_norm_scale_offset: float
  dropout_rate: float
  qkv_bias: bool
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, mask, train: bool = False):
    t = self.spec
    norm = lambda name: norms.layer_norm(t.layer_norm_eps, self.dtype, self.param_dtype, name,
                                         self.layer_norm_scale_offset)
    drop = lambda y: nn.Dropout(self.dropout_rate)(y, deterministic=not train)
    y = MaskedSelfAttention(t.num_heads, self.qkv_bias, t.attention_logit_cap, self.dtype, self.param_dtype,
                            name='joint_attention')(norm('joint_norm')(x), mask)
    x = x + drop(y)
    y = TextMlp(t.mlp_dim, t.activation, self.dtype, self.param_dtype, name='mlp')(norm('mlp_norm')(x))
    return x + drop(y)


class TextEncoder(nn.Module):
  """input_ids (B, L) int, attention_mask (B, L) or None -> the text embedding (B, D) (not normalised): see the
  module docstring. L is at most `spec.max_length` (the position table's rows)."""
  spec: TextSpec
  layer_norm_scale_offset: float = 0.0
  dropout_rate: float = 0.0
  qkv_bias: bool = True
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, input_ids, attention_mask=None, train: bool = False):
    t = self.spec
    b, length = input_ids.shape
    if length > t.max_length:
      raise ValueError(f'input_ids of {length} tokens: model.text.max_length is {t.max_length}')
    if attention_mask is None:
      attention_mask = jnp.ones((b, length), jnp.int32)
    scale = jnp.sqrt(jnp.float32(t.hidden_size))
    embed = nn.Embed(t.vocab_size, t.hidden_size, param_dtype=self.param_dtype,
                     embedding_init=nn.initializers.normal(stddev=t.hidden_size ** -0.5), name='token_embedding')
    x = embed(input_ids.astype(jnp.int32)).astype(jnp.float32) * scale + sinusoid(length, t.hidden_size)[None]
    cls = self.param('cls', nn.initializers.zeros, (1, 1, t.hidden_size), self.param_dtype).astype(jnp.float32)
    x = jnp.concatenate([x, jnp.broadcast_to(cls * scale, (b, 1, t.hidden_size))], axis=1).astype(self.dtype)
    mask = attention_mask_of(attention_mask, length, t.causal)
    for i in range(t.num_layers):
      x = TextBlock(t, self.layer_norm_scale_offset, self.dropout_rate, self.qkv_bias, self.dtype,
                    self.param_dtype, name=f'block_{i}')(x, mask, train)
    x = norms.layer_norm(t.layer_norm_eps, self.dtype, self.param_dtype, 'encoder_norm',
                         self.layer_norm_scale_offset)(x)
    return x[:, -1]
