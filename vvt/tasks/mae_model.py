"""VideoMAE's model (Tong et al. 2022, Fig. 1): the backbone's encoder on the visible tokens of a tube mask, a
narrow decoder over the visible tokens and one mask token per masked position, predicting each masked tubelet's
pixels.

    pred = module.apply(variables, video, kept=kept, masked=masked)   # (B, M, t * h * w * 3)

The decoder, as transformers' `VideoMAEForPreTraining`: `encoder_to_decoder` (D -> D', no bias) of the encoder's
tokens (through its final LayerNorm, or as they are with pooling='mean_then_norm': `decoder_input`), plus a fixed
sine-cosine table over the token grid (`get_sinusoid_encoding_table`) at the visible positions; a learned
`mask_token` (1, 1, D') plus the table at the masked positions; the K visible tokens then the M masked ones through
`depth` joint-attention blocks of width D', a LayerNorm and `head` (D' -> the tubelet's pixels); the last M outputs
are the predictions. Its params are `decoder` beside the backbone's, which keep their names (a pretraining run is a
backbone for a probe or `vvt train --init`).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from vvt.models import embedding
from vvt.models import norms
from vvt.models.blocks import Encoder
from vvt.models.embedding import sinusoidal_table
from vvt.models.video_transformer import block_fields
from vvt.models.video_transformer import dtypes
from vvt.tasks import masks

DECODER_NORM_EPS = 1e-5  # transformers' VideoMAEDecoder `norm`: nn.LayerNorm(decoder_hidden_size), torch's default eps


def decoder_input(pooling: str) -> str:
  """The encoder output the decoder reads: its tokens through the final LayerNorm ('encoded'), or as they are
  ('block-1') for a model that normalises the pooled mean instead (pooling='mean_then_norm': VideoMAE's fc_norm,
  which its pretraining encoder, `use_mean_pooling=True`, does not apply to the tokens)."""
  return 'block-1' if pooling == 'mean_then_norm' else 'encoded'


@dataclasses.dataclass(frozen=True)
class DecoderSpec:
  """The decoder of `task.mae`: depth blocks of `width`, `num_heads` heads, predicting `patch_dim` values."""
  depth: int
  width: int
  num_heads: int
  patch_dim: int  # t * h * w * 3 of a tubelet


class MaeDecoder(nn.Module):
  """Visible tokens (B, K, D) at grid indices `kept` (B, K), masked positions `masked` (B, M) -> (B, M, patch_dim)."""
  spec: DecoderSpec
  tokens: int  # n_t * N of the grid: rows of the position table
  block: dict  # EncoderBlock fields (`block_fields`)
  norm_eps: float
  dtype: Any = jnp.float32
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, visible, kept, masked, train: bool = False):
    width = self.spec.width
    dense = lambda n, name, **kw: nn.Dense(n, dtype=self.dtype, param_dtype=self.param_dtype, name=name, **kw)
    x = dense(width, 'encoder_to_decoder', use_bias=False)(visible)
    table = jnp.asarray(sinusoidal_table(self.tokens, width)[0]).astype(x.dtype)  # (n_t * N, D')
    token = self.param('mask_token', nn.initializers.truncated_normal(0.02), (1, 1, width), self.param_dtype)
    y = jnp.concatenate([x + table[kept], token.astype(x.dtype) + table[masked]], axis=1)[:, None]  # (B, 1, L, D')
    y, _, _ = Encoder(self.spec.depth, self.block, name='layers')(y, None, train)
    y = norms.layer_norm(self.norm_eps, self.dtype, self.param_dtype, 'norm')(y[:, 0, visible.shape[1]:])
    return dense(self.spec.patch_dim, 'head')(y).astype(jnp.float32)


def decoder(model_spec, spec: DecoderSpec, backend=None) -> MaeDecoder:
  """The decoder of a backbone of ModelSpec `model_spec` (its numerics and regularisation fields)."""
  t, h, w = model_spec.grid
  block = block_fields(model_spec, ('joint',), (1, 1, t * h * w), num_heads=spec.num_heads,
                       mlp_dim=4 * spec.width, backend=backend)
  block.update(rope=False)
  return MaeDecoder(spec, t * h * w, block, DECODER_NORM_EPS, *dtypes(model_spec), name='decoder')


def mae_model(backbone: nn.Module, spec: DecoderSpec) -> nn.Module:
  """The backbone's module with VideoMAE's decoder: called with `kept` and `masked` (B, M) the predictions of the
  masked tubelets (B, M, patch_dim); otherwise the backbone's call (logits, named outputs, a masked encoder)."""
  base = type(backbone)

  class MaeModel(base):
    decoder_spec: Any = None

    def __call__(self, video, train: bool = False, outputs=None, kept=None, masked=None):
      if masked is not None:
        return self._reconstruct(video, kept, masked, train)
      if self.is_initializing():  # a plain init (the program builder's) makes the decoder's params too
        half_kept, half_masked = masks.tube_mask(jax.random.key(0), video.shape[0], self.spec.grid, 0.5)
        self._reconstruct(video, half_kept, half_masked, False)
      return base.__call__(self, video, train=train, outputs=outputs, kept=kept)

    @nn.compact
    def _reconstruct(self, video, kept, masked, train):
      name = decoder_input(self.spec.pooling)
      encoded = base.__call__(self, video, train=train, outputs=(name,), kept=kept)[name]
      b, d = encoded.shape[0], encoded.shape[-1]
      return decoder(self.spec, self.decoder_spec, self.backend)(encoded.reshape(b, -1, d), kept, masked, train)

  fields = {f.name: getattr(backbone, f.name) for f in dataclasses.fields(backbone)
            if f.init and f.name not in ('parent', 'name')}
  return MaeModel(**fields, decoder_spec=spec)


def patches(video, tubelet):
  """Pixels (B, T, H, W, C) -> tubelets (B, n_t * N, t * h * w * C): tokens in (t, h, w) order, each tubelet's
  values (t, h, w, C) row-major (transformers' VideoMAE `videos_patch`; the masked encoder's tokenisation,
  `vvt.models.embedding.tubelets`)."""
  return embedding.tubelets(video, tubelet)


def normalised(tubelets, channels: int = 3, eps: float = 1e-6):
  """`norm_pix_loss` targets: each tubelet (B, L, P) standardised per channel over its t * h * w values (unbiased
  variance; (x - mean) / (std + eps), as VideoMAE)."""
  b, n, p = tubelets.shape
  x = tubelets.reshape(b, n, p // channels, channels).astype(jnp.float32)
  mean = x.mean(axis=2, keepdims=True)
  std = jnp.sqrt(x.var(axis=2, keepdims=True, ddof=1))
  return ((x - mean) / (std + eps)).reshape(b, n, p)
