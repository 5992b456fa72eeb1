"""Perception Encoder video's two towers and their similarity (transformers 5.23 `PeVideoModel.forward`,
`transformers/models/pe_video/modeling_pe_video.py`).

    module = PeVideoText(temporal_spec, text_spec, frame_spec)
    v = module.apply(variables, video, method='encode_video')                             # (B_v, E)
    v = module.apply(variables, frame_features, method='encode_frames')                   # (B_v, E)
    t = module.apply(variables, input_ids, attention_mask, method='encode_text')          # (B_t, E)
    logits = module.apply(variables, v, t, method='similarity')                           # (B_v, B_t)
    logits = module.apply(variables, video, input_ids, attention_mask)                    # the same, in one call

  video           (B_v, T, H, W, 3) float pixels as the frame model takes them ((H, W) its spec's image_size)
  encode_video    the frame model (vvt/models/pe_frame.py) on each frame, then `encode_frames`
  frame_features  (B_v, T, F) the frame model's output per frame (vvt/models/pe_temporal.py)
  encode_frames   `video_head`(the frame-level encoder's class token) (B_v, E), not normalised
  encode_text     `text_head`(ModernBERT's final-normed first token) (B_t, E), not normalised
  similarity      s * v @ t.T + b (B_v, B_t): s `logit_scale` and b `logit_bias` as they are (no exp), as
                  PeVideoModel computes `logits_video_text`

E is the text tower's hidden size. `vvt.models.build` of a model of family 'pe_video' returns this module
(`VideoTextModel`'s methods and arguments; `train` changes nothing, PE has no dropout). Parameters: `frame`
(where frame_spec is given), `temporal`, `video_head`, `text`, `text_head`, `logit_scale` (), `logit_bias` ().
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from vvt.models.modernbert import ModernBertEncoder
from vvt.models.modernbert import ModernBertSpec
from vvt.models.pe_frame import PeFrameModel
from vvt.models.pe_frame import PeFrameSpec
from vvt.models.pe_temporal import PeTemporalEncoder
from vvt.models.pe_temporal import PeTemporalSpec
from vvt.models.pe_temporal import PeVideoHead


class PeVideoText(nn.Module):
  """The frame-level video encoder and ModernBERT with their contrastive heads: see the module docstring."""
  temporal_spec: PeTemporalSpec
  text_spec: ModernBertSpec
  frame_spec: PeFrameSpec | None = None  # None: no frame model (`encode_frames` only)
  text_length: int = 1  # the tokens of the padding text `__call__` takes without input_ids (model.text.max_length)

  def setup(self):
    embed = self.text_spec.hidden_size
    if self.frame_spec is not None:
      self.frame = PeFrameModel(self.frame_spec)
    self.temporal = PeTemporalEncoder(self.temporal_spec)
    self.video_head = PeVideoHead(embed)
    self.text = ModernBertEncoder(self.text_spec)
    self.text_head = PeVideoHead(embed)
    self.logit_scale = self.param('logit_scale', nn.initializers.zeros, (), jnp.float32)
    self.logit_bias = self.param('logit_bias', nn.initializers.zeros, (), jnp.float32)

  def encode_video(self, video, train: bool = False):
    """(B, T, H, W, 3) -> (B, E) float32 (`train` changes nothing: no dropout); ValueError where (H, W) is not
    the frame model's image_size."""
    b, t, h, w, c = video.shape
    if (h, w) != tuple(self.frame_spec.image_size):
      raise ValueError(f'the PE frame model takes {self.frame_spec.image_size} frames, not {(h, w)}')
    return self.encode_frames(self.frame(video.reshape(b * t, h, w, c)).reshape(b, t, -1))

  def encode_frames(self, frame_features):
    """(B, T, F) -> (B, E) float32."""
    return self.video_head(self.temporal(frame_features))

  def encode_text(self, input_ids, attention_mask=None, train: bool = False):
    """(B, L) int ids, (B, L) 0/1 or None -> (B, E) float32 (`train` changes nothing)."""
    return self.text_head(self.text(input_ids, attention_mask)[:, 0])

  def contrastive_scale(self):
    """() float32: what the similarity multiplies v @ t.T by, `logit_scale` as it is (PeVideoModel takes no exp)."""
    return self.logit_scale

  def similarity(self, video_embeddings, text_embeddings):
    """(B_v, E), (B_t, E) -> (B_v, B_t) = logit_scale * v @ t.T + logit_bias."""
    return jnp.einsum('ve,te->vt', video_embeddings, text_embeddings) * self.logit_scale + self.logit_bias

  def __call__(self, video, input_ids=None, attention_mask=None, train: bool = False):
    """The similarity logits (B_v, B_t) of videos (B_v, T, H, W, 3) and texts (B_t, L): transformers'
    `logits_video_text`. Without input_ids: one text of `text_length` padding tokens (what `init` and the
    video-only callers give, as `VideoTextModel`)."""
    if input_ids is None:
      input_ids = jnp.zeros((1, self.text_length), jnp.int32)
      attention_mask = jnp.ones((1, self.text_length), jnp.int32)
    return self.similarity(self.encode_video(video), self.encode_text(input_ids, attention_mask))
