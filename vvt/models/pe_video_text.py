"""Perception Encoder video's two towers past the frame model, and their similarity (transformers 5.23
`PeVideoModel.forward`, `transformers/models/pe_video/modeling_pe_video.py`).

    module = PeVideoText(temporal_spec, text_spec)
    v = module.apply(variables, frame_features, method='encode_frames')                   # (B_v, E)
    t = module.apply(variables, input_ids, attention_mask, method='encode_text')          # (B_t, E)
    logits = module.apply(variables, v, t, method='similarity')                           # (B_v, B_t)

  frame_features  (B_v, T, F) the frame model's output per frame (vvt/models/pe_temporal.py)
  encode_frames   `video_head`(the frame-level encoder's class token) (B_v, E), not normalised
  encode_text     `text_head`(ModernBERT's final-normed first token) (B_t, E), not normalised
  similarity      s * v @ t.T + b (B_v, B_t): s `logit_scale` and b `logit_bias` as they are (no exp), as
                  PeVideoModel computes `logits_video_text`

E is the text tower's hidden size. Parameters: `temporal`, `video_head`, `text`, `text_head`, `logit_scale` (),
`logit_bias` ().
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from vvt.models.modernbert import ModernBertEncoder
from vvt.models.modernbert import ModernBertSpec
from vvt.models.pe_temporal import PeTemporalEncoder
from vvt.models.pe_temporal import PeTemporalSpec
from vvt.models.pe_temporal import PeVideoHead


class PeVideoText(nn.Module):
  """The frame-level video encoder and ModernBERT with their contrastive heads: see the module docstring."""
  temporal_spec: PeTemporalSpec
  text_spec: ModernBertSpec

  def setup(self):
    embed = self.text_spec.hidden_size
    self.temporal = PeTemporalEncoder(self.temporal_spec)
    self.video_head = PeVideoHead(embed)
    self.text = ModernBertEncoder(self.text_spec)
    self.text_head = PeVideoHead(embed)
    self.logit_scale = self.param('logit_scale', nn.initializers.zeros, (), jnp.float32)
    self.logit_bias = self.param('logit_bias', nn.initializers.zeros, (), jnp.float32)

  def encode_frames(self, frame_features):
    """(B, T, F) -> (B, E) float32."""
    return self.video_head(self.temporal(frame_features))

  def encode_text(self, input_ids, attention_mask=None):
    """(B, L) int ids, (B, L) 0/1 or None -> (B, E) float32."""
    return self.text_head(self.text(input_ids, attention_mask)[:, 0])

  def similarity(self, video_embeddings, text_embeddings):
    """(B_v, E), (B_t, E) -> (B_v, B_t) = logit_scale * v @ t.T + logit_bias."""
    return jnp.einsum('ve,te->vt', video_embeddings, text_embeddings) * self.logit_scale + self.logit_bias

  def __call__(self, frame_features, input_ids, attention_mask=None):
    """The similarity logits (B_v, B_t) of frame features (B_v, T, F) and texts (B_t, L)."""
    return self.similarity(self.encode_frames(frame_features), self.encode_text(input_ids, attention_mask))
