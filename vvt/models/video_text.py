"""The video-text model: a video tower, a text tower, and the learned scale (and bias) of their similarity.

    module = vvt.models.build(spec)                 # spec.text set (model.text): a VideoTextModel
    variables = module.init(rngs, video)            # video (B, T, H, W, 3); texts: `example_text` (or given)
    v = module.apply(variables, video, method='encode_video')                 # (B_v, E)
    t = module.apply(variables, input_ids, attention_mask, method='encode_text')   # (B_t, E)
    logits = module.apply(variables, v, t, method='similarity')               # (B_v, B_t)
    logits = module.apply(variables, video, input_ids, attention_mask)        # the same, in one call

  video           (B, T, H, W, 3) float pixels as the video model takes them (model.num_frames, model.image_size)
  input_ids       (B, L) int32 token ids, L <= model.text.max_length (vvt/convert/tokenizer.py writes them)
  attention_mask  (B, L) int: 1 for a token, 0 for padding (None: no padding)
  encode_video    the video model's pooled representation (its classifier's input: VideoPrism's attention pooler
                  after its auxiliary layers, `model.attentive_pooler.depth`, and its LayerNorm) (B_v, E),
                  L2-normalised where model.text.normalize
  encode_text     the text tower's embedding (vvt/models/text.py) (B_t, E), normalised likewise
  similarity      exp(s) * v @ t.T + b (B_v, B_t): s the learned `logit_scale` (initial model.text.logit_scale),
                  b the learned `logit_bias` (only where model.text.logit_bias is set)

E is model.hidden_size (model.text.hidden_size, the same). Parameters: `video` (the video model's own tree, no
classification head), `text` (`token_embedding`, `cls`, `block_i`, `encoder_norm`), `logit_scale` () and
`logit_bias` (). A training step passes `train=True` and a 'dropout' rng to each method as to the video models.
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from vvt.models.spec import ModelSpec
from vvt.models.text import TextEncoder

L2_EPS = 1e-6  # x / sqrt(|x|^2 + eps): VideoPrism's l2norm


def l2_normalize(x):
  """x (B, E) over its last axis: x / sqrt(sum x^2 + 1e-6), in float32."""
  x = x.astype(jnp.float32)
  return x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True) + L2_EPS)


def video_spec(spec: ModelSpec) -> ModelSpec:
  """The video tower's spec: the video model without its text tower and without a classification head."""
  return dataclasses.replace(spec, text=None, num_classes=None)


def example_text(spec: ModelSpec, batch: int = 1) -> tuple:
  """(input_ids, attention_mask) of `batch` texts of model.text.max_length padding tokens: inputs to `init`."""
  shape = (batch, spec.text.max_length)
  return jnp.zeros(shape, jnp.int32), jnp.ones(shape, jnp.int32)


class VideoTextModel(nn.Module):
  """A video tower (the family's module of `video_spec(spec)`) and a text tower (`TextEncoder`): see the module
  docstring."""
  spec: ModelSpec  # with `text` set
  backend: str | None = None

  def setup(self):
    from vvt.models import build
    from vvt.models.video_transformer import dtypes
    spec = self.spec
    if spec.text is None:
      raise ValueError('a VideoTextModel needs model.text (its text tower)')
    self.video = build(video_spec(spec), backend=self.backend)
    self.text = TextEncoder(spec.text, spec.layer_norm_scale_offset, spec.dropout_rate, spec.qkv_bias,
                            *dtypes(spec))
    self.logit_scale = self.param('logit_scale', nn.initializers.constant(spec.text.logit_scale), (), jnp.float32)
    if spec.text.logit_bias is not None:
      self.logit_bias = self.param('logit_bias', nn.initializers.constant(spec.text.logit_bias), (), jnp.float32)

  def _normalized(self, x):
    return l2_normalize(x) if self.spec.text.normalize else x.astype(jnp.float32)

  def encode_video(self, video, train: bool = False):
    """video (B, T, H, W, 3) -> (B, E) float32."""
    return self._normalized(self.video(video, train, outputs=('pooled',))['pooled'])

  def encode_text(self, input_ids, attention_mask=None, train: bool = False):
    """input_ids (B, L) int32, attention_mask (B, L) or None -> (B, E) float32."""
    return self._normalized(self.text(input_ids, attention_mask, train))

  def contrastive_scale(self):
    """() float32: what the similarity multiplies the cosines by, exp(logit_scale) (the contrastive loss's)."""
    return jnp.exp(self.logit_scale)

  def similarity(self, video_embeddings, text_embeddings):
    """(B_v, E), (B_t, E) -> logits (B_v, B_t) = exp(logit_scale) * v @ t.T (+ logit_bias)."""
    logits = jnp.exp(self.logit_scale) * jnp.einsum('ve,te->vt', video_embeddings, text_embeddings)
    if self.spec.text.logit_bias is not None:
      logits = logits + self.logit_bias
    return logits

  def __call__(self, video, input_ids=None, attention_mask=None, train: bool = False):
    """The similarity logits (B_v, B_t) of videos (B_v, T, H, W, 3) and texts (B_t, L). Without input_ids: one
    text of padding tokens (`example_text`), what `init` and the video-only callers (`vvt summary`) give."""
    if input_ids is None:
      input_ids, attention_mask = example_text(self.spec)
    return self.similarity(self.encode_video(video, train), self.encode_text(input_ids, attention_mask, train))
