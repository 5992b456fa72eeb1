"""The symmetric video-text contrastive loss (InfoNCE) with a learnable temperature.

    loss = info_nce(video (B, E), text (B, E), scale, mask (B,))   -> (B,) per pair

Row i of `video` and `text` is a matching pair; every other row of the batch is a negative. The logits are
`scale * video @ text.T` (B, B) of L2-normalised embeddings, `scale` the model's learned inverse temperature (its
log is the trained parameter, as in CLIP); pair i's loss is the mean of its video->text cross-entropy (row i
against the column of its caption) and its text->video one (column i against the row of its video):
mean_i of it is the symmetric cross-entropy of VideoPrism's first pretraining stage (video-text contrastive
training, arXiv 2402.13217, section 3.2) and of CLIP. Rows whose `mask` is 0 (padding, skipped records) are
neither queries nor negatives.

Under the run's mesh the batch is sharded over the data axes; the (B, B) logits are of the global batch, so XLA
all-gathers the other shards' embeddings (B x E floats, not the pixels) and every device's pairs meet the whole
global batch's negatives, whatever the number of devices: the loss of a step is the same on 1 or N devices.
"""
import jax
import jax.numpy as jnp

NEG = -1e9  # the logit of a masked row or column (exp underflows to 0 in float32)


def similarity_logits(video, text, scale, bias=0.0):
  """(B_v, B_t) float32: `scale` * cosine similarities of `video` (B_v, E) and `text` (B_t, E) (normalised here,
  so embeddings already normalised are unchanged) + `bias`."""
  video = normalize(video)
  text = normalize(text)
  return scale * video @ text.T + bias


def normalize(x, eps: float = 1e-6):
  """`x` (..., E) float32 divided by its L2 norm along the last axis."""
  x = x.astype(jnp.float32)
  return x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), eps)


def info_nce(video, text, scale, mask=None):
  """(B,) float32: per pair, the mean of its video->text and text->video softmax cross-entropies over the batch
  (see the module docstring); `mask` (B,) 1 for a real pair, 0 for a row left out (its loss is 0)."""
  logits = similarity_logits(video, text, scale)
  b = logits.shape[0]
  mask = jnp.ones((b,), jnp.float32) if mask is None else mask.astype(jnp.float32)
  keep = mask > 0
  # a masked pair is no negative of any query: its row and column are NEG
  logits = jnp.where(keep[None, :] & keep[:, None], logits, NEG)
  diag = jnp.diagonal(logits)
  v2t = jax.nn.logsumexp(logits, axis=1) - diag
  t2v = jax.nn.logsumexp(logits, axis=0) - diag
  return jnp.where(keep, 0.5 * (v2t + t2v), 0.0)
